// Small NN/math ops that OpInfo exercises: threshold, softshrink and
// hardshrink (+ backward), prelu's kernels, rrelu_with_noise (+ backward),
// logit_backward, channel_shuffle, renorm, trace, _logcumsumexp and
// _efficientzerotensor (a plain zero tensor: autograd only
// needs its values). bf16/f16 compute in f32 (opmath) and round once.
#include <ATen/ops/result_type.h>
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;
using ir::Dims;

Value zeros(Builder& b, Value like) { return zero(b, b.elem(like), b.dims(like)); }
Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

void check_float(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t.scalar_type()), "\"", kernel, "\" not implemented for '",
                              c10::toString(t.scalar_type()), "'");
}

// Unary-with-scalars forward: result has self's dtype.
at::Tensor& fwd_into(const char* name, std::vector<Operand> ins, at::Tensor& out, const PointwiseFn& fn) {
  pointwise(name, ins, out, opmath(ins[0].t.scalar_type()), fn);
  return out;
}
at::Tensor fwd_new(const char* name, std::vector<Operand> ins, const PointwiseFn& fn) {
  at::Tensor out = empty_like_tpu(ins[0].t);
  fwd_into(name, std::move(ins), out, fn);
  return out;
}
at::Tensor& fwd_out(const char* name, std::vector<Operand> ins, at::Tensor& out, const PointwiseFn& fn) {
  prepare_out(out, ins[0].t.sizes(), ins[0].t.scalar_type(), name);
  return fwd_into(name, std::move(ins), out, fn);
}
// Backward: operands {grad, self, scalars...}; result dtype of (grad, self).
at::Tensor& bwd_out(const char* name, std::vector<Operand> ins, at::Tensor& out, const PointwiseFn& fn) {
  ScalarType t = at::result_type(ins[0].t, ins[1].t);
  prepare_out(out, broadcast_shape({ins[0].t, ins[1].t}), t, name);
  pointwise(name, ins, out, opmath(t), fn);
  return out;
}
at::Tensor bwd_new(const char* name, std::vector<Operand> ins, const PointwiseFn& fn) {
  ScalarType t = at::result_type(ins[0].t, ins[1].t);
  at::Tensor out = empty_tpu(broadcast_shape({ins[0].t, ins[1].t}), t, ins[0].t.device());
  pointwise(name, ins, out, opmath(t), fn);
  return out;
}

// --- threshold ---------------------------------------------------------------------
// x = {self, threshold, value}: x <= threshold ? value : x (NaN stays NaN).
Value threshold_fn(Builder& b, const Values& x) { return b.select(b.compare(x[0], x[1], Direction::kLe), x[2], x[0]); }
at::Tensor threshold(const at::Tensor& s, const c10::Scalar& th, const c10::Scalar& v) {
  return fwd_new("threshold", {s, th, v}, threshold_fn);
}
at::Tensor& threshold_out(const at::Tensor& s, const c10::Scalar& th, const c10::Scalar& v, at::Tensor& out) {
  return fwd_out("threshold", {s, th, v}, out, threshold_fn);
}
at::Tensor& threshold_(at::Tensor& s, const c10::Scalar& th, const c10::Scalar& v) {
  return fwd_into("threshold", {s, th, v}, s, threshold_fn);
}

// --- softshrink / hardshrink ---------------------------------------------------------
void check_lambd(const c10::Scalar& l) {
  TORCH_CHECK(l.toDouble() >= 0, "lambda must be greater or equal to 0, but found to be ", l.toDouble(), ".");
}
// x = {self, lambd}
Value softshrink_fn(Builder& b, const Values& x) {
  Value v = x[0], l = x[1];
  Value nl = b.neg(l);
  Value r = b.select(b.compare(v, l, Direction::kGt), b.sub(v, l),
                     b.select(b.compare(v, nl, Direction::kLt), b.add(v, l), zeros(b, v)));
  // NaN propagates like CPU.
  return b.select(b.compare(v, v, Direction::kNe), v, r);
}
// Backward of both shrinks: grad where |x| > lambd, else 0. x = {grad, self, lambd}
Value shrink_bwd_fn(Builder& b, const Values& x) {
  Value v = x[1], l = x[2];
  Value inside = b.and_(b.compare(v, b.neg(l), Direction::kGe), b.compare(v, l, Direction::kLe));
  return b.select(inside, zeros(b, x[0]), x[0]);
}
Value hardshrink_fn(Builder& b, const Values& x) {
  Value v = x[0], l = x[1];
  Value inside = b.and_(b.compare(v, b.neg(l), Direction::kGe), b.compare(v, l, Direction::kLe));
  return b.select(inside, zeros(b, v), v);
}
at::Tensor softshrink(const at::Tensor& s, const c10::Scalar& l) {
  check_lambd(l);
  check_float(s, "softshrink_cpu");
  return fwd_new("softshrink", {s, l}, softshrink_fn);
}
at::Tensor& softshrink_out(const at::Tensor& s, const c10::Scalar& l, at::Tensor& out) {
  check_lambd(l);
  check_float(s, "softshrink_cpu");
  return fwd_out("softshrink", {s, l}, out, softshrink_fn);
}
at::Tensor& softshrink_backward_out(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& l, at::Tensor& out) {
  ScalarType t = at::result_type(g, s);
  prepare_out(out, broadcast_shape({g, s}), t, "shrink_backward");
  pointwise("shrink_backward", {g, s, l}, out, t, shrink_bwd_fn);
  return out;
}
at::Tensor softshrink_backward(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& l) {
  at::Tensor out = empty_tpu(broadcast_shape({g, s}), at::result_type(g, s), g.device());
  return softshrink_backward_out(g, s, l, out);
}
// CPU compares hardshrink (and both backward kernels) in the tensor's own
// dtype, with lambd rounded to it; no arithmetic happens, so no opmath.
at::Tensor& hardshrink_out(const at::Tensor& s, const c10::Scalar& l, at::Tensor& out) {
  check_float(s, "hardshrink_cpu");
  prepare_out(out, s.sizes(), s.scalar_type(), "hardshrink");
  pointwise("hardshrink", {s, l}, out, s.scalar_type(), hardshrink_fn);
  return out;
}
at::Tensor hardshrink(const at::Tensor& s, const c10::Scalar& l) {
  at::Tensor out = empty_like_tpu(s);
  return hardshrink_out(s, l, out);
}

// --- prelu ------------------------------------------------------------------------------
// `weight` arrives already shaped to broadcast against self (prelu is composite).
at::Tensor prelu_kernel(const at::Tensor& self, const at::Tensor& weight) {
  ScalarType t = at::result_type(self, weight);
  at::Tensor out = empty_tpu(broadcast_shape({self, weight}), t, self.device());
  pointwise("_prelu_kernel", {self, weight}, out, opmath(t), [](Builder& b, const Values& x) {
    return b.select(b.compare(x[0], zeros(b, x[0]), Direction::kGt), x[0], b.mul(x[1], x[0]));
  });
  return out;
}
// Both gradients come back in the broadcast shape; autograd sums grad_weight
// down to weight's shape.
std::tuple<at::Tensor, at::Tensor> prelu_kernel_backward(const at::Tensor& grad, const at::Tensor& self,
                                                         const at::Tensor& weight) {
  ScalarType t = at::result_type(self, weight);
  auto shape = broadcast_shape({grad, self, weight});
  at::Tensor gi = empty_tpu(shape, t, self.device());
  at::Tensor gw = empty_tpu(shape, t, self.device());
  auto ct = opmath(t);
  ElemType e = to_elem(ct);
  Dims d(shape.begin(), shape.end());
  record::OpCall call("_prelu_kernel_backward");
  call.attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(self);
  call.input(weight);
  call.output(gi);
  call.output(gw);
  call.run([&](Builder& b, const Values& in) {
    Value g = b.broadcast_to(b.convert(in[0], e), d);
    Value x = b.broadcast_to(b.convert(in[1], e), d);
    Value w = b.broadcast_to(b.convert(in[2], e), d);
    Value pos = b.compare(x, zeros(b, x), Direction::kGt);
    return Values{b.select(pos, g, b.mul(w, g)), b.select(pos, zeros(b, x), b.mul(x, g))};
  });
  return {gi, gw};
}

// --- rrelu_with_noise --------------------------------------------------------------------
// Training: noise ~ U(lower, upper) where x < 0 (1 elsewhere) is written into
// `noise` and out = x * noise. Eval: leaky relu with slope (lower + upper) / 2.
void rrelu_into(const at::Tensor& self, const at::Tensor& noise, const c10::Scalar& lower, const c10::Scalar& upper,
                bool training, std::optional<at::Generator> gen, const at::Tensor& out) {
  check_float(self, "rrelu_with_noise_out_cpu");
  if (!training) {
    double slope = (lower.toDouble() + upper.toDouble()) / 2;
    pointwise("rrelu_eval", {self, c10::Scalar(slope)}, out, opmath(self.scalar_type()),
              [](Builder& b, const Values& x) {
                return b.select(b.compare(x[0], zeros(b, x[0]), Direction::kGe), x[0], b.mul(x[0], x[1]));
              });
    return;
  }
  TORCH_CHECK(noise.sizes().equals(self.sizes()), "rrelu_with_noise: noise must have the same shape as self");
  if (self.numel() == 0) return;
  // Uniform samples from the tpu generator, then masked in one program.
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(opmath(self.scalar_type())));
  u.uniform_(lower.toDouble(), upper.toDouble(), gen);
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  record::OpCall call("rrelu_train");
  call.attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(u);
  call.output(out);
  call.output(noise);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], e), r = b.convert(in[1], e);
    Value n = b.select(b.compare(x, zeros(b, x), Direction::kGe), full_like(b, 1.0, x), r);
    return Values{b.mul(x, n), n};
  });
}
at::Tensor rrelu_with_noise(const at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower,
                            const c10::Scalar& upper, bool training, std::optional<at::Generator> gen) {
  at::Tensor out = empty_like_tpu(self);
  rrelu_into(self, noise, lower, upper, training, gen, out);
  return out;
}
at::Tensor& rrelu_with_noise_out(const at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower,
                                 const c10::Scalar& upper, bool training, std::optional<at::Generator> gen,
                                 at::Tensor& out) {
  prepare_out(out, self.sizes(), self.scalar_type(), "rrelu_with_noise");
  rrelu_into(self, noise, lower, upper, training, gen, out);
  return out;
}
at::Tensor& rrelu_with_noise_(at::Tensor& self, at::Tensor& noise, const c10::Scalar& lower, const c10::Scalar& upper,
                              bool training, std::optional<at::Generator> gen) {
  rrelu_into(self, noise, lower, upper, training, gen, self);
  return self;
}
at::Tensor rrelu_with_noise_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& noise,
                                     const c10::Scalar& lower, const c10::Scalar& upper, bool training,
                                     bool self_is_result) {
  double l = lower.toDouble(), u = upper.toDouble();
  if (training && u - l > 1e-6) {
    return bwd_new("rrelu_backward_train", {grad, noise},
                   [](Builder& b, const Values& x) { return b.mul(x[0], x[1]); });
  }
  TORCH_CHECK(!self_is_result || (l + u) / 2 >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported.");
  return bwd_new("rrelu_backward_eval", {grad, self, c10::Scalar((l + u) / 2)}, [](Builder& b, const Values& x) {
    return b.select(b.compare(x[1], zeros(b, x[1]), Direction::kGt), x[0], b.mul(x[0], x[2]));
  });
}

// --- logit_backward ---------------------------------------------------------------------
// grad / (x (1 - x)); outside [eps, 1 - eps] the gradient is 0, and without
// eps it is NaN outside [0, 1].
at::Tensor& logit_backward_out(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps,
                               at::Tensor& out) {
  bool has_eps = eps.has_value() && *eps >= 0;
  double lo = has_eps ? *eps : 0.0;
  ScalarType t = at::result_type(grad, self);
  prepare_out(out, broadcast_shape({grad, self}), t, "logit_backward");
  pointwise(
      "logit_backward", {grad, self, c10::Scalar(lo), c10::Scalar(1.0 - lo)}, out, opmath(t),
      [has_eps](Builder& b, const Values& x) {
        Value g = x[0], v = x[1];
        Value r = b.div(g, b.mul(v, b.sub(full_like(b, 1.0, v), v)));
        Value outside = b.or_(b.compare(v, x[2], Direction::kLt), b.compare(v, x[3], Direction::kGt));
        Value fill = has_eps ? zeros(b, v) : full_like(b, std::numeric_limits<double>::quiet_NaN(), v);
        return b.select(outside, fill, r);
      },
      has_eps);
  return out;
}
at::Tensor logit_backward(const at::Tensor& grad, const at::Tensor& self, std::optional<double> eps) {
  at::Tensor out = empty_tpu(broadcast_shape({grad, self}), at::result_type(grad, self), self.device());
  return logit_backward_out(grad, self, eps, out);
}

// --- _efficientzerotensor ----------------------------------------------------------------
at::Tensor efficientzerotensor(c10::IntArrayRef size, std::optional<ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory) {
  c10::Device dev = device.value_or(c10::Device("tpu"));
  at::Tensor out = empty_tpu(size, dtype.value_or(default_float()), dev);
  if (out.numel() == 0) return out;
  record::OpCall call("_efficientzerotensor");
  call.output(out);
  Dims d(size.begin(), size.end());
  call.attr(size);
  call.run([&](Builder& b, const Values&) { return Values{zero(b, to_elem(out.scalar_type()), d)}; });
  return out;
}

// --- channel_shuffle ---------------------------------------------------------------------
at::Tensor channel_shuffle(const at::Tensor& self, int64_t groups) {
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  int64_t c = self.size(1);
  TORCH_CHECK((c % groups) == 0, "Number of channels must be divisible by groups. Got ", c, " channels and ", groups,
              " groups.");
  at::Tensor out = empty_like_tpu(self);
  if (self.numel() == 0) return out;
  Dims d = dims_of(self);
  record::OpCall call("channel_shuffle");
  call.attr(groups);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Dims split = {d[0], groups, c / groups};
    for (size_t i = 2; i < d.size(); ++i) split.push_back(d[i]);
    Dims perm = {0, 2, 1};
    for (size_t i = 3; i < split.size(); ++i) perm.push_back(i);
    return Values{b.reshape(b.transpose(b.reshape(in[0], split), perm), d)};
  });
  return out;
}

// --- renorm ------------------------------------------------------------------------------
// Each slice along `dim` whose p-norm exceeds maxnorm is scaled by
// maxnorm / (norm + 1e-7), computed in the accumulate type.
at::Tensor& renorm_out(const at::Tensor& self, const c10::Scalar& p_s, int64_t dim, const c10::Scalar& maxnorm_s,
                       at::Tensor& out) {
  double p = p_s.toDouble(), maxnorm = maxnorm_s.toDouble();
  TORCH_CHECK(!p_s.isComplex(), "renorm: p must be real-valued");
  TORCH_CHECK(p > 0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm_s.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm >= 0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm);
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  check_float(self, "renorm_out");
  int64_t d0 = wrap_dim(dim, self.dim());
  prepare_out(out, self.sizes(), self.scalar_type(), "renorm");
  if (self.numel() == 0) return out;
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  Dims d = dims_of(self);
  int64_t mode = std::isinf(p) ? 0 : (p == 1 ? 1 : (p == 2 ? 2 : 3));
  record::OpCall call("renorm");
  call.attr(d0).attr(mode).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.scalar(p, ct);
  call.scalar(maxnorm, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], e);
    Value a = b.abs(x);
    Dims red;
    for (int64_t i = 0; i < (int64_t)d.size(); ++i)
      if (i != d0) red.push_back(i);
    Value n;
    if (mode == 0) {
      n = b.reduce(a, zero(b, e), red, BinaryOp::kMax);
    } else if (mode == 1) {
      n = b.reduce(a, zero(b, e), red, BinaryOp::kAdd);
    } else if (mode == 2) {
      n = b.sqrt(b.reduce(b.mul(x, x), zero(b, e), red, BinaryOp::kAdd));
    } else {
      Value pv = b.broadcast_to(in[1], d);
      Value s = b.reduce(b.pow(a, pv), zero(b, e), red, BinaryOp::kAdd);
      n = b.pow(s, b.div(one(b, e, b.dims(s)), b.broadcast_to(in[1], b.dims(s))));
    }
    Value mx = b.broadcast_to(in[2], b.dims(n));
    Value factor =
        b.select(b.compare(n, mx, Direction::kGt), b.div(mx, b.add(n, full_like(b, 1e-7, n))), one(b, e, b.dims(n)));
    return Values{b.mul(x, b.broadcast_in_dim(factor, d, {d0}))};
  });
  return out;
}
at::Tensor renorm(const at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  at::Tensor out = empty_like_tpu(self);
  return renorm_out(self, p, dim, maxnorm, out);
}
at::Tensor& renorm_(at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  return renorm_out(self, p, dim, maxnorm, self);
}

// --- trace -------------------------------------------------------------------------------
at::Tensor trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t != c10::kBool, "\"trace\" not implemented for 'Bool'");
  ScalarType rt = c10::isIntegralType(t, /*includeBool=*/true) ? c10::kLong : t;
  at::Tensor out = empty_tpu({}, rt, self.device());
  auto ct = opmath(rt);
  ElemType e = to_elem(ct);
  Dims d = dims_of(self);
  record::OpCall call("trace");
  call.attr(static_cast<int64_t>(ct));
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], e);
    Value diag = b.compare(b.iota(d, 0, ElemType::kS64), b.iota(d, 1, ElemType::kS64), Direction::kEq);
    return Values{b.reduce(b.select(diag, x, zeros(b, x)), zero(b, e), {0, 1}, BinaryOp::kAdd)};
  });
  return out;
}

// --- _logcumsumexp -----------------------------------------------------------------------
// log(exp(a) + exp(b)) as CPU computes it: infinities of equal sign stay put.
Value log_add_exp(Builder& b, Value x, Value y) {
  Value mn = b.min(x, y);
  Value mx = b.max(x, y);
  Value r = b.add(mx, b.log1p(b.exp(b.sub(mn, mx))));
  Value inf = full_like(b, std::numeric_limits<double>::infinity(), mn);
  Value infinite = b.compare(b.abs(mn), inf, Direction::kEq);
  Value keep = b.and_(b.compare(mn, mx, Direction::kEq), infinite);
  // NaN propagates explicitly: XLA:CPU's minimum/maximum need not.
  Value nan = b.or_(b.compare(x, x, Direction::kNe), b.compare(y, y, Direction::kNe));
  return b.select(nan, b.add(x, y), b.select(keep, x, r));
}
at::Tensor& logcumsumexp_out(const at::Tensor& self, int64_t dim, at::Tensor& out) {
  check_float(self, "logcumsumexp_out_cpu");
  int64_t r = std::max<int64_t>(self.dim(), 1);
  int64_t d0 = wrap_dim(dim, r);
  prepare_out(out, self.sizes(), self.scalar_type(), "logcumsumexp");
  if (self.numel() == 0) return out;
  // CPU accumulates float in double; an f64 scan here corrupted the heap
  // inside XLA:CPU for some shapes (e.g. [9, 4] along dim 0), so this stays
  // in opmath and the f32 backward (which cancels large terms) is ~1e-3 off.
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  Dims d = dims_of(self);
  Dims d1 = d.empty() ? Dims{1} : d;
  record::OpCall call("_logcumsumexp");
  call.attr(d0).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    // Hillis-Steele scan: log2(n) steps of y[i] = lae(y[i], y[i - k]).
    Value y = b.reshape(b.convert(in[0], e), d1);
    int64_t n = d1[d0];
    for (int64_t k = 1; k < n; k *= 2) {
      Dims start(d1.size(), 0), limit = d1, strides(d1.size(), 1);
      limit[d0] = n - k;
      Value head = b.slice(y, start, limit, strides);
      Dims lo(d1.size(), 0), hi(d1.size(), 0), interior(d1.size(), 0);
      lo[d0] = k;
      Value shifted = b.pad(head, b.constant(-std::numeric_limits<double>::infinity(), e), lo, hi, interior);
      y = log_add_exp(b, y, shifted);
    }
    return Values{b.reshape(y, d)};
  });
  return out;
}
at::Tensor logcumsumexp(const at::Tensor& self, int64_t dim) {
  at::Tensor out = empty_like_tpu(self);
  return logcumsumexp_out(self, dim, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("threshold", threshold);
  m.impl("threshold.out", threshold_out);
  m.impl("threshold_", threshold_);
  m.impl("softshrink", softshrink);
  m.impl("softshrink.out", softshrink_out);
  m.impl("softshrink_backward", softshrink_backward);
  m.impl("softshrink_backward.grad_input", softshrink_backward_out);
  m.impl("hardshrink", hardshrink);
  m.impl("hardshrink.out", hardshrink_out);
  m.impl("hardshrink_backward", softshrink_backward);
  m.impl("hardshrink_backward.grad_input", softshrink_backward_out);
  m.impl("_prelu_kernel", prelu_kernel);
  m.impl("_prelu_kernel_backward", prelu_kernel_backward);
  m.impl("rrelu_with_noise", rrelu_with_noise);
  m.impl("rrelu_with_noise.out", rrelu_with_noise_out);
  m.impl("rrelu_with_noise_", rrelu_with_noise_);
  m.impl("rrelu_with_noise_backward", rrelu_with_noise_backward);
  m.impl("logit_backward", logit_backward);
  m.impl("logit_backward.grad_input", logit_backward_out);
  m.impl("_efficientzerotensor", efficientzerotensor);
  m.impl("channel_shuffle", channel_shuffle);
  m.impl("renorm", renorm);
  m.impl("renorm.out", renorm_out);
  m.impl("renorm_", renorm_);
  m.impl("trace", trace);
  m.impl("_logcumsumexp", logcumsumexp);
  m.impl("_logcumsumexp.out", logcumsumexp_out);
}

}  // namespace
}  // namespace torch_tpu::ops
