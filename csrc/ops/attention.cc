// scaled_dot_product_attention runs PyTorch's composite math path on tpu
// (matmul, softmax, dropout, masks); this file adds the pieces it reaches
// that had no kernel: isneginf / isposinf (used by _safe_softmax for
// fully masked rows).
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

template <bool kNeg>
at::Tensor& isinf_sign_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(!self.is_complex(), kNeg ? "isneginf" : "isposinf", " does not support complex inputs.");
  TORCH_CHECK(out.scalar_type() == c10::kBool, kNeg ? "isneginf" : "isposinf",
              " does not support non-boolean outputs.");
  at::native::resize_output(out, self.sizes());
  if (!c10::isFloatingType(self.scalar_type())) {
    // Integers and bools are never infinite.
    pointwise(
        kNeg ? "isneginf" : "isposinf", {self}, out, c10::kBool,
        [](Builder& b, const Values& x) { return zero(b, ElemType::kPred, b.dims(x[0])); }, 1);
    return out;
  }
  pointwise(kNeg ? "isneginf" : "isposinf", {self}, out, self.scalar_type(), [](Builder& b, const Values& x) {
    Value inf = b.broadcast_to(kNeg ? lowest(b, b.elem(x[0])) : highest(b, b.elem(x[0])), b.dims(x[0]));
    return b.compare(x[0], inf, Direction::kEq);
  });
  return out;
}
template <bool kNeg>
at::Tensor isinf_sign(const at::Tensor& self) {
  at::Tensor out = empty_tpu(self.sizes(), c10::kBool, self.device());
  return isinf_sign_out<kNeg>(self, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("isneginf", isinf_sign<true>);
  m.impl("isneginf.out", isinf_sign_out<true>);
  m.impl("isposinf", isinf_sign<false>);
  m.impl("isposinf.out", isinf_sign_out<false>);
}

}  // namespace
}  // namespace torch_tpu::ops
