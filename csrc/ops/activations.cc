// NN activations and their backward kernels: gelu (exact and tanh), silu,
// softmax and log_softmax. bf16/f16 compute in f32 (PyTorch's opmath type)
// and round once on the way out. Softmax subtracts the row max first so
// large logits do not overflow exp.
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

void check_float(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t.scalar_type()), "\"", kernel, "\" not implemented for '",
                              c10::toString(t.scalar_type()), "'");
}

Value scalar_like(Builder& b, double v, Value like) { return b.constant(v, b.elem(like), b.dims(like)); }

// --- gelu --------------------------------------------------------------------

int64_t gelu_mode(std::string_view approximate) {
  if (approximate == "none") return 0;
  if (approximate == "tanh") return 1;
  TORCH_CHECK(false, "approximate argument must be either none or tanh.");
}

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.3989422804014327;   // 1/sqrt(2*pi)
constexpr double kGeluC = 0.044715;

Value gelu_fwd(Builder& b, Value x, int64_t mode) {
  Value half_x = b.mul(scalar_like(b, 0.5, x), x);
  Value one = scalar_like(b, 1.0, x);
  if (mode == 0) {
    Value e = b.erf(b.mul(x, scalar_like(b, 1.0 / kSqrt2, x)));
    return b.mul(half_x, b.add(one, e));
  }
  Value x3 = b.mul(b.mul(x, x), x);
  Value inner = b.mul(scalar_like(b, kSqrt2OverPi, x), b.add(x, b.mul(scalar_like(b, kGeluC, x), x3)));
  return b.mul(half_x, b.add(one, b.tanh(inner)));
}

// d gelu(x) / dx times grad.
Value gelu_bwd(Builder& b, Value g, Value x, int64_t mode) {
  Value one = scalar_like(b, 1.0, x);
  Value half = scalar_like(b, 0.5, x);
  if (mode == 0) {
    Value cdf = b.mul(half, b.add(one, b.erf(b.mul(x, scalar_like(b, 1.0 / kSqrt2, x)))));
    Value pdf = b.mul(scalar_like(b, kInvSqrt2Pi, x), b.exp(b.mul(scalar_like(b, -0.5, x), b.mul(x, x))));
    return b.mul(g, b.add(cdf, b.mul(x, pdf)));
  }
  Value x2 = b.mul(x, x);
  Value inner = b.mul(scalar_like(b, kSqrt2OverPi, x), b.add(x, b.mul(scalar_like(b, kGeluC, x), b.mul(x2, x))));
  Value t = b.tanh(inner);
  Value d_inner = b.mul(scalar_like(b, kSqrt2OverPi, x), b.add(one, b.mul(scalar_like(b, 3 * kGeluC, x), x2)));
  Value left = b.mul(half, b.add(one, t));
  Value right = b.mul(b.mul(b.mul(half, x), b.sub(one, b.mul(t, t))), d_inner);
  return b.mul(g, b.add(left, right));
}

void gelu_into(const at::Tensor& self, int64_t mode, const at::Tensor& out) {
  pointwise(
      "gelu", {self}, out, opmath(self.scalar_type()),
      [mode](Builder& b, const Values& x) { return gelu_fwd(b, x[0], mode); }, mode);
}

at::Tensor gelu(const at::Tensor& self, std::string_view approximate) {
  int64_t mode = gelu_mode(approximate);
  check_float(self, "GeluKernelImpl");
  at::Tensor out = empty_like_tpu(self);
  gelu_into(self, mode, out);
  return out;
}
at::Tensor& gelu_out(const at::Tensor& self, std::string_view approximate, at::Tensor& out) {
  int64_t mode = gelu_mode(approximate);
  check_float(self, "GeluKernelImpl");
  prepare_out(out, self.sizes(), self.scalar_type(), "gelu");
  gelu_into(self, mode, out);
  return out;
}
at::Tensor& gelu_(at::Tensor& self, std::string_view approximate) {
  int64_t mode = gelu_mode(approximate);
  check_float(self, "GeluKernelImpl");
  gelu_into(self, mode, self);
  return self;
}

void gelu_backward_into(const at::Tensor& grad, const at::Tensor& self, int64_t mode, const at::Tensor& out) {
  pointwise(
      "gelu_backward", {grad, self}, out, opmath(self.scalar_type()),
      [mode](Builder& b, const Values& x) { return gelu_bwd(b, x[0], x[1], mode); }, mode);
}
at::Tensor gelu_backward(const at::Tensor& grad, const at::Tensor& self, std::string_view approximate) {
  int64_t mode = gelu_mode(approximate);
  check_float(self, "GeluBackwardKernelImpl");
  at::Tensor out = empty_tpu(broadcast_shape({grad, self}), self.scalar_type(), self.device());
  gelu_backward_into(grad, self, mode, out);
  return out;
}
at::Tensor& gelu_backward_out(const at::Tensor& grad, const at::Tensor& self, std::string_view approximate,
                              at::Tensor& out) {
  int64_t mode = gelu_mode(approximate);
  check_float(self, "GeluBackwardKernelImpl");
  prepare_out(out, broadcast_shape({grad, self}), self.scalar_type(), "gelu_backward");
  gelu_backward_into(grad, self, mode, out);
  return out;
}

// --- silu --------------------------------------------------------------------

Value silu_fn(Builder& b, const Values& x) { return b.mul(x[0], b.logistic(x[0])); }
// grad * s * (1 + x * (1 - s)), s = sigmoid(x)
Value silu_bwd_fn(Builder& b, const Values& x) {
  Value s = b.logistic(x[1]);
  Value one = scalar_like(b, 1.0, s);
  return b.mul(b.mul(x[0], s), b.add(one, b.mul(x[1], b.sub(one, s))));
}

at::Tensor silu(const at::Tensor& self) {
  check_float(self, "silu");
  at::Tensor out = empty_like_tpu(self);
  pointwise("silu", {self}, out, opmath(self.scalar_type()), silu_fn);
  return out;
}
at::Tensor& silu_out(const at::Tensor& self, at::Tensor& out) {
  check_float(self, "silu");
  prepare_out(out, self.sizes(), self.scalar_type(), "silu");
  pointwise("silu", {self}, out, opmath(self.scalar_type()), silu_fn);
  return out;
}
at::Tensor& silu_(at::Tensor& self) {
  check_float(self, "silu");
  pointwise("silu", {self}, self, opmath(self.scalar_type()), silu_fn);
  return self;
}
at::Tensor silu_backward(const at::Tensor& grad, const at::Tensor& self) {
  check_float(self, "silu_backward");
  at::Tensor out = empty_tpu(broadcast_shape({grad, self}), self.scalar_type(), self.device());
  pointwise("silu_backward", {grad, self}, out, opmath(self.scalar_type()), silu_bwd_fn);
  return out;
}
at::Tensor& silu_backward_out(const at::Tensor& grad, const at::Tensor& self, at::Tensor& out) {
  check_float(self, "silu_backward");
  prepare_out(out, broadcast_shape({grad, self}), self.scalar_type(), "silu_backward");
  pointwise("silu_backward", {grad, self}, out, opmath(self.scalar_type()), silu_bwd_fn);
  return out;
}

// --- softmax / log_softmax ------------------------------------------------------

// Reduces `x` over `dim` and broadcasts the result back to x's shape.
Value reduce_keep(Builder& b, Value x, int64_t dim, BinaryOp kind) {
  Value init = kind == BinaryOp::kMax ? lowest(b, b.elem(x)) : zero(b, b.elem(x));
  Value r = b.reduce(x, init, {dim}, kind);
  Dims mapping;
  for (int64_t i = 0; i < (int64_t)b.dims(x).size(); ++i)
    if (i != dim) mapping.push_back(i);
  return b.broadcast_in_dim(r, b.dims(x), mapping);
}

// Rank-0 tensors are treated as [1] (dim 0), like PyTorch.
Value as_rank1(Builder& b, Value x) { return b.dims(x).empty() ? b.reshape(x, {1}) : x; }

Value softmax_fwd(Builder& b, Value x0, int64_t dim, bool log) {
  Value x = as_rank1(b, x0);
  Value shifted = b.sub(x, reduce_keep(b, x, dim, BinaryOp::kMax));
  Value e = b.exp(shifted);
  Value s = reduce_keep(b, e, dim, BinaryOp::kAdd);
  Value r = log ? b.sub(shifted, b.log(s)) : b.div(e, s);
  return b.reshape(r, b.dims(x0));
}

// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
Value softmax_bwd(Builder& b, Value g0, Value y0, int64_t dim, bool log) {
  Value g = as_rank1(b, g0), y = as_rank1(b, y0);
  Value r;
  if (log) {
    r = b.sub(g, b.mul(b.exp(y), reduce_keep(b, g, dim, BinaryOp::kAdd)));
  } else {
    r = b.mul(y, b.sub(g, reduce_keep(b, b.mul(g, y), dim, BinaryOp::kAdd)));
  }
  return b.reshape(r, b.dims(g0));
}

c10::ScalarType softmax_out_dtype(const at::Tensor& self, bool half_to_float) {
  if (half_to_float) {
    TORCH_CHECK(self.scalar_type() == c10::kHalf, "conversion is supported for Half type only");
    return c10::kFloat;
  }
  return self.scalar_type();
}

template <bool kLog>
void softmax_into(const at::Tensor& self, int64_t dim, const at::Tensor& out) {
  check_float(self, kLog ? "log_softmax_lastdim_kernel_impl" : "softmax_lastdim_kernel_impl");
  int64_t d = wrap_dim(dim, self.dim());
  auto ct = opmath(self.scalar_type());
  record::OpCall call(kLog ? "_log_softmax" : "_softmax");
  call.attr(d).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.output(out);
  call.run(
      [&](Builder& b, const Values& in) { return Values{softmax_fwd(b, b.convert(in[0], to_elem(ct)), d, kLog)}; });
}

template <bool kLog>
at::Tensor softmax(const at::Tensor& self, int64_t dim, bool half_to_float) {
  at::Tensor out = empty_like_tpu(self, softmax_out_dtype(self, half_to_float));
  softmax_into<kLog>(self, dim, out);
  return out;
}
template <bool kLog>
at::Tensor& softmax_out(const at::Tensor& self, int64_t dim, bool half_to_float, at::Tensor& out) {
  prepare_out(out, self.sizes(), softmax_out_dtype(self, half_to_float), "softmax");
  softmax_into<kLog>(self, dim, out);
  return out;
}

template <bool kLog>
void softmax_backward_into(const at::Tensor& grad, const at::Tensor& output, int64_t dim, const at::Tensor& out) {
  TORCH_CHECK(grad.sizes().equals(output.sizes()), "grad_output and output must have the same shape, got ",
              grad.sizes(), " and ", output.sizes());
  int64_t d = wrap_dim(dim, grad.dim());
  auto ct =
      opmath(out.scalar_type() == c10::kDouble || grad.scalar_type() == c10::kDouble ? c10::kDouble : c10::kFloat);
  record::OpCall call(kLog ? "_log_softmax_backward_data" : "_softmax_backward_data");
  call.attr(d).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(output);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    return Values{softmax_bwd(b, b.convert(in[0], e), b.convert(in[1], e), d, kLog)};
  });
}

template <bool kLog>
at::Tensor softmax_backward(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                            c10::ScalarType input_dtype) {
  at::Tensor out = empty_like_tpu(grad, input_dtype);
  softmax_backward_into<kLog>(grad, output, dim, out);
  return out;
}
template <bool kLog>
at::Tensor& softmax_backward_out(const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                                 c10::ScalarType input_dtype, at::Tensor& out) {
  prepare_out(out, grad.sizes(), input_dtype, "softmax_backward");
  softmax_backward_into<kLog>(grad, output, dim, out);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("gelu", gelu);
  m.impl("gelu.out", gelu_out);
  m.impl("gelu_", gelu_);
  m.impl("gelu_backward", gelu_backward);
  m.impl("gelu_backward.grad_input", gelu_backward_out);
  m.impl("silu", silu);
  m.impl("silu.out", silu_out);
  m.impl("silu_", silu_);
  m.impl("silu_backward", silu_backward);
  m.impl("silu_backward.grad_input", silu_backward_out);
  m.impl("_softmax", softmax<false>);
  m.impl("_softmax.out", softmax_out<false>);
  m.impl("_log_softmax", softmax<true>);
  m.impl("_log_softmax.out", softmax_out<true>);
  m.impl("_softmax_backward_data", softmax_backward<false>);
  m.impl("_softmax_backward_data.out", softmax_backward_out<false>);
  m.impl("_log_softmax_backward_data", softmax_backward<true>);
  m.impl("_log_softmax_backward_data.out", softmax_backward_out<true>);
}

}  // namespace
}  // namespace torch_tpu::ops
