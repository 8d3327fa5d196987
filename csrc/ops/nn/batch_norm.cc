// Batch norm (training and eval, running-stat updates) and group norm, with
// their backward kernels. Instance norm and F.batch_norm are
// CompositeImplicit in ATen and reach these; layer norm lives in
// nn/layer_norm.cc.
//
// As PyTorch CPU: statistics are computed in f32 for bf16/f16 inputs
// (two-pass mean/variance); saved statistics are float when a reduced
// input meets float parameters ("mixed type"), else the input's dtype;
// running_var gets the unbiased variance.
#include <torch/library.h>

#include <sstream>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

Value splat(Builder& b, double v, ElemType e, const Dims& d) { return b.constant(v, e, d); }

// Sum of x over every dim but `keep`, as a vector of x.dims[keep].
Value sum_except(Builder& b, Value x, int64_t keep) {
  Dims red;
  for (int64_t i = 0; i < static_cast<int64_t>(b.dims(x).size()); ++i)
    if (i != keep) red.push_back(i);
  return b.reduce(x, zero(b, b.elem(x)), red, BinaryOp::kAdd);
}

// Per-channel vector broadcast along dim 1 of shape d.
Value chan(Builder& b, Value v, const Dims& d) { return b.broadcast_in_dim(v, d, {1}); }

bool reduced(c10::ScalarType t) { return t == c10::kBFloat16 || t == c10::kHalf; }

bool mixed_type(const at::Tensor& input, std::initializer_list<const at::Tensor*> params) {
  if (!reduced(input.scalar_type())) return false;
  for (const at::Tensor* p : params)
    if (p->defined() && p->scalar_type() == c10::kFloat) return true;
  return false;
}

void check_param(const char* what, const at::Tensor& t, int64_t c) {
  TORCH_CHECK(!t.defined() || t.numel() == c, what, " should contain ", c, " elements not ",
              t.defined() ? t.numel() : 0);
}

// --- batch norm -------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_impl(const at::Tensor& input, const at::Tensor& weight,
                                                               const at::Tensor& bias, const at::Tensor& rmean,
                                                               const at::Tensor& rvar, bool training, double momentum,
                                                               double eps) {
  TORCH_CHECK(input.dim() >= 2, "Expected 2D or more input to batch_norm but got ", input.dim(), "D input");
  TORCH_CHECK(input.numel() > 0, "input tensor must have at least one element, but got input_sizes = ", input.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(input.scalar_type()), "\"batch_norm\" not implemented for '",
                              c10::toString(input.scalar_type()), "'");
  int64_t c = input.size(1);
  check_param("weight", weight, c);
  check_param("bias", bias, c);
  check_param("running_mean", rmean, c);
  check_param("running_var", rvar, c);
  TORCH_CHECK(training || (rmean.defined() && rvar.defined()),
              "running_mean and running_var must be defined in evaluation mode");
  bool mixed = mixed_type(input, {&weight, &bias, &rmean, &rvar});
  auto stat_dtype = mixed ? c10::kFloat : input.scalar_type();
  bool update = training && rmean.defined() && rvar.defined();
  at::Tensor out = empty_like_tpu(input);
  at::Tensor save_mean = empty_tpu({training ? c : 0}, stat_dtype, input.device());
  at::Tensor save_invstd = empty_tpu({training ? c : 0}, stat_dtype, input.device());
  auto ct = opmath(input.scalar_type());
  int64_t n = input.numel() / c;

  record::OpCall call("native_batch_norm");
  call.attr(training).attr(update).attr(weight.defined()).attr(bias.defined()).attr(static_cast<int64_t>(ct));
  call.input(input);
  call.scalar(eps, ct);
  call.scalar(momentum, ct);
  int iw = weight.defined() ? call.input(weight) : -1;
  int ib = bias.defined() ? call.input(bias) : -1;
  int irm = (!training || update) ? call.input(rmean) : -1;
  int irv = (!training || update) ? call.input(rvar) : -1;
  call.output(out);
  if (training) {
    call.output(save_mean);
    call.output(save_invstd);
  }
  if (update) {
    call.output(rmean);
    call.output(rvar);
  }
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[0], e);
    const Dims& d = b.dims(x);
    Dims cd{c};
    Value eps_v = b.broadcast_to(b.convert(in[1], e), cd);
    Value mom = b.broadcast_to(b.convert(in[2], e), cd);
    Value mean, var, invstd, var_sum;
    if (training) {
      mean = b.div(sum_except(b, x, 1), splat(b, n, e, cd));
      Value xc = b.sub(x, chan(b, mean, d));
      var_sum = sum_except(b, b.mul(xc, xc), 1);
      var = b.div(var_sum, splat(b, n, e, cd));
    } else {
      mean = b.convert(in[irm], e);
      var = b.convert(in[irv], e);
    }
    invstd = b.div(one(b, e, cd), b.sqrt(b.add(var, eps_v)));
    // y = x * alpha + beta with alpha = invstd * w, beta = b - mean * alpha (as CPU).
    Value alpha = iw >= 0 ? b.mul(invstd, b.convert(in[iw], e)) : invstd;
    Value beta = b.neg(b.mul(mean, alpha));
    if (ib >= 0) beta = b.add(b.convert(in[ib], e), beta);
    Values outs{b.add(b.mul(x, chan(b, alpha, d)), chan(b, beta, d))};
    if (training) {
      outs.push_back(mean);
      outs.push_back(invstd);
    }
    if (update) {
      Value keep = b.sub(one(b, e, cd), mom);
      Value unbiased = b.div(var_sum, splat(b, static_cast<double>(n - 1), e, cd));
      outs.push_back(b.add(b.mul(mom, mean), b.mul(keep, b.convert(in[irm], e))));
      outs.push_back(b.add(b.mul(mom, unbiased), b.mul(keep, b.convert(in[irv], e))));
    }
    return outs;
  });
  return {out, save_mean, save_invstd};
}

at::Tensor opt(const std::optional<at::Tensor>& t) { return t.value_or(at::Tensor()); }

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm(const at::Tensor& input,
                                                                 const std::optional<at::Tensor>& weight,
                                                                 const std::optional<at::Tensor>& bias,
                                                                 const std::optional<at::Tensor>& running_mean,
                                                                 const std::optional<at::Tensor>& running_var,
                                                                 bool training, double momentum, double eps) {
  return batch_norm_impl(input, opt(weight), opt(bias), opt(running_mean), opt(running_var), training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, bool training, double momentum, double eps) {
  return batch_norm_impl(input, opt(weight), opt(bias), running_mean, running_var, training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_legit_no_stats(const at::Tensor& input,
                                                                                const std::optional<at::Tensor>& weight,
                                                                                const std::optional<at::Tensor>& bias,
                                                                                bool training, double momentum,
                                                                                double eps) {
  return batch_norm_impl(input, opt(weight), opt(bias), at::Tensor(), at::Tensor(), training, momentum, eps);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> batch_norm_with_update(
    const at::Tensor& input, const std::optional<at::Tensor>& weight, const std::optional<at::Tensor>& bias,
    at::Tensor& running_mean, at::Tensor& running_var, double momentum, double eps) {
  auto [out, m, v] = batch_norm_impl(input, opt(weight), opt(bias), running_mean, running_var, true, momentum, eps);
  at::Tensor reserve = empty_tpu({0}, c10::kByte, input.device());
  return {out, m, v, reserve};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward_impl(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight, const at::Tensor& rmean,
    const at::Tensor& rvar, const at::Tensor& save_mean, const at::Tensor& save_invstd, bool train, double eps,
    std::array<bool, 3> mask) {
  TORCH_CHECK(input.dim() >= 2, "Expected 2D or more input to batch_norm but got ", input.dim(), "D input");
  TORCH_CHECK(grad_out.sizes().equals(input.sizes()), "Expected grad_out to have the same shape as input ",
              input.sizes(), " but got ", grad_out.sizes());
  int64_t c = input.size(1);
  const at::Tensor& mean_t = train ? save_mean : rmean;
  const at::Tensor& var_t = train ? save_invstd : rvar;
  TORCH_CHECK(mean_t.defined() && var_t.defined(),
              train ? "save_mean and save_invstd must be defined in training mode"
                    : "running_mean and running_var must be defined in evaluation mode");
  check_param("weight", weight, c);
  check_param(train ? "save_mean" : "running_mean", mean_t, c);
  check_param(train ? "save_invstd" : "running_var", var_t, c);
  bool mixed = mixed_type(input, {&weight, &rmean, &rvar});
  auto param_dtype = weight.defined() ? weight.scalar_type() : (mixed ? c10::kFloat : input.scalar_type());
  at::Tensor gi, gw, gb;
  if (mask[0]) gi = empty_like_tpu(input);
  if (mask[1]) gw = empty_tpu({c}, param_dtype, input.device());
  if (mask[2]) gb = empty_tpu({c}, param_dtype, input.device());
  if (!mask[0] && !mask[1] && !mask[2]) return {gi, gw, gb};
  if (input.numel() == 0) {
    if (gw.defined()) gw.zero_();
    if (gb.defined()) gb.zero_();
    return {gi, gw, gb};
  }
  auto ct = opmath(input.scalar_type());
  int64_t n = input.numel() / c;

  record::OpCall call("native_batch_norm_backward");
  call.attr(train).attr(weight.defined()).attr(mask[0]).attr(mask[1]).attr(mask[2]).attr(static_cast<int64_t>(ct));
  call.input(grad_out);
  call.input(input);
  call.input(mean_t);
  call.input(var_t);
  call.scalar(eps, ct);
  int iw = weight.defined() ? call.input(weight) : -1;
  if (gi.defined()) call.output(gi);
  if (gw.defined()) call.output(gw);
  if (gb.defined()) call.output(gb);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.convert(in[0], e);
    Value x = b.convert(in[1], e);
    const Dims& d = b.dims(x);
    Dims cd{c};
    Value mean = b.convert(in[2], e);
    Value invstd = b.convert(in[3], e);
    if (!train) {
      invstd = b.div(one(b, e, cd), b.sqrt(b.add(invstd, b.broadcast_to(b.convert(in[4], e), cd))));
    }
    Value xc = b.sub(x, chan(b, mean, d));
    Value gsum = sum_except(b, g, 1);
    Value dotp = sum_except(b, b.mul(g, xc), 1);
    Value w = iw >= 0 ? b.convert(in[iw], e) : one(b, e, cd);
    Values outs;
    if (mask[0]) {
      if (train) {
        // dx = (g - mean(g) - xc * invstd^2 * mean(g * xc)) * invstd * w
        Value nn = splat(b, n, e, cd);
        Value k = b.div(b.mul(dotp, b.mul(invstd, invstd)), nn);
        Value gm = b.div(gsum, nn);
        Value t = b.sub(b.sub(g, b.mul(xc, chan(b, k, d))), chan(b, gm, d));
        outs.push_back(b.mul(t, chan(b, b.mul(invstd, w), d)));
      } else {
        outs.push_back(b.mul(g, chan(b, b.mul(invstd, w), d)));
      }
    }
    if (mask[1]) outs.push_back(b.mul(dotp, invstd));
    if (mask[2]) outs.push_back(gsum);
    return outs;
  });
  return {gi, gw, gb};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const std::optional<at::Tensor>& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_invstd, bool train, double eps,
    std::array<bool, 3> mask) {
  return batch_norm_backward_impl(grad_out, input, opt(weight), opt(running_mean), opt(running_var), opt(save_mean),
                                  opt(save_invstd), train, eps, mask);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> batch_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& weight,
    const std::optional<at::Tensor>& running_mean, const std::optional<at::Tensor>& running_var,
    const std::optional<at::Tensor>& save_mean, const std::optional<at::Tensor>& save_var, bool update, double eps,
    std::array<bool, 3> mask, const at::Tensor& /*reserve*/) {
  return batch_norm_backward_impl(grad_out, input, weight, opt(running_mean), opt(running_var), opt(save_mean),
                                  opt(save_var), update, eps, mask);
}

// Batch statistics (biased variance) plus the running-stat update, as CPU's
// batch_norm_update_stats.
std::tuple<at::Tensor, at::Tensor> batch_norm_update_stats(const at::Tensor& input,
                                                           const std::optional<at::Tensor>& running_mean_opt,
                                                           const std::optional<at::Tensor>& running_var_opt,
                                                           double momentum) {
  at::Tensor rmean = opt(running_mean_opt), rvar = opt(running_var_opt);
  TORCH_CHECK(input.dim() >= 2, "Expected 2D or more input to batch_norm but got ", input.dim(), "D input");
  TORCH_CHECK(input.numel() > 0, "input tensor must have at least one element, but got input_sizes = ", input.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(input.scalar_type()),
                              "\"batch_norm_update_stats_cpu\" not implemented for '",
                              c10::toString(input.scalar_type()), "'");
  int64_t c = input.size(1);
  check_param("running_mean", rmean, c);
  check_param("running_var", rvar, c);
  bool mixed = mixed_type(input, {&rmean, &rvar});
  auto stat_dtype = mixed ? c10::kFloat : input.scalar_type();
  at::Tensor mean = empty_tpu({c}, stat_dtype, input.device());
  at::Tensor var = empty_tpu({c}, stat_dtype, input.device());
  auto ct = opmath(input.scalar_type());
  int64_t n = input.numel() / c;
  record::OpCall call("batch_norm_update_stats");
  call.attr(rmean.defined()).attr(rvar.defined()).attr(static_cast<int64_t>(ct));
  call.input(input);
  call.scalar(momentum, ct);
  int irm = rmean.defined() ? call.input(rmean) : -1;
  int irv = rvar.defined() ? call.input(rvar) : -1;
  call.output(mean);
  call.output(var);
  if (rmean.defined()) call.output(rmean);
  if (rvar.defined()) call.output(rvar);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[0], e);
    Dims cd{c};
    Value mom = b.broadcast_to(b.convert(in[1], e), cd);
    Value keep = b.sub(one(b, e, cd), mom);
    Value m = b.div(sum_except(b, x, 1), splat(b, n, e, cd));
    Value xc = b.sub(x, chan(b, m, b.dims(x)));
    Value vs = sum_except(b, b.mul(xc, xc), 1);
    Values outs{m, b.div(vs, splat(b, n, e, cd))};
    if (irm >= 0) outs.push_back(b.add(b.mul(mom, m), b.mul(keep, b.convert(in[irm], e))));
    if (irv >= 0) {
      Value unbiased = b.div(vs, splat(b, static_cast<double>(n - 1), e, cd));
      outs.push_back(b.add(b.mul(mom, unbiased), b.mul(keep, b.convert(in[irv], e))));
    }
    return outs;
  });
  return {mean, var};
}

// --- group norm -------------------------------------------------------------------

void check_group_norm(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias, int64_t c,
                      int64_t group) {
  TORCH_CHECK(group > 0, "Expected num groups to be greater than 0, got ", group);
  TORCH_CHECK(c % group == 0, "Expected number of channels in input to be divisible by num_groups, but got input of ",
              "shape ", input.sizes(), " and num_groups=", group);
  TORCH_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == c),
              "Expected weight to be a vector of size equal to the number of channels in input, but got weight of ",
              "shape ", weight.sizes(), " and input of shape ", input.sizes());
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.numel() == c),
              "Expected bias to be a vector of size equal to the number of channels in input, but got bias of ",
              "shape ", bias.sizes(), " and input of shape ", input.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(input.scalar_type()), "\"group_norm\" not implemented for '",
                              c10::toString(input.scalar_type()), "'");
}

// Mean over the last dim of a [N, G, K] value, broadcast back.
Value group_mean(Builder& b, Value x) {
  const Dims& d = b.dims(x);
  Value s = b.reduce(x, zero(b, b.elem(x)), {2}, BinaryOp::kAdd);
  s = b.div(s, splat(b, static_cast<double>(d[2]), b.elem(x), b.dims(s)));
  return b.broadcast_in_dim(s, d, {0, 1});
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm(const at::Tensor& input,
                                                                 const std::optional<at::Tensor>& weight_opt,
                                                                 const std::optional<at::Tensor>& bias_opt, int64_t N,
                                                                 int64_t C, int64_t HxW, int64_t group, double eps) {
  at::Tensor weight = opt(weight_opt), bias = opt(bias_opt);
  check_group_norm(input, weight, bias, C, group);
  TORCH_CHECK(input.numel() == N * C * HxW && input.dim() >= 2 && input.size(0) == N && input.size(1) == C,
              "Expected input of ", N * C * HxW, " elements with N=", N, " and C=", C, " but got input of shape ",
              input.sizes());
  bool mixed = mixed_type(input, {&weight, &bias});
  auto stat_dtype = mixed ? c10::kFloat : input.scalar_type();
  at::Tensor out = empty_like_tpu(input);
  at::Tensor mean = empty_tpu({N, group}, stat_dtype, input.device());
  at::Tensor rstd = empty_tpu({N, group}, stat_dtype, input.device());
  if (input.numel() == 0) return {out, mean, rstd};
  auto ct = opmath(input.scalar_type());
  int64_t k = C / group * HxW;

  record::OpCall call("native_group_norm");
  call.attr(group).attr(weight.defined()).attr(bias.defined()).attr(static_cast<int64_t>(ct));
  call.input(input);
  call.scalar(eps, ct);
  int iw = weight.defined() ? call.input(weight) : -1;
  int ib = bias.defined() ? call.input(bias) : -1;
  call.output(out);
  call.output(mean);
  call.output(rstd);
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.reshape(b.convert(in[0], e), {N, group, k});
    Dims gd{N, group};
    Value mu = group_mean(b, x);
    Value xc = b.sub(x, mu);
    Value var = group_mean(b, b.mul(xc, xc));
    Value eps_v = b.broadcast_to(b.convert(in[1], e), b.dims(x));
    Value r = b.div(one(b, e, b.dims(x)), b.sqrt(b.add(var, eps_v)));
    // Back to [N, C, HxW] to apply the per-channel affine.
    Value y = b.reshape(b.mul(xc, r), {N, C, HxW});
    Dims yd{N, C, HxW};
    if (iw >= 0) y = b.mul(y, b.broadcast_in_dim(b.convert(in[iw], e), yd, {1}));
    if (ib >= 0) y = b.add(y, b.broadcast_in_dim(b.convert(in[ib], e), yd, {1}));
    Dims z{0, 0, 0}, one3{1, 1, 1};
    Value mu_s = b.reshape(b.slice(mu, z, {N, group, 1}, one3), gd);
    Value r_s = b.reshape(b.slice(r, z, {N, group, 1}, one3), gd);
    return Values{b.reshape(y, Dims(shape.begin(), shape.end())), mu_s, r_s};
  });
  return {out, mean, rstd};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> native_group_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, const at::Tensor& mean, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight_opt, int64_t N, int64_t C, int64_t HxW, int64_t group,
    std::array<bool, 3> mask) {
  at::Tensor weight = opt(weight_opt);
  check_group_norm(input, weight, at::Tensor(), C, group);
  TORCH_CHECK(input.numel() == N * C * HxW && grad_out.sizes().equals(input.sizes()), "Expected grad_out and input of ",
              N * C * HxW, " elements, but got grad_out of shape ", grad_out.sizes(), " and input of shape ",
              input.sizes());
  TORCH_CHECK(mean.numel() == N * group && rstd.numel() == N * group, "Expected mean and rstd of ", N * group,
              " elements");
  at::Tensor gi, gw, gb;
  auto param_dtype = weight.defined() ? weight.scalar_type() : input.scalar_type();
  if (mask[0]) gi = empty_like_tpu(input);
  if (mask[1]) gw = empty_tpu({C}, param_dtype, input.device());
  if (mask[2]) gb = empty_tpu({C}, param_dtype, input.device());
  if (!mask[0] && !mask[1] && !mask[2]) return {gi, gw, gb};
  if (input.numel() == 0) {
    if (gw.defined()) gw.zero_();
    if (gb.defined()) gb.zero_();
    return {gi, gw, gb};
  }
  auto ct = opmath(input.scalar_type());
  int64_t d_per = C / group;

  record::OpCall call("native_group_norm_backward");
  call.attr(group).attr(weight.defined()).attr(mask[0]).attr(mask[1]).attr(mask[2]).attr(static_cast<int64_t>(ct));
  call.input(grad_out);
  call.input(input);
  call.input(mean);
  call.input(rstd);
  int iw = weight.defined() ? call.input(weight) : -1;
  if (gi.defined()) call.output(gi);
  if (gw.defined()) call.output(gw);
  if (gb.defined()) call.output(gb);
  std::vector<int64_t> shape(input.sizes().begin(), input.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Dims cd{N, C, HxW}, gd4{N, group, d_per, HxW};
    Value g = b.reshape(b.convert(in[0], e), cd);
    Value x = b.reshape(b.convert(in[1], e), cd);
    // Per-group mean/rstd broadcast to [N, C, HxW] via [N, G, C/G, HxW].
    auto per_group = [&](Value v) {
      Value r = b.broadcast_in_dim(b.reshape(b.convert(v, e), {N, group}), gd4, {0, 1});
      return b.reshape(r, cd);
    };
    Value mu = per_group(in[2]);
    Value r = per_group(in[3]);
    Value xhat = b.mul(b.sub(x, mu), r);
    Values outs;
    if (mask[0]) {
      Value gx = iw >= 0 ? b.mul(g, b.broadcast_in_dim(b.convert(in[iw], e), cd, {1})) : g;
      Dims gd3{N, group, d_per * HxW};
      Value gx3 = b.reshape(gx, gd3);
      Value xh3 = b.reshape(xhat, gd3);
      // dx = rstd * (gx - mean(gx) - xhat * mean(gx * xhat)) within each group.
      Value t = b.sub(b.sub(gx3, group_mean(b, gx3)), b.mul(xh3, group_mean(b, b.mul(gx3, xh3))));
      outs.push_back(b.reshape(b.mul(b.reshape(t, cd), r), Dims(shape.begin(), shape.end())));
    }
    auto sum_nhw = [&](Value v) { return b.reduce(v, zero(b, e), {0, 2}, BinaryOp::kAdd); };
    if (mask[1]) outs.push_back(sum_nhw(b.mul(g, xhat)));
    if (mask[2]) outs.push_back(sum_nhw(g));
    return outs;
  });
  return {gi, gw, gb};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_batch_norm", native_batch_norm);
  m.impl("_native_batch_norm_legit", native_batch_norm_legit);
  m.impl("_native_batch_norm_legit.no_stats", native_batch_norm_legit_no_stats);
  m.impl("_batch_norm_with_update", batch_norm_with_update);
  m.impl("native_batch_norm_backward", native_batch_norm_backward);
  m.impl("batch_norm_backward", batch_norm_backward);
  m.impl("batch_norm_update_stats", batch_norm_update_stats);
  m.impl("native_group_norm", native_group_norm);
  m.impl("native_group_norm_backward", native_group_norm_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
