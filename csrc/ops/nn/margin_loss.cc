// multi_margin_loss and multilabel_margin_loss (+ backward). Both work on a
// [N, C] view (1-D input is one row) with one-hot masks instead of gathers,
// so out-of-range targets contribute nothing rather than faulting (CPU
// raises; checking would need a device->host sync).
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

constexpr int64_t kNone = 0, kMean = 1;

struct Frames {
  int64_t n, c;
};

Frames frames_of(const at::Tensor& self) {
  int64_t nd = self.dim();
  TORCH_CHECK((nd == 2 && self.size(1) != 0) || (nd == 1 && self.size(0) != 0) || nd == 0,
              "Expected non-empty vector or matrix with optional 0-dim batch size, but got: ", self.sizes());
  if (nd <= 1) return {1, nd == 0 ? 1 : self.size(0)};
  return {self.size(0), self.size(1)};
}

// Per-sample loss [N] reduced as `reduction` asks.
Value reduce_loss(Builder& b, Value per, int64_t reduction, int64_t n, const Dims& out_dims) {
  if (reduction == kNone) return b.reshape(per, out_dims);
  Value s = b.reduce(per, zero(b, b.elem(per)), {0}, BinaryOp::kAdd);
  if (reduction == kMean) s = b.div(s, b.constant(static_cast<double>(n), b.elem(per)));
  return s;
}

// grad_output as a per-sample scale [N].
Value grad_scale(Builder& b, Value g, int64_t reduction, int64_t n) {
  ElemType e = b.elem(g);
  if (reduction == kNone && b.dims(g).size() == 1) return g;
  Value s = b.reshape(g, {});
  if (reduction == kMean) s = b.div(s, b.constant(static_cast<double>(n), e));
  return b.broadcast_in_dim(s, {n}, {});
}

// --- multi_margin_loss -------------------------------------------------------------------

void check_multi_margin(const at::Tensor& self, const at::Tensor& target, const c10::Scalar& p,
                        const std::optional<at::Tensor>& weight, Frames f) {
  TORCH_CHECK(p.toDouble() == 1 || p.toDouble() == 2, "only p == 1 and p == 2 supported");
  TORCH_CHECK(target.dim() <= 1 && target.numel() == f.n, "inconsistent target size, expected ", f.n, " but got ",
              target.sizes());
  if (weight.has_value() && weight->defined()) {
    TORCH_CHECK(weight->dim() <= 1 && weight->numel() == f.c, "inconsistent weight size, expected ", f.c, " but got ",
                weight->sizes());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"multi_margin_loss_cpu_kernel\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}

// Shared pieces: one-hot of the target [N, C], x_y broadcast [N, C], weight_y [N].
struct MultiMargin {
  Value x, onehot, z, wy;
};
MultiMargin multi_margin_parts(Builder& b, Value x0, Value t0, Value margin, const Value* w, Frames f, ElemType e) {
  Dims nc = {f.n, f.c};
  Value x = b.reshape(b.convert(x0, e), nc);
  Value t = b.broadcast_in_dim(b.reshape(b.convert(t0, ElemType::kS64), {f.n}), nc, {0});
  Value onehot = b.compare(t, b.iota(nc, 1, ElemType::kS64), Direction::kEq);
  Value zeros = zero(b, e, nc);
  Value xy = b.reduce(b.select(onehot, x, zeros), zero(b, e), {1}, BinaryOp::kAdd);
  Value z = b.add(b.sub(b.broadcast_to(margin, nc), b.broadcast_in_dim(xy, nc, {0})), x);
  Value wy = b.constant(1.0, e, {f.n});
  if (w) {
    Value wb = b.broadcast_in_dim(b.reshape(b.convert(*w, e), {f.c}), nc, {1});
    wy = b.reduce(b.select(onehot, wb, zeros), zero(b, e), {1}, BinaryOp::kAdd);
  }
  return {x, onehot, z, wy};
}

at::Tensor multi_margin_loss(const at::Tensor& self, const at::Tensor& target, const c10::Scalar& p,
                             const c10::Scalar& margin, const std::optional<at::Tensor>& weight, int64_t reduction) {
  Frames f = frames_of(self);
  check_multi_margin(self, target, p, weight, f);
  bool has_w = weight.has_value() && weight->defined();
  std::vector<int64_t> shape;
  if (reduction == kNone && target.dim() > 0) shape = {f.n};
  at::Tensor out = empty_tpu(shape, self.scalar_type(), self.device());
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  bool p2 = p.toDouble() == 2;
  record::OpCall call("multi_margin_loss");
  call.attr(p2).attr(has_w).attr(reduction).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(target);
  if (has_w) call.input(*weight);
  call.scalar(margin, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value m = in[has_w ? 3 : 2];
    MultiMargin mm = multi_margin_parts(b, in[0], in[1], m, has_w ? &in[2] : nullptr, f, e);
    Dims nc = {f.n, f.c};
    Value h = b.max(mm.z, zero(b, e, nc));
    if (p2) h = b.mul(h, h);
    h = b.select(mm.onehot, zero(b, e, nc), h);
    Value per = b.reduce(h, zero(b, e), {1}, BinaryOp::kAdd);
    per = b.div(b.mul(per, mm.wy), b.constant(static_cast<double>(f.c), e, {f.n}));
    return Values{reduce_loss(b, per, reduction, f.n, Dims(shape.begin(), shape.end()))};
  });
  return out;
}

at::Tensor multi_margin_loss_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                      const c10::Scalar& p, const c10::Scalar& margin,
                                      const std::optional<at::Tensor>& weight, int64_t reduction) {
  Frames f = frames_of(self);
  check_multi_margin(self, target, p, weight, f);
  bool has_w = weight.has_value() && weight->defined();
  at::Tensor out = empty_like_tpu(self);
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  bool p2 = p.toDouble() == 2;
  Dims sd(self.sizes().begin(), self.sizes().end());
  record::OpCall call("multi_margin_loss_backward");
  call.attr(p2).attr(has_w).attr(reduction).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(self);
  call.input(target);
  if (has_w) call.input(*weight);
  call.scalar(margin, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value m = in[has_w ? 4 : 3];
    MultiMargin mm = multi_margin_parts(b, in[1], in[2], m, has_w ? &in[3] : nullptr, f, e);
    Dims nc = {f.n, f.c};
    Value gs = grad_scale(b, b.convert(in[0], e), reduction, f.n);
    Value coef = b.div(b.mul(gs, mm.wy), b.constant(static_cast<double>(f.c), e, {f.n}));
    Value zero_nc = zero(b, e, nc);
    Value d = b.select(b.compare(mm.z, zero_nc, Direction::kGt),
                       p2 ? b.mul(full_like(b, 2, mm.z), mm.z) : full_like(b, 1, mm.z), zero_nc);
    d = b.select(mm.onehot, zero_nc, b.mul(d, b.broadcast_in_dim(coef, nc, {0})));
    Value tot = b.broadcast_in_dim(b.reduce(d, zero(b, e), {1}, BinaryOp::kAdd), nc, {0});
    Value r = b.select(mm.onehot, b.neg(tot), d);
    return Values{b.reshape(r, sd)};
  });
  return out;
}

// --- multilabel_margin_loss --------------------------------------------------------------

void check_multilabel(const at::Tensor& self, const at::Tensor& target, Frames f) {
  if (self.dim() <= 1) {
    TORCH_CHECK(target.dim() <= 1 && target.numel() == f.c, "inconsistent target size: ", target.sizes(),
                " for input of size: ", self.sizes());
  } else {
    TORCH_CHECK(target.dim() == 2 && target.size(0) == f.n && target.size(1) == f.c,
                "inconsistent target size: ", target.sizes(), " for input of size: ", self.sizes());
  }
  TORCH_CHECK(target.scalar_type() == c10::kLong, "expected scalar type Long but found ", target.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()),
                              "\"multilabel_margin_loss_forward_out_frame\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}

struct Multilabel {
  Value x, onehot, is_t, valid, z;  // onehot/z: [N, C(j), C(k)] ; is_t [N, C] (float); valid [N, C] pred
};
Multilabel multilabel_parts(Builder& b, Value x0, Value t0, Frames f, ElemType e) {
  Dims nc = {f.n, f.c}, ncc = {f.n, f.c, f.c};
  Value x = b.reshape(b.convert(x0, e), nc);
  Value t = b.reshape(t0, nc);
  // Targets count up to the first -1 (a running minimum of t >= 0).
  Value nonneg = b.select(b.compare(t, zero(b, ElemType::kS64, nc), Direction::kGe), one(b, ElemType::kS64, nc),
                          zero(b, ElemType::kS64, nc));
  Value run = b.reduce_window(nonneg, one(b, ElemType::kS64), {1, f.c}, {1, 1}, {1, 1}, {1, 1}, {{0, 0}, {f.c - 1, 0}},
                              BinaryOp::kMin);
  Value valid = b.compare(run, one(b, ElemType::kS64, nc), Direction::kEq);
  Value onehot = b.and_(b.broadcast_in_dim(valid, ncc, {0, 1}),
                        b.compare(b.broadcast_in_dim(t, ncc, {0, 1}), b.iota(ncc, 2, ElemType::kS64), Direction::kEq));
  Value zeros3 = zero(b, e, ncc), ones3 = one(b, e, ncc);
  Value oh = b.select(onehot, ones3, zeros3);
  Value is_t = b.reduce(oh, zero(b, e), {1}, BinaryOp::kMax);
  Value xk = b.broadcast_in_dim(x, ncc, {0, 2});
  Value xy = b.reduce(b.select(onehot, xk, zeros3), zero(b, e), {2}, BinaryOp::kAdd);
  Value z = b.add(b.sub(ones3, b.broadcast_in_dim(xy, ncc, {0, 1})), xk);
  return {x, onehot, is_t, valid, z};
}
// Mask of (j, k) terms that count: j a valid target, k not a target.
Value term_mask(Builder& b, const Multilabel& ml, Frames f, ElemType e) {
  Dims ncc = {f.n, f.c, f.c};
  Value not_t = b.compare(b.broadcast_in_dim(ml.is_t, ncc, {0, 2}), zero(b, e, ncc), Direction::kEq);
  return b.and_(b.broadcast_in_dim(ml.valid, ncc, {0, 1}), not_t);
}

std::tuple<at::Tensor, at::Tensor> multilabel_margin_loss_forward(const at::Tensor& self, const at::Tensor& target,
                                                                  int64_t reduction) {
  Frames f = frames_of(self);
  check_multilabel(self, target, f);
  std::vector<int64_t> shape;
  if (reduction == kNone && target.dim() > 1) shape = {f.n};
  at::Tensor out = empty_tpu(shape, self.scalar_type(), self.device());
  at::Tensor is_target = empty_tpu(target.sizes(), self.scalar_type(), self.device());
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  Dims td(target.sizes().begin(), target.sizes().end());
  record::OpCall call("multilabel_margin_loss_forward");
  call.attr(reduction).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(target);
  call.output(out);
  call.output(is_target);
  call.run([&](Builder& b, const Values& in) {
    Multilabel ml = multilabel_parts(b, in[0], in[1], f, e);
    Dims ncc = {f.n, f.c, f.c};
    Value h = b.max(ml.z, zero(b, e, ncc));
    h = b.select(term_mask(b, ml, f, e), h, zero(b, e, ncc));
    Value per = b.reduce(h, zero(b, e), {1, 2}, BinaryOp::kAdd);
    per = b.div(per, b.constant(static_cast<double>(f.c), e, {f.n}));
    return Values{reduce_loss(b, per, reduction, f.n, Dims(shape.begin(), shape.end())), b.reshape(ml.is_t, td)};
  });
  return {out, is_target};
}

at::Tensor multilabel_margin_loss_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                                           int64_t reduction, const at::Tensor& is_target) {
  Frames f = frames_of(self);
  check_multilabel(self, target, f);
  at::Tensor out = empty_like_tpu(self);
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  Dims sd(self.sizes().begin(), self.sizes().end());
  record::OpCall call("multilabel_margin_loss_backward");
  call.attr(reduction).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(self);
  call.input(target);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Multilabel ml = multilabel_parts(b, in[1], in[2], f, e);
    Dims nc = {f.n, f.c}, ncc = {f.n, f.c, f.c};
    Value zeros3 = zero(b, e, ncc);
    Value active = b.and_(term_mask(b, ml, f, e), b.compare(ml.z, zeros3, Direction::kGt));
    Value m = b.select(active, one(b, e, ncc), zeros3);
    Value plus = b.reduce(m, zero(b, e), {1}, BinaryOp::kAdd);  // [N, k]
    Value per_j = b.broadcast_in_dim(b.reduce(m, zero(b, e), {2}, BinaryOp::kAdd), ncc, {0, 1});
    Value minus = b.reduce(b.select(ml.onehot, per_j, zeros3), zero(b, e), {1}, BinaryOp::kAdd);  // [N, k]
    Value gs = grad_scale(b, b.convert(in[0], e), reduction, f.n);
    Value coef = b.broadcast_in_dim(b.div(gs, b.constant(static_cast<double>(f.c), e, {f.n})), nc, {0});
    return Values{b.reshape(b.mul(b.sub(plus, minus), coef), sd)};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("multi_margin_loss", multi_margin_loss);
  m.impl("multi_margin_loss_backward", multi_margin_loss_backward);
  m.impl("multilabel_margin_loss_forward", multilabel_margin_loss_forward);
  m.impl("multilabel_margin_loss_backward", multilabel_margin_loss_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
