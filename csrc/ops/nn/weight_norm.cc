// Weight normalization, w = g * v / ||v||, the norm taken over every dim but
// `dim` (the first or the last: ATen's _weight_norm sends only those to the
// fused kernel on accelerators). One program forward, one backward.
#include <torch/library.h>

#include <tuple>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

// The dims reduced, and the norms' keepdim shape (g's shape).
std::pair<Dims, Dims> norm_dims(const at::Tensor& v, int64_t dim) {
  Dims red, keep(v.dim(), 1);
  for (int64_t i = 0; i < v.dim(); ++i) {
    if (i == dim)
      keep[i] = v.size(i);
    else
      red.push_back(i);
  }
  return {red, keep};
}

Value sum_over(Builder& b, Value x, const Dims& red, const Dims& keep) {
  return b.reshape(b.reduce(x, zero(b, b.elem(x)), red, BinaryOp::kAdd), keep);
}

int64_t check_args(const at::Tensor& v, const at::Tensor& g, int64_t dim, const char* op) {
  TORCH_CHECK(v.dim() > 0, op, ": expected v to have at least one dimension");
  int64_t d = wrap_dim(dim, v.dim());
  TORCH_CHECK(d == 0 || d == v.dim() - 1, op, ": dim must be the first or the last dimension, got ", dim);
  TORCH_CHECK(g.numel() == v.size(d), op, ": expected g with ", v.size(d), " elements, got ", g.sizes());
  TORCH_CHECK(g.scalar_type() == v.scalar_type(), op, ": expected v and g of the same dtype");
  check_float(v, op);
  return d;
}

std::tuple<at::Tensor, at::Tensor> weight_norm(const at::Tensor& v, const at::Tensor& g, int64_t dim) {
  const char* op = "_weight_norm_interface";
  int64_t d = check_args(v, g, dim, op);
  auto [red, keep] = norm_dims(v, d);
  // Norms in float for half types, as CUDA's kernel.
  auto norm_t = opmath(v.scalar_type());
  at::Tensor w = empty_like_tpu(v), norms = empty_tpu(keep, norm_t, v.device());
  if (v.numel() == 0) return {w, norms};
  ElemType e = opmath_elem(v.scalar_type()), out_e = to_elem(v.scalar_type());
  Dims vd = dims_of(v);
  record::OpCall call(op);
  call.attr(d);
  call.input(v);
  call.input(g);
  call.output(w);
  call.output(norms);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], e);
    Value n = b.sqrt(sum_over(b, b.mul(x, x), red, keep));
    Value scale = b.div(b.reshape(b.convert(in[1], e), keep), n);
    return Values{b.convert(b.mul(x, b.broadcast_to(scale, vd)), out_e), n};
  });
  return {w, norms};
}

// grad_g = <grad_w, v> / ||v||; grad_v = (g/||v||) * (grad_w - v * <grad_w, v> / ||v||^2).
std::tuple<at::Tensor, at::Tensor> weight_norm_backward(const at::Tensor& grad_w, const at::Tensor& v,
                                                        const at::Tensor& g, const at::Tensor& norms, int64_t dim) {
  const char* op = "_weight_norm_interface_backward";
  int64_t d = check_args(v, g, dim, op);
  TORCH_CHECK(grad_w.sizes() == v.sizes(), op, ": grad_w of size ", grad_w.sizes(), " does not match v ", v.sizes());
  auto [red, keep] = norm_dims(v, d);
  at::Tensor gv = empty_like_tpu(v), gg = empty_like_tpu(g);
  if (v.numel() == 0) return {gv, gg};
  ElemType e = opmath_elem(v.scalar_type()), out_e = to_elem(v.scalar_type());
  Dims vd = dims_of(v), gd = dims_of(g);
  record::OpCall call(op);
  call.attr(d);
  call.input(grad_w);
  call.input(v);
  call.input(g);
  call.input(norms);
  call.output(gv);
  call.output(gg);
  call.run([&](Builder& b, const Values& in) {
    Value dw = b.convert(in[0], e), x = b.convert(in[1], e);
    Value gk = b.reshape(b.convert(in[2], e), keep), n = b.reshape(b.convert(in[3], e), keep);
    Value dot = sum_over(b, b.mul(dw, x), red, keep);
    Value dg = b.div(dot, n);
    Value coef = b.div(dot, b.mul(n, n));
    Value dv = b.mul(b.broadcast_to(b.div(gk, n), vd), b.sub(dw, b.mul(x, b.broadcast_to(coef, vd))));
    return Values{b.convert(dv, out_e), b.convert(b.reshape(dg, gd), out_e)};
  });
  return {gv, gg};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_weight_norm_interface", weight_norm);
  m.impl("_weight_norm_interface_backward", weight_norm_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
