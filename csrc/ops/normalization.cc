// native_layer_norm (+ backward) and native_dropout (+ backward).
// Layer norm statistics are computed in f32 for bf16/f16 inputs, like
// PyTorch's CPU kernel; dropout draws its mask from the tpu generator
// (THREE_FRY keyed by seed, counter = reserved offset), so results are
// reproducible under torch.manual_seed.
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <mutex>
#include <sstream>

#include "aten/generator.h"
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

// --- dropout -----------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor mask = empty_like_tpu(input, c10::kBool);
  at::Tensor out = empty_like_tpu(input);
  if (input.numel() == 0) return {out, mask};
  bool training = !train.has_value() || *train;
  if (!training || p == 0) {
    // Identity with an all-true mask (PyTorch CPU does the same).
    mask.fill_(true);
    out.copy_(input);
    return {out, mask};
  }
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(input.scalar_type()), "\"native_dropout\" not implemented for '",
                              c10::toString(input.scalar_type()), "'");
  // One u32 of random bits per element; reserve that many counter values.
  int64_t n = input.numel();
  uint64_t seed, offset;
  {
    TpuGeneratorImpl* gen = get_generator(std::nullopt, input.device().index());
    std::lock_guard<std::mutex> lock(gen->mutex_);
    seed = gen->current_seed();
    offset = gen->advance((n + 3) / 4 * 4);
  }
  auto ct = opmath(input.scalar_type());
  double keep = 1.0 - p;
  double scale = keep == 0 ? 0.0 : 1.0 / keep;

  record::OpCall call("native_dropout");
  call.attr(static_cast<int64_t>(ct));
  call.input(input);
  call.scalar(c10::Scalar(static_cast<int64_t>(seed)), c10::kLong);
  call.scalar(c10::Scalar(static_cast<int64_t>(offset)), c10::kLong);
  call.scalar(p, c10::kFloat);
  call.scalar(scale, ct);
  call.output(out);
  call.output(mask);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[0], e);
    const Dims& d = b.dims(x);
    Value s = b.reshape(b.bitcast_convert(in[1], ElemType::kU64), {1});
    Value o = b.reshape(b.bitcast_convert(in[2], ElemType::kU64), {1});
    Value state = b.concatenate({s, o}, 0);
    Value bits = b.rng_bit_generator(state, d, ElemType::kU32)[1];
    // Top 23 bits as the mantissa of a float in [1, 2), minus 1: uniform [0, 1).
    Value mant = b.shr_logical(bits, b.constant(9, ElemType::kU32, d));
    Value f = b.bitcast_convert(b.or_(mant, b.constant(0x3f800000, ElemType::kU32, d)), ElemType::kF32);
    Value u = b.sub(f, b.constant(1.0, ElemType::kF32, d));
    Value keep_mask = b.compare(u, b.broadcast_to(in[3], d), Direction::kGe);
    // x * mask * scale, as CPU (so NaN inputs stay NaN where dropped).
    Value y = b.mul(b.mul(x, b.convert(keep_mask, e)), b.broadcast_to(b.convert(in[4], e), d));
    return Values{y, keep_mask};
  });
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  // grad * mask * scale: a Python float scale promotes integer/bool grads
  // to the default float dtype, as on CPU.
  at::Tensor out = empty_tpu(broadcast_shape({grad, mask}), float_result(grad.scalar_type()), grad.device());
  auto ct = opmath(out.scalar_type());
  record::OpCall call("native_dropout_backward");
  call.attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(mask);
  call.scalar(scale, ct);
  call.output(out);
  std::vector<int64_t> shape(out.sizes().begin(), out.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.broadcast_to(b.convert(in[0], e), shape);
    Value m = b.broadcast_to(in[1], shape);
    return Values{b.mul(b.mul(g, b.convert(m, e)), b.broadcast_to(b.convert(in[2], e), shape))};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_layer_norm", native_layer_norm);
  m.impl("native_layer_norm_backward", native_layer_norm_backward);
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
