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

namespace torch_tpu::ops {
namespace {

using namespace at::native;  // NOLINT: the foreach_tensor_*_slow kernels

// op.Scalar / op.List / op.ScalarList (functional and in-place) mapped to
// ATen kernel family `k`.
#define TT_FOREACH_BINARY(op, k)                                                      \
  m.impl("_foreach_" #op ".Scalar", foreach_tensor_##k##_scalar_kernel_slow);         \
  m.impl("_foreach_" #op "_.Scalar", foreach_tensor_##k##_scalar_kernel_slow_);       \
  m.impl("_foreach_" #op ".List", foreach_tensor_##k##_list_kernel_slow);             \
  m.impl("_foreach_" #op "_.List", foreach_tensor_##k##_list_kernel_slow_);           \
  m.impl("_foreach_" #op ".ScalarList", foreach_tensor_##k##_scalarlist_kernel_slow); \
  m.impl("_foreach_" #op "_.ScalarList", foreach_tensor_##k##_scalarlist_kernel_slow_);

#define TT_FOREACH_TENSOR(op)                                                  \
  m.impl("_foreach_" #op ".Tensor", foreach_tensor_##op##_tensor_kernel_slow); \
  m.impl("_foreach_" #op "_.Tensor", foreach_tensor_##op##_tensor_kernel_slow_);

#define TT_FOREACH_UNARY(op)                           \
  m.impl("_foreach_" #op, foreach_tensor_##op##_slow); \
  m.impl("_foreach_" #op "_", foreach_tensor_##op##_slow_);

#define TT_FOREACH_ADDC(op)                                                       \
  m.impl("_foreach_" #op ".Scalar", foreach_tensor_##op##_scalar_slow);           \
  m.impl("_foreach_" #op "_.Scalar", foreach_tensor_##op##_scalar_slow_);         \
  m.impl("_foreach_" #op ".ScalarList", foreach_tensor_##op##_scalarlist_slow);   \
  m.impl("_foreach_" #op "_.ScalarList", foreach_tensor_##op##_scalarlist_slow_); \
  m.impl("_foreach_" #op ".Tensor", foreach_tensor_##op##_tensor_slow);           \
  m.impl("_foreach_" #op "_.Tensor", foreach_tensor_##op##_tensor_slow_);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  TT_FOREACH_BINARY(add, add)
  TT_FOREACH_BINARY(sub, sub)
  TT_FOREACH_BINARY(mul, mul)
  TT_FOREACH_BINARY(div, div)
  TT_FOREACH_BINARY(clamp_min, clamp_min)
  TT_FOREACH_BINARY(clamp_max, clamp_max)
  // maximum/minimum share clamp_min/clamp_max's kernels in ATen.
  TT_FOREACH_BINARY(maximum, clamp_min)
  TT_FOREACH_BINARY(minimum, clamp_max)
  TT_FOREACH_BINARY(pow, pow)
  TT_FOREACH_TENSOR(add)
  TT_FOREACH_TENSOR(mul)
  TT_FOREACH_TENSOR(div)
  TT_FOREACH_ADDC(addcmul)
  TT_FOREACH_ADDC(addcdiv)
  m.impl("_foreach_lerp.List", foreach_tensor_ternary_lerp_slow);
  m.impl("_foreach_lerp_.List", foreach_tensor_ternary_lerp_slow_);
  m.impl("_foreach_lerp.Scalar", foreach_tensor_lerp_list_kernel_slow);
  m.impl("_foreach_lerp_.Scalar", foreach_tensor_lerp_list_kernel_slow_);
  m.impl("_foreach_lerp.ScalarList", foreach_tensor_lerp_scalarlist_kernel_slow);
  m.impl("_foreach_lerp_.ScalarList", foreach_tensor_lerp_scalarlist_kernel_slow_);
  m.impl("_foreach_pow.ScalarAndTensor", foreach_scalar_pow_list_kernel_slow);
  TT_FOREACH_UNARY(sqrt)
  TT_FOREACH_UNARY(rsqrt)
  TT_FOREACH_UNARY(neg)
  TT_FOREACH_UNARY(abs)
  TT_FOREACH_UNARY(exp)
  TT_FOREACH_UNARY(log)
  TT_FOREACH_UNARY(reciprocal)
  TT_FOREACH_UNARY(sign)
  m.impl("_foreach_zero_", foreach_tensor_zero_slow_);
  m.impl("_foreach_copy_", foreach_tensor_copy_list_kernel_slow_);
  m.impl("_foreach_norm.Scalar", foreach_tensor_norm_slow);
  TT_FOREACH_UNARY(acos)
  TT_FOREACH_UNARY(asin)
  TT_FOREACH_UNARY(atan)
  TT_FOREACH_UNARY(ceil)
  TT_FOREACH_UNARY(cos)
  TT_FOREACH_UNARY(cosh)
  TT_FOREACH_UNARY(erf)
  TT_FOREACH_UNARY(erfc)
  TT_FOREACH_UNARY(expm1)
  TT_FOREACH_UNARY(floor)
  TT_FOREACH_UNARY(frac)
  TT_FOREACH_UNARY(lgamma)
  TT_FOREACH_UNARY(log10)
  TT_FOREACH_UNARY(log1p)
  TT_FOREACH_UNARY(log2)
  TT_FOREACH_UNARY(round)
  TT_FOREACH_UNARY(sigmoid)
  TT_FOREACH_UNARY(sin)
  TT_FOREACH_UNARY(sinh)
  TT_FOREACH_UNARY(tan)
  TT_FOREACH_UNARY(tanh)
  TT_FOREACH_UNARY(trunc)
  m.impl("_foreach_max", foreach_tensor_max_slow);
  m.impl("_foreach_powsum.Scalar", foreach_tensor_powsum_slow);
  m.impl("_foreach_clone", foreach_tensor_clone_slow);
}

#undef TT_FOREACH_BINARY
#undef TT_FOREACH_TENSOR
#undef TT_FOREACH_UNARY
#undef TT_FOREACH_ADDC

}  // namespace
}  // namespace torch_tpu::ops
