// native_layer_norm (+ backward). Statistics are computed in f32 for
// bf16/f16 inputs, like PyTorch's CPU kernel.
#include <torch/library.h>

#include <sstream>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

// Sum of `x` over dims [axis, rank) broadcast back to x's shape, divided by
// the number of reduced elements.
Value mean_keep(Builder& b, Value x, int64_t axis) {
  const Dims& d = b.dims(x);
  Dims red, keep;
  int64_t n = 1;
  for (int64_t i = 0; i < (int64_t)d.size(); ++i) {
    if (i >= axis) {
      red.push_back(i);
      n *= d[i];
    } else {
      keep.push_back(i);
    }
  }
  Value s = b.reduce(x, zero(b, b.elem(x)), red, BinaryOp::kAdd);
  s = b.div(s, b.constant(static_cast<double>(n), b.elem(x), b.dims(s)));
  return b.broadcast_in_dim(s, d, keep);
}

// Sum over dims [0, axis) (the batch dims), giving the normalized shape.
Value sum_batch(Builder& b, Value x, int64_t axis) {
  Dims red;
  for (int64_t i = 0; i < axis; ++i) red.push_back(i);
  return b.reduce(x, zero(b, b.elem(x)), red, BinaryOp::kAdd);
}

// --- layer norm -----------------------------------------------------------------

int64_t check_layer_norm(const at::Tensor& input, c10::IntArrayRef normalized_shape, const at::Tensor& weight,
                         const at::Tensor& bias) {
  int64_t nd = normalized_shape.size();
  TORCH_CHECK(nd >= 1, "Expected normalized_shape to be at least 1-dimensional, i.e., containing at least one ",
              "element, but got normalized_shape = ", normalized_shape);
  TORCH_CHECK(!weight.defined() || weight.sizes().equals(normalized_shape),
              "Expected weight to be of same shape as normalized_shape, but got weight of shape ", weight.sizes(),
              " and normalized_shape = ", normalized_shape);
  TORCH_CHECK(!bias.defined() || bias.sizes().equals(normalized_shape),
              "Expected bias to be of same shape as normalized_shape, but got bias of shape ", bias.sizes(),
              " and normalized_shape = ", normalized_shape);
  int64_t axis = input.dim() - nd;
  bool ok = axis >= 0 && input.sizes().slice(axis).equals(normalized_shape);
  if (!ok) {
    std::ostringstream ss;
    ss << "Given normalized_shape=" << normalized_shape << ", expected input with shape [*";
    for (int64_t s : normalized_shape) ss << ", " << s;
    ss << "], but got input of size" << input.sizes();
    TORCH_CHECK(false, ss.str());
  }
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(input.scalar_type()), "\"LayerNormKernelImpl\" not implemented for '",
                              c10::toString(input.scalar_type()), "'");
  return axis;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm(const at::Tensor& input,
                                                                 c10::IntArrayRef normalized_shape,
                                                                 const std::optional<at::Tensor>& weight_opt,
                                                                 const std::optional<at::Tensor>& bias_opt,
                                                                 double eps) {
  at::Tensor weight = weight_opt.value_or(at::Tensor());
  at::Tensor bias = bias_opt.value_or(at::Tensor());
  int64_t axis = check_layer_norm(input, normalized_shape, weight, bias);
  // Statistics dtype: float when a bf16/f16 input meets float params
  // ("mixed type"), else the input's dtype - as PyTorch CPU.
  bool mixed = (weight.defined() && weight.scalar_type() != input.scalar_type()) ||
               (bias.defined() && bias.scalar_type() != input.scalar_type());
  auto stat_dtype = mixed ? c10::kFloat : input.scalar_type();
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().begin() + axis);
  stat_shape.resize(input.dim(), 1);
  at::Tensor out = empty_like_tpu(input);
  at::Tensor mean = empty_tpu(stat_shape, stat_dtype, input.device());
  at::Tensor rstd = empty_tpu(stat_shape, stat_dtype, input.device());
  auto ct = opmath(input.scalar_type());

  record::OpCall call("native_layer_norm");
  call.attr(axis).attr(weight.defined()).attr(bias.defined()).attr(static_cast<int64_t>(ct));
  call.input(input);
  call.scalar(eps, ct);
  if (weight.defined()) call.input(weight);
  if (bias.defined()) call.input(bias);
  call.output(out);
  call.output(mean);
  call.output(rstd);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[0], e);
    const Dims& d = b.dims(x);
    Value mu = mean_keep(b, x, axis);
    Value xc = b.sub(x, mu);
    Value var = mean_keep(b, b.mul(xc, xc), axis);
    Value r = b.rsqrt(b.add(var, b.broadcast_to(b.convert(in[1], e), d)));
    Value y = b.mul(xc, r);
    size_t i = 2;
    if (weight.defined()) y = b.mul(y, b.broadcast_to(b.convert(in[i++], e), d));
    if (bias.defined()) y = b.add(y, b.broadcast_to(b.convert(in[i++], e), d));
    Dims sd(stat_shape.begin(), stat_shape.end());
    // mu and r are constant over the normalized dims; slice one element.
    Dims zeros(d.size(), 0), ones_stride(d.size(), 1);
    Value mu_s = b.slice(mu, zeros, sd, ones_stride);
    Value r_s = b.slice(r, zeros, sd, ones_stride);
    return Values{y, mu_s, r_s};
  });
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_layer_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, c10::IntArrayRef normalized_shape, const at::Tensor& mean,
    const at::Tensor& rstd, const std::optional<at::Tensor>& weight_opt, const std::optional<at::Tensor>& bias_opt,
    std::array<bool, 3> mask) {
  at::Tensor weight = weight_opt.value_or(at::Tensor());
  at::Tensor bias = bias_opt.value_or(at::Tensor());
  int64_t axis = check_layer_norm(input, normalized_shape, weight, bias);
  at::Tensor gi, gw, gb;
  if (mask[0]) gi = empty_like_tpu(input);
  if (mask[1] && weight.defined()) gw = empty_like_tpu(weight);
  if (mask[2] && bias.defined()) gb = empty_like_tpu(bias);
  if (!gi.defined() && !gw.defined() && !gb.defined()) return {gi, gw, gb};
  auto ct = opmath(input.scalar_type());

  record::OpCall call("native_layer_norm_backward");
  call.attr(axis).attr(weight.defined()).attr(gi.defined()).attr(gw.defined()).attr(gb.defined());
  call.attr(static_cast<int64_t>(ct));
  call.input(grad_out);
  call.input(input);
  call.input(mean);
  call.input(rstd);
  if (weight.defined()) call.input(weight);
  if (gi.defined()) call.output(gi);
  if (gw.defined()) call.output(gw);
  if (gb.defined()) call.output(gb);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.convert(in[0], e);
    Value x = b.convert(in[1], e);
    const Dims& d = b.dims(x);
    Value mu = b.broadcast_to(b.convert(in[2], e), d);
    Value r = b.broadcast_to(b.convert(in[3], e), d);
    Value xhat = b.mul(b.sub(x, mu), r);
    Values outs;
    if (gi.defined()) {
      Value gx = weight.defined() ? b.mul(g, b.broadcast_to(b.convert(in[4], e), d)) : g;
      // dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat))
      Value t = b.sub(b.sub(gx, mean_keep(b, gx, axis)), b.mul(xhat, mean_keep(b, b.mul(gx, xhat), axis)));
      outs.push_back(b.mul(r, t));
    }
    if (gw.defined()) outs.push_back(sum_batch(b, b.mul(g, xhat), axis));
    if (gb.defined()) outs.push_back(sum_batch(b, g, axis));
    return outs;
  });
  return {gi, gw, gb};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
