// _foreach_* ops used by the optimizers (SGD, Adam, AdamW, ...) and
// clip_grad_norm_. torch.optim defaults to foreach=True on PrivateUse1, so
// these must exist. For now each one is ATen's own device-agnostic "slow"
// kernel: a loop calling the per-tensor op (t.add_(...), t.lerp_(...)),
// which in turn dispatches to our tpu kernels. A fused multi-tensor
// program can replace these later without changing the registrations.
#include <ATen/ops/_foreach_abs_native.h>
#include <ATen/ops/_foreach_acos_native.h>
#include <ATen/ops/_foreach_add_native.h>
#include <ATen/ops/_foreach_addcdiv_native.h>
#include <ATen/ops/_foreach_addcmul_native.h>
#include <ATen/ops/_foreach_asin_native.h>
#include <ATen/ops/_foreach_atan_native.h>
#include <ATen/ops/_foreach_ceil_native.h>
#include <ATen/ops/_foreach_clamp_max_native.h>
#include <ATen/ops/_foreach_clamp_min_native.h>
#include <ATen/ops/_foreach_clone_native.h>
#include <ATen/ops/_foreach_copy_native.h>
#include <ATen/ops/_foreach_cos_native.h>
#include <ATen/ops/_foreach_cosh_native.h>
#include <ATen/ops/_foreach_div_native.h>
#include <ATen/ops/_foreach_erf_native.h>
#include <ATen/ops/_foreach_erfc_native.h>
#include <ATen/ops/_foreach_exp_native.h>
#include <ATen/ops/_foreach_expm1_native.h>
#include <ATen/ops/_foreach_floor_native.h>
#include <ATen/ops/_foreach_frac_native.h>
#include <ATen/ops/_foreach_lerp_native.h>
#include <ATen/ops/_foreach_lgamma_native.h>
#include <ATen/ops/_foreach_log10_native.h>
#include <ATen/ops/_foreach_log1p_native.h>
#include <ATen/ops/_foreach_log2_native.h>
#include <ATen/ops/_foreach_log_native.h>
#include <ATen/ops/_foreach_max_native.h>
#include <ATen/ops/_foreach_maximum_native.h>
#include <ATen/ops/_foreach_minimum_native.h>
#include <ATen/ops/_foreach_mul_native.h>
#include <ATen/ops/_foreach_neg_native.h>
#include <ATen/ops/_foreach_norm_native.h>
#include <ATen/ops/_foreach_pow_native.h>
#include <ATen/ops/_foreach_powsum_native.h>
#include <ATen/ops/_foreach_reciprocal_native.h>
#include <ATen/ops/_foreach_round_native.h>
#include <ATen/ops/_foreach_rsqrt_native.h>
#include <ATen/ops/_foreach_sigmoid_native.h>
#include <ATen/ops/_foreach_sign_native.h>
#include <ATen/ops/_foreach_sin_native.h>
#include <ATen/ops/_foreach_sinh_native.h>
#include <ATen/ops/_foreach_sqrt_native.h>
#include <ATen/ops/_foreach_sub_native.h>
#include <ATen/ops/_foreach_tan_native.h>
#include <ATen/ops/_foreach_tanh_native.h>
#include <ATen/ops/_foreach_trunc_native.h>
#include <ATen/ops/_foreach_zero_native.h>
#include <torch/library.h>

#include <string>

namespace torch_tpu::ops {
namespace {

using namespace at::native;  // NOLINT: the foreach_tensor_*_slow kernels

// Registers "_foreach_<op>[.<overload>]" and its in-place twin
// "_foreach_<op>_[.<overload>]".
template <class F, class FI>
void both(torch::Library& m, const char* op, const char* overload, F f, FI fi) {
  std::string base = std::string("_foreach_") + op, dot = *overload ? std::string(".") + overload : "";
  m.impl((base + dot).c_str(), f);
  m.impl((base + "_" + dot).c_str(), fi);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  both(m, "add", "Scalar", foreach_tensor_add_scalar_kernel_slow, foreach_tensor_add_scalar_kernel_slow_);
  both(m, "add", "List", foreach_tensor_add_list_kernel_slow, foreach_tensor_add_list_kernel_slow_);
  both(m, "add", "ScalarList", foreach_tensor_add_scalarlist_kernel_slow, foreach_tensor_add_scalarlist_kernel_slow_);
  both(m, "sub", "Scalar", foreach_tensor_sub_scalar_kernel_slow, foreach_tensor_sub_scalar_kernel_slow_);
  both(m, "sub", "List", foreach_tensor_sub_list_kernel_slow, foreach_tensor_sub_list_kernel_slow_);
  both(m, "sub", "ScalarList", foreach_tensor_sub_scalarlist_kernel_slow, foreach_tensor_sub_scalarlist_kernel_slow_);
  both(m, "mul", "Scalar", foreach_tensor_mul_scalar_kernel_slow, foreach_tensor_mul_scalar_kernel_slow_);
  both(m, "mul", "List", foreach_tensor_mul_list_kernel_slow, foreach_tensor_mul_list_kernel_slow_);
  both(m, "mul", "ScalarList", foreach_tensor_mul_scalarlist_kernel_slow, foreach_tensor_mul_scalarlist_kernel_slow_);
  both(m, "div", "Scalar", foreach_tensor_div_scalar_kernel_slow, foreach_tensor_div_scalar_kernel_slow_);
  both(m, "div", "List", foreach_tensor_div_list_kernel_slow, foreach_tensor_div_list_kernel_slow_);
  both(m, "div", "ScalarList", foreach_tensor_div_scalarlist_kernel_slow, foreach_tensor_div_scalarlist_kernel_slow_);
  both(m, "clamp_min", "Scalar", foreach_tensor_clamp_min_scalar_kernel_slow,
       foreach_tensor_clamp_min_scalar_kernel_slow_);
  both(m, "clamp_min", "List", foreach_tensor_clamp_min_list_kernel_slow, foreach_tensor_clamp_min_list_kernel_slow_);
  both(m, "clamp_min", "ScalarList", foreach_tensor_clamp_min_scalarlist_kernel_slow,
       foreach_tensor_clamp_min_scalarlist_kernel_slow_);
  both(m, "clamp_max", "Scalar", foreach_tensor_clamp_max_scalar_kernel_slow,
       foreach_tensor_clamp_max_scalar_kernel_slow_);
  both(m, "clamp_max", "List", foreach_tensor_clamp_max_list_kernel_slow, foreach_tensor_clamp_max_list_kernel_slow_);
  both(m, "clamp_max", "ScalarList", foreach_tensor_clamp_max_scalarlist_kernel_slow,
       foreach_tensor_clamp_max_scalarlist_kernel_slow_);
  // maximum/minimum share clamp_min/clamp_max's kernels in ATen.
  both(m, "maximum", "Scalar", foreach_tensor_clamp_min_scalar_kernel_slow,
       foreach_tensor_clamp_min_scalar_kernel_slow_);
  both(m, "maximum", "List", foreach_tensor_clamp_min_list_kernel_slow, foreach_tensor_clamp_min_list_kernel_slow_);
  both(m, "maximum", "ScalarList", foreach_tensor_clamp_min_scalarlist_kernel_slow,
       foreach_tensor_clamp_min_scalarlist_kernel_slow_);
  both(m, "minimum", "Scalar", foreach_tensor_clamp_max_scalar_kernel_slow,
       foreach_tensor_clamp_max_scalar_kernel_slow_);
  both(m, "minimum", "List", foreach_tensor_clamp_max_list_kernel_slow, foreach_tensor_clamp_max_list_kernel_slow_);
  both(m, "minimum", "ScalarList", foreach_tensor_clamp_max_scalarlist_kernel_slow,
       foreach_tensor_clamp_max_scalarlist_kernel_slow_);
  both(m, "pow", "Scalar", foreach_tensor_pow_scalar_kernel_slow, foreach_tensor_pow_scalar_kernel_slow_);
  both(m, "pow", "List", foreach_tensor_pow_list_kernel_slow, foreach_tensor_pow_list_kernel_slow_);
  both(m, "pow", "ScalarList", foreach_tensor_pow_scalarlist_kernel_slow, foreach_tensor_pow_scalarlist_kernel_slow_);
  both(m, "add", "Tensor", foreach_tensor_add_tensor_kernel_slow, foreach_tensor_add_tensor_kernel_slow_);
  both(m, "mul", "Tensor", foreach_tensor_mul_tensor_kernel_slow, foreach_tensor_mul_tensor_kernel_slow_);
  both(m, "div", "Tensor", foreach_tensor_div_tensor_kernel_slow, foreach_tensor_div_tensor_kernel_slow_);
  both(m, "addcmul", "Scalar", foreach_tensor_addcmul_scalar_slow, foreach_tensor_addcmul_scalar_slow_);
  both(m, "addcmul", "ScalarList", foreach_tensor_addcmul_scalarlist_slow, foreach_tensor_addcmul_scalarlist_slow_);
  both(m, "addcmul", "Tensor", foreach_tensor_addcmul_tensor_slow, foreach_tensor_addcmul_tensor_slow_);
  both(m, "addcdiv", "Scalar", foreach_tensor_addcdiv_scalar_slow, foreach_tensor_addcdiv_scalar_slow_);
  both(m, "addcdiv", "ScalarList", foreach_tensor_addcdiv_scalarlist_slow, foreach_tensor_addcdiv_scalarlist_slow_);
  both(m, "addcdiv", "Tensor", foreach_tensor_addcdiv_tensor_slow, foreach_tensor_addcdiv_tensor_slow_);
  both(m, "lerp", "List", foreach_tensor_ternary_lerp_slow, foreach_tensor_ternary_lerp_slow_);
  both(m, "lerp", "Scalar", foreach_tensor_lerp_list_kernel_slow, foreach_tensor_lerp_list_kernel_slow_);
  both(m, "lerp", "ScalarList", foreach_tensor_lerp_scalarlist_kernel_slow,
       foreach_tensor_lerp_scalarlist_kernel_slow_);
  m.impl("_foreach_pow.ScalarAndTensor", foreach_scalar_pow_list_kernel_slow);
  both(m, "sqrt", "", foreach_tensor_sqrt_slow, foreach_tensor_sqrt_slow_);
  both(m, "rsqrt", "", foreach_tensor_rsqrt_slow, foreach_tensor_rsqrt_slow_);
  both(m, "neg", "", foreach_tensor_neg_slow, foreach_tensor_neg_slow_);
  both(m, "abs", "", foreach_tensor_abs_slow, foreach_tensor_abs_slow_);
  both(m, "exp", "", foreach_tensor_exp_slow, foreach_tensor_exp_slow_);
  both(m, "log", "", foreach_tensor_log_slow, foreach_tensor_log_slow_);
  both(m, "reciprocal", "", foreach_tensor_reciprocal_slow, foreach_tensor_reciprocal_slow_);
  both(m, "sign", "", foreach_tensor_sign_slow, foreach_tensor_sign_slow_);
  both(m, "acos", "", foreach_tensor_acos_slow, foreach_tensor_acos_slow_);
  both(m, "asin", "", foreach_tensor_asin_slow, foreach_tensor_asin_slow_);
  both(m, "atan", "", foreach_tensor_atan_slow, foreach_tensor_atan_slow_);
  both(m, "ceil", "", foreach_tensor_ceil_slow, foreach_tensor_ceil_slow_);
  both(m, "cos", "", foreach_tensor_cos_slow, foreach_tensor_cos_slow_);
  both(m, "cosh", "", foreach_tensor_cosh_slow, foreach_tensor_cosh_slow_);
  both(m, "erf", "", foreach_tensor_erf_slow, foreach_tensor_erf_slow_);
  both(m, "erfc", "", foreach_tensor_erfc_slow, foreach_tensor_erfc_slow_);
  both(m, "expm1", "", foreach_tensor_expm1_slow, foreach_tensor_expm1_slow_);
  both(m, "floor", "", foreach_tensor_floor_slow, foreach_tensor_floor_slow_);
  both(m, "frac", "", foreach_tensor_frac_slow, foreach_tensor_frac_slow_);
  both(m, "lgamma", "", foreach_tensor_lgamma_slow, foreach_tensor_lgamma_slow_);
  both(m, "log10", "", foreach_tensor_log10_slow, foreach_tensor_log10_slow_);
  both(m, "log1p", "", foreach_tensor_log1p_slow, foreach_tensor_log1p_slow_);
  both(m, "log2", "", foreach_tensor_log2_slow, foreach_tensor_log2_slow_);
  both(m, "round", "", foreach_tensor_round_slow, foreach_tensor_round_slow_);
  both(m, "sigmoid", "", foreach_tensor_sigmoid_slow, foreach_tensor_sigmoid_slow_);
  both(m, "sin", "", foreach_tensor_sin_slow, foreach_tensor_sin_slow_);
  both(m, "sinh", "", foreach_tensor_sinh_slow, foreach_tensor_sinh_slow_);
  both(m, "tan", "", foreach_tensor_tan_slow, foreach_tensor_tan_slow_);
  both(m, "tanh", "", foreach_tensor_tanh_slow, foreach_tensor_tanh_slow_);
  both(m, "trunc", "", foreach_tensor_trunc_slow, foreach_tensor_trunc_slow_);
  m.impl("_foreach_zero_", foreach_tensor_zero_slow_);
  m.impl("_foreach_copy_", foreach_tensor_copy_list_kernel_slow_);
  m.impl("_foreach_norm.Scalar", foreach_tensor_norm_slow);
  m.impl("_foreach_max", foreach_tensor_max_slow);
  m.impl("_foreach_powsum.Scalar", foreach_tensor_powsum_slow);
  m.impl("_foreach_clone", foreach_tensor_clone_slow);
}

}  // namespace
}  // namespace torch_tpu::ops
