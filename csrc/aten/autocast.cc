// torch.amp.autocast("tpu"): per-op cast policies on the AutocastPrivateUse1
// dispatch key. The op lists are ATen's own (the AT_FORALL_* macros in
// ATen/autocast_mode.h), i.e. exactly CUDA's: matmul/conv-like ops run in
// the autocast dtype (bfloat16 by default, see torch_tpu/_amp.py),
// precision-sensitive ops (exp/log/pow, norms, softmax, losses, sums) run in
// float32, and mixed-dtype ops like addcmul promote to the widest input.
// Every other op falls through to the backend unchanged.
#include <ATen/autocast_mode.h>
#include <torch/library.h>

namespace torch_tpu {
namespace {

// ATen's signature lists name these unqualified.
using at::IntArrayRef;
using at::Scalar;
using at::ScalarType;
using at::Tensor;

// binary_cross_entropy is unsafe under autocast (it saturates in low
// precision); CUDA bans it with this advice, and so do we.
at::Tensor binary_cross_entropy_banned(const at::Tensor&, const at::Tensor&, const std::optional<at::Tensor>&,
                                       int64_t) {
  TORCH_CHECK(false,
              "torch.nn.functional.binary_cross_entropy and torch.nn.BCELoss are unsafe to autocast.\n"
              "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
              "In this case, combine the two layers using torch.nn.functional.binary_cross_entropy_with_logits\n"
              "or torch.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
              "safe to autocast.");
}

TORCH_LIBRARY_IMPL(_, AutocastPrivateUse1, m) { m.fallback(torch::CppFunction::makeFallthrough()); }

TORCH_LIBRARY_IMPL(aten, AutocastPrivateUse1, m) {
#define TT_LOWER_PRECISION_FP(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, lower_precision_fp)
  AT_FORALL_LOWER_PRECISION_FP(TT_LOWER_PRECISION_FP)
#undef TT_LOWER_PRECISION_FP

#define TT_FP32(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32)
  AT_FORALL_FP32(TT_FP32)
#undef TT_FP32

#define TT_FP32_SET_OPT_DTYPE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, fp32_set_opt_dtype)
  AT_FORALL_FP32_SET_OPT_DTYPE(TT_FP32_SET_OPT_DTYPE)
#undef TT_FP32_SET_OPT_DTYPE

  // norm without a dtype argument: redispatch to the overload that takes one.
#define TT_FP32_APPEND_DTYPE(FN, NAME, SIG, REDISPATCH_SIG, POLICY) \
  KERNEL_DIFFERENT_REDISPATCH_SIGNATURE_PRIVATEUSEONE(FN, NAME, SIG, REDISPATCH_SIG, POLICY)
  AT_FORALL_DIFFERENT_REDISPATCH_SIGNATURE(TT_FP32_APPEND_DTYPE)
#undef TT_FP32_APPEND_DTYPE

#define TT_PROMOTE(...) KERNEL_PRIVATEUSEONE(__VA_ARGS__, promote)
  AT_FORALL_PROMOTE(TT_PROMOTE)
#undef TT_PROMOTE

  m.impl(TORCH_SELECTIVE_NAME("aten::binary_cross_entropy"), TORCH_FN(binary_cross_entropy_banned));
}

}  // namespace
}  // namespace torch_tpu
