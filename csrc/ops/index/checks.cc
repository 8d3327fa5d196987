#include "ops/index/checks.h"

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>

namespace torch_tpu::ops {

bool debug_checks() {
  static const bool on = [] {
    const char* e = std::getenv("TORCH_TPU_DEBUG_CHECKS");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return on;
}

void check_index_range(const at::Tensor& index, int64_t dim, int64_t size, IndexErrorStyle style) {
  if (!debug_checks() || index.numel() == 0) return;
  at::Tensor h = index.to(c10::kCPU).to(c10::kLong).contiguous();
  const int64_t* p = h.const_data_ptr<int64_t>();
  int64_t lo = style == IndexErrorStyle::kAdvanced ? -size : 0;
  for (int64_t i = 0, n = h.numel(); i < n; ++i) {
    int64_t v = p[i];
    if (v >= lo && v < size) continue;
    switch (style) {
      case IndexErrorStyle::kSelect:
        TORCH_CHECK_INDEX(false, "index out of range in self");
      case IndexErrorStyle::kGather:
        TORCH_CHECK(false, "index ", v, " is out of bounds for dimension ", dim, " with size ", size);
      case IndexErrorStyle::kAdvanced:
        TORCH_CHECK_INDEX(false, "index ", v, " is out of bounds for dimension ", dim, " with size ", size);
    }
  }
}

}  // namespace torch_tpu::ops
