// Optional bounds checks for index tensors. XLA clamps out-of-range gather
// indices and drops out-of-range scatter updates, so by default a bad index
// never crashes but silently gives a wrong value. With
// TORCH_TPU_DEBUG_CHECKS=1 the indices are copied to the host (a sync) and
// checked, raising the same errors as PyTorch CPU.
#pragma once
#include <ATen/core/Tensor.h>

namespace torch_tpu::ops {

bool debug_checks();

enum class IndexErrorStyle {
  kSelect,    // IndexError "index out of range in self" (index_select, embedding)
  kGather,    // RuntimeError "index 5 is out of bounds for dimension 0 with size 3"
  kAdvanced,  // IndexError, same message as kGather; negatives allowed (they wrap)
};

// No-op unless debug_checks(). Checks every element of `index` lies in
// [0, size) ([-size, size) for kAdvanced).
void check_index_range(const at::Tensor& index, int64_t dim, int64_t size, IndexErrorStyle style);

}  // namespace torch_tpu::ops
