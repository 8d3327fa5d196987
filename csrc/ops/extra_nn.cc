// Parametric activations and their backward kernels: elu (celu/selu
// compose onto it), hardtanh, leaky_relu, softplus, hardsigmoid,
// hardswish, mish and glu. Python-number parameters are runtime scalars.
// bf16/f16 compute in f32 (opmath) and round once.
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;
using ir::Dims;

Value gt(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kGt); }
Value zeros(Builder& b, Value like) { return zero(b, b.elem(like), b.dims(like)); }

void check_float(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t.scalar_type()), "\"", kernel, "\" not implemented for '",
                              c10::toString(t.scalar_type()), "'");
}

// Forward: out has self's dtype. Operands: {self, scalars...}.
void fwd(const char* name, std::vector<Operand> ins, const at::Tensor& out, const PointwiseFn& fn) {
  pointwise(name, ins, out, opmath(ins[0].t.scalar_type()), fn);
}
at::Tensor fwd_new(const char* name, std::vector<Operand> ins, const PointwiseFn& fn) {
  at::Tensor out = empty_like_tpu(ins[0].t);
  fwd(name, std::move(ins), out, fn);
  return out;
}
at::Tensor& fwd_out(const char* name, std::vector<Operand> ins, at::Tensor& out, const PointwiseFn& fn) {
  prepare_out(out, ins[0].t.sizes(), ins[0].t.scalar_type(), name);
  fwd(name, std::move(ins), out, fn);
  return out;
}
// Backward: operands {grad, self, scalars...}; result dtype of (grad, self).
at::Tensor bwd_new(const char* name, std::vector<Operand> ins, const PointwiseFn& fn) {
  ScalarType t = at::result_type(ins[0].t, ins[1].t);
  at::Tensor out = empty_tpu(broadcast_shape({ins[0].t, ins[1].t}), t, ins[0].t.device());
  pointwise(name, ins, out, opmath(t), fn);
  return out;
}
at::Tensor& bwd_out(const char* name, std::vector<Operand> ins, at::Tensor& out, const PointwiseFn& fn) {
  ScalarType t = at::result_type(ins[0].t, ins[1].t);
  prepare_out(out, broadcast_shape({ins[0].t, ins[1].t}), t, name);
  pointwise(name, ins, out, opmath(t), fn);
  return out;
}

// --- elu -------------------------------------------------------------------------
// x = {self, alpha, scale, input_scale}
Value elu_fn(Builder& b, const Values& x) {
  Value v = x[0];
  Value neg = b.mul(b.mul(b.expm1(b.mul(v, x[3])), x[1]), x[2]);
  return b.select(gt(b, v, zeros(b, v)), b.mul(v, x[2]), neg);
}
at::Tensor elu(const at::Tensor& s, const c10::Scalar& a, const c10::Scalar& sc, const c10::Scalar& is) {
  check_float(s, "elu_cpu");
  return fwd_new("elu", {s, a, sc, is}, elu_fn);
}
at::Tensor& elu_out(const at::Tensor& s, const c10::Scalar& a, const c10::Scalar& sc, const c10::Scalar& is,
                    at::Tensor& out) {
  check_float(s, "elu_cpu");
  return fwd_out("elu", {s, a, sc, is}, out, elu_fn);
}
at::Tensor& elu_(at::Tensor& s, const c10::Scalar& a, const c10::Scalar& sc, const c10::Scalar& is) {
  check_float(s, "elu_cpu");
  fwd("elu", {s, a, sc, is}, s, elu_fn);
  return s;
}
// x = {grad, self_or_result, alpha, scale, input_scale}
template <bool kIsResult>
Value elu_bwd_fn(Builder& b, const Values& x) {
  Value g = x[0], v = x[1];
  Value neg_coef = b.mul(x[2], x[3]);
  Value neg = kIsResult ? b.mul(b.mul(g, x[4]), b.add(v, neg_coef))
                        : b.mul(b.mul(b.mul(g, x[4]), neg_coef), b.exp(b.mul(v, x[4])));
  return b.select(b.compare(v, zeros(b, v), Direction::kLe), neg, b.mul(g, x[3]));
}
void check_elu_bwd(const c10::Scalar& a, bool is_result) {
  TORCH_CHECK(!is_result || a.toDouble() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call "
              "out-of-place version instead.");
}
at::Tensor elu_backward(const at::Tensor& g, const c10::Scalar& a, const c10::Scalar& sc, const c10::Scalar& is,
                        bool is_result, const at::Tensor& s) {
  check_elu_bwd(a, is_result);
  return bwd_new(is_result ? "elu_backward_r" : "elu_backward", {g, s, a, sc, is},
                 is_result ? elu_bwd_fn<true> : elu_bwd_fn<false>);
}
at::Tensor& elu_backward_out(const at::Tensor& g, const c10::Scalar& a, const c10::Scalar& sc, const c10::Scalar& is,
                             bool is_result, const at::Tensor& s, at::Tensor& out) {
  check_elu_bwd(a, is_result);
  return bwd_out(is_result ? "elu_backward_r" : "elu_backward", {g, s, a, sc, is}, out,
                 is_result ? elu_bwd_fn<true> : elu_bwd_fn<false>);
}

// --- hardtanh ------------------------------------------------------------------------
// Clamp that keeps NaN (as CPU's clamp does).
Value hardtanh_fn(Builder& b, const Values& x) {
  Value v = x[0];
  Value r = b.select(b.compare(v, x[1], Direction::kLt), x[1], v);
  return b.select(b.compare(v, x[2], Direction::kGt), x[2], r);
}
void check_hardtanh(const at::Tensor& s) {
  TORCH_CHECK(s.scalar_type() != c10::kBool, "Bool inputs not supported for hardtanh");
}
at::Tensor hardtanh(const at::Tensor& s, const c10::Scalar& lo, const c10::Scalar& hi) {
  check_hardtanh(s);
  return fwd_new("hardtanh", {s, lo, hi}, hardtanh_fn);
}
at::Tensor& hardtanh_out(const at::Tensor& s, const c10::Scalar& lo, const c10::Scalar& hi, at::Tensor& out) {
  check_hardtanh(s);
  return fwd_out("hardtanh", {s, lo, hi}, out, hardtanh_fn);
}
at::Tensor& hardtanh_(at::Tensor& s, const c10::Scalar& lo, const c10::Scalar& hi) {
  check_hardtanh(s);
  fwd("hardtanh", {s, lo, hi}, s, hardtanh_fn);
  return s;
}
Value hardtanh_bwd_fn(Builder& b, const Values& x) {
  Value v = x[1];
  Value outside = b.or_(b.compare(v, x[2], Direction::kLe), b.compare(v, x[3], Direction::kGe));
  return b.select(outside, zeros(b, x[0]), x[0]);
}
at::Tensor hardtanh_backward(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& lo, const c10::Scalar& hi) {
  return bwd_new("hardtanh_backward", {g, s, lo, hi}, hardtanh_bwd_fn);
}
at::Tensor& hardtanh_backward_out(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& lo,
                                  const c10::Scalar& hi, at::Tensor& out) {
  return bwd_out("hardtanh_backward", {g, s, lo, hi}, out, hardtanh_bwd_fn);
}

// --- leaky_relu --------------------------------------------------------------------------
Value leaky_fn(Builder& b, const Values& x) { return b.select(gt(b, x[0], zeros(b, x[0])), x[0], b.mul(x[0], x[1])); }
at::Tensor leaky_relu(const at::Tensor& s, const c10::Scalar& slope) {
  check_float(s, "leaky_relu_cpu");
  return fwd_new("leaky_relu", {s, slope}, leaky_fn);
}
at::Tensor& leaky_relu_out(const at::Tensor& s, const c10::Scalar& slope, at::Tensor& out) {
  check_float(s, "leaky_relu_cpu");
  return fwd_out("leaky_relu", {s, slope}, out, leaky_fn);
}
at::Tensor& leaky_relu_(at::Tensor& s, const c10::Scalar& slope) {
  check_float(s, "leaky_relu_cpu");
  fwd("leaky_relu", {s, slope}, s, leaky_fn);
  return s;
}
Value leaky_bwd_fn(Builder& b, const Values& x) {
  return b.select(gt(b, x[1], zeros(b, x[1])), x[0], b.mul(x[0], x[2]));
}
void check_leaky_bwd(const c10::Scalar& slope, bool self_is_result) {
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call "
              "out-of-place version instead. File an issue at https://github.com/pytorch/pytorch if you do "
              "require supporting in-place leakRelu backward calculation with negative slope");
}
at::Tensor leaky_relu_backward(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& slope, bool r) {
  check_leaky_bwd(slope, r);
  return bwd_new("leaky_relu_backward", {g, s, slope}, leaky_bwd_fn);
}
at::Tensor& leaky_relu_backward_out(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& slope, bool r,
                                    at::Tensor& out) {
  check_leaky_bwd(slope, r);
  return bwd_out("leaky_relu_backward", {g, s, slope}, out, leaky_bwd_fn);
}

// --- softplus ------------------------------------------------------------------------------
// x = {self, beta, threshold}
Value softplus_fn(Builder& b, const Values& x) {
  Value bx = b.mul(x[0], x[1]);
  Value soft = b.div(b.log1p(b.exp(bx)), x[1]);
  return b.select(gt(b, bx, x[2]), x[0], soft);
}
at::Tensor softplus(const at::Tensor& s, const c10::Scalar& beta, const c10::Scalar& th) {
  check_float(s, "softplus_cpu");
  return fwd_new("softplus", {s, beta, th}, softplus_fn);
}
at::Tensor& softplus_out(const at::Tensor& s, const c10::Scalar& beta, const c10::Scalar& th, at::Tensor& out) {
  check_float(s, "softplus_cpu");
  return fwd_out("softplus", {s, beta, th}, out, softplus_fn);
}
// x = {grad, self, beta, threshold}
Value softplus_bwd_fn(Builder& b, const Values& x) {
  Value bx = b.mul(x[1], x[2]);
  Value z = b.exp(bx);
  Value soft = b.div(b.mul(x[0], z), b.add(z, full_like(b, 1.0, z)));
  return b.select(gt(b, bx, x[3]), x[0], soft);
}
at::Tensor softplus_backward(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& beta, const c10::Scalar& th) {
  return bwd_new("softplus_backward", {g, s, beta, th}, softplus_bwd_fn);
}
at::Tensor& softplus_backward_out(const at::Tensor& g, const at::Tensor& s, const c10::Scalar& beta,
                                  const c10::Scalar& th, at::Tensor& out) {
  return bwd_out("softplus_backward", {g, s, beta, th}, out, softplus_bwd_fn);
}

// --- hardsigmoid / hardswish / mish ------------------------------------------------------------
Value relu6_of(Builder& b, Value v) {  // min(max(v, 0), 6)
  Value r = b.max(v, zeros(b, v));
  return b.min(r, full_like(b, 6.0, v));
}
Value hardsigmoid_fn(Builder& b, const Values& x) {
  return b.div(relu6_of(b, b.add(x[0], full_like(b, 3.0, x[0]))), full_like(b, 6.0, x[0]));
}
Value hardswish_fn(Builder& b, const Values& x) { return b.mul(x[0], hardsigmoid_fn(b, x)); }
Value mish_fn(Builder& b, const Values& x) {
  Value sp = b.log1p(b.exp(x[0]));
  return b.mul(x[0], b.tanh(sp));
}
Value hardsigmoid_bwd_fn(Builder& b, const Values& x) {
  Value v = x[1];
  Value inside = b.and_(gt(b, v, full_like(b, -3.0, v)), b.compare(v, full_like(b, 3.0, v), Direction::kLt));
  return b.select(inside, b.div(x[0], full_like(b, 6.0, x[0])), zeros(b, x[0]));
}
Value hardswish_bwd_fn(Builder& b, const Values& x) {
  Value g = x[0], v = x[1];
  Value mid = b.mul(g, b.add(b.div(v, full_like(b, 3.0, v)), full_like(b, 0.5, v)));
  // Boundaries as CPU: 0 at x <= -3, grad at x >= 3.
  Value r = b.select(b.compare(v, full_like(b, 3.0, v), Direction::kLt), mid, g);
  return b.select(b.compare(v, full_like(b, -3.0, v), Direction::kLe), zeros(b, g), r);
}

#define SIMPLE_ACT(n, kernel)                                 \
  at::Tensor n(const at::Tensor& s) {                         \
    check_float(s, kernel);                                   \
    return fwd_new(#n, {s}, n##_fn);                          \
  }                                                           \
  at::Tensor& n##_out(const at::Tensor& s, at::Tensor& out) { \
    check_float(s, kernel);                                   \
    return fwd_out(#n, {s}, out, n##_fn);                     \
  }                                                           \
  at::Tensor& n##_(at::Tensor& s) {                           \
    check_float(s, kernel);                                   \
    fwd(#n, {s}, s, n##_fn);                                  \
    return s;                                                 \
  }
SIMPLE_ACT(hardsigmoid, "hardsigmoid_cpu")
SIMPLE_ACT(hardswish, "hardswish_cpu")
SIMPLE_ACT(mish, "mish_cpu")
#undef SIMPLE_ACT

at::Tensor hardsigmoid_backward(const at::Tensor& g, const at::Tensor& s) {
  return bwd_new("hardsigmoid_backward", {g, s}, hardsigmoid_bwd_fn);
}
at::Tensor& hardsigmoid_backward_out(const at::Tensor& g, const at::Tensor& s, at::Tensor& out) {
  return bwd_out("hardsigmoid_backward", {g, s}, out, hardsigmoid_bwd_fn);
}
at::Tensor hardswish_backward(const at::Tensor& g, const at::Tensor& s) {
  return bwd_new("hardswish_backward", {g, s}, hardswish_bwd_fn);
}

// --- glu ------------------------------------------------------------------------------------------
int64_t glu_dim(const at::Tensor& s, int64_t dim) {
  TORCH_CHECK(s.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = wrap_dim(dim, s.dim());
  TORCH_CHECK(s.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", s.size(d));
  return d;
}
std::pair<Value, Value> halves(Builder& b, Value v, int64_t d) {
  Dims sh = b.dims(v);
  Dims start(sh.size(), 0), mid = sh, strides(sh.size(), 1);
  mid[d] = sh[d] / 2;
  Dims start2 = start;
  start2[d] = sh[d] / 2;
  return {b.slice(v, start, mid, strides), b.slice(v, start2, sh, strides)};
}
void glu_into(const at::Tensor& s, int64_t d, const at::Tensor& out) {
  ScalarType ct = opmath(s.scalar_type());
  record::OpCall call("glu");
  call.attr(d).attr(static_cast<int64_t>(ct));
  call.input(s);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    auto [a, g] = halves(b, b.convert(in[0], to_elem(ct)), d);
    return Values{b.mul(a, b.logistic(g))};
  });
}
std::vector<int64_t> glu_shape(const at::Tensor& s, int64_t d) {
  auto sh = s.sizes().vec();
  sh[d] /= 2;
  return sh;
}
at::Tensor glu(const at::Tensor& s, int64_t dim) {
  check_float(s, "glu_cpu");
  int64_t d = glu_dim(s, dim);
  at::Tensor out = empty_tpu(glu_shape(s, d), s.scalar_type(), s.device());
  glu_into(s, d, out);
  return out;
}
at::Tensor& glu_out(const at::Tensor& s, int64_t dim, at::Tensor& out) {
  check_float(s, "glu_cpu");
  int64_t d = glu_dim(s, dim);
  prepare_out(out, glu_shape(s, d), s.scalar_type(), "glu");
  glu_into(s, d, out);
  return out;
}
void glu_backward_into(const at::Tensor& g, const at::Tensor& s, int64_t d, const at::Tensor& out) {
  TORCH_CHECK(g.sizes().equals(glu_shape(s, d)), "glu_backward: grad_output has the wrong shape");
  ScalarType ct = opmath(s.scalar_type());
  record::OpCall call("glu_backward");
  call.attr(d).attr(static_cast<int64_t>(ct));
  call.input(g);
  call.input(s);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value gr = b.convert(in[0], e);
    auto [a, h] = halves(b, b.convert(in[1], e), d);
    Value sg = b.logistic(h);
    Value ga = b.mul(gr, sg);
    Value gb = b.mul(b.mul(ga, a), b.sub(full_like(b, 1.0, sg), sg));
    return Values{b.concatenate({ga, gb}, d)};
  });
}
at::Tensor glu_backward(const at::Tensor& g, const at::Tensor& s, int64_t dim) {
  int64_t d = glu_dim(s, dim);
  at::Tensor out = empty_like_tpu(s);
  glu_backward_into(g, s, d, out);
  return out;
}
at::Tensor& glu_backward_out(const at::Tensor& g, const at::Tensor& s, int64_t dim, at::Tensor& out) {
  int64_t d = glu_dim(s, dim);
  prepare_out(out, s.sizes(), s.scalar_type(), "glu_backward");
  glu_backward_into(g, s, d, out);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("elu", elu);
  m.impl("elu.out", elu_out);
  m.impl("elu_", elu_);
  m.impl("elu_backward", elu_backward);
  m.impl("elu_backward.grad_input", elu_backward_out);
  m.impl("hardtanh", hardtanh);
  m.impl("hardtanh.out", hardtanh_out);
  m.impl("hardtanh_", hardtanh_);
  m.impl("hardtanh_backward", hardtanh_backward);
  m.impl("hardtanh_backward.grad_input", hardtanh_backward_out);
  m.impl("leaky_relu", leaky_relu);
  m.impl("leaky_relu.out", leaky_relu_out);
  m.impl("leaky_relu_", leaky_relu_);
  m.impl("leaky_relu_backward", leaky_relu_backward);
  m.impl("leaky_relu_backward.grad_input", leaky_relu_backward_out);
  m.impl("softplus", softplus);
  m.impl("softplus.out", softplus_out);
  m.impl("softplus_backward", softplus_backward);
  m.impl("softplus_backward.grad_input", softplus_backward_out);
  m.impl("hardsigmoid", hardsigmoid);
  m.impl("hardsigmoid.out", hardsigmoid_out);
  m.impl("hardsigmoid_", hardsigmoid_);
  m.impl("hardsigmoid_backward", hardsigmoid_backward);
  m.impl("hardsigmoid_backward.grad_input", hardsigmoid_backward_out);
  m.impl("hardswish", hardswish);
  m.impl("hardswish.out", hardswish_out);
  m.impl("hardswish_", hardswish_);
  m.impl("hardswish_backward", hardswish_backward);
  m.impl("mish", mish);
  m.impl("mish.out", mish_out);
  m.impl("mish_", mish_);
  m.impl("glu", glu);
  m.impl("glu.out", glu_out);
  m.impl("glu_backward", glu_backward);
  m.impl("glu_backward.grad_input", glu_backward_out);
}

}  // namespace
}  // namespace torch_tpu::ops
