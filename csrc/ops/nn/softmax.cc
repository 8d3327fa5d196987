// softmax / log_softmax (_softmax, _log_softmax) and their backward kernels
// (_softmax_backward_data, _log_softmax_backward_data), functional and out=.
// bf16/f16 compute in f32 (PyTorch's opmath type) and round once on the way
// out. Softmax subtracts the row max first so large logits do not overflow
// exp.
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

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

// A result of input's sizes, contiguous.
OutMeta softmax_meta(const at::Tensor& like, c10::ScalarType dtype) {
  OutMeta m{like.sizes().vec(), dtype, like.device()};
  m.operand_layout = false;
  return m;
}

template <bool kLog>
struct Softmax {
  static constexpr const char* kName = "softmax";
  static OutMeta meta(const at::Tensor& self, int64_t, bool half_to_float) {
    return softmax_meta(self, softmax_out_dtype(self, half_to_float));
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, int64_t dim, bool) {
    softmax_into<kLog>(self, dim, out);
  }
};

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
struct SoftmaxBackward {
  static constexpr const char* kName = "softmax_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor&, int64_t, c10::ScalarType input_dtype) {
    return softmax_meta(grad, input_dtype);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& grad, const at::Tensor& output, int64_t dim,
                   c10::ScalarType) {
    softmax_backward_into<kLog>(grad, output, dim, out);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Softmax<false>>(m, {"_softmax", "", "_softmax.out"});
  register_variants<Softmax<true>>(m, {"_log_softmax", "", "_log_softmax.out"});
  register_variants<SoftmaxBackward<false>>(m, {"_softmax_backward_data", "", "_softmax_backward_data.out"});
  register_variants<SoftmaxBackward<true>>(m, {"_log_softmax_backward_data", "", "_log_softmax_backward_data.out"});
}

}  // namespace
}  // namespace torch_tpu::ops
