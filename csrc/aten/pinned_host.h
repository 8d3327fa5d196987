// Page-locked ("pinned") host memory as PyTorch sees it: `pin_memory()`,
// `torch.empty(..., pin_memory=True)` and DDP's host staging buffers
// allocate here, and `is_pinned()` answers for any address inside such an
// allocation. PJRT copies from any host memory; what this gives callers is
// the contract they test for (DDP asserts it before an unused-parameter
// reduction), with no pinning cost on hosts whose transfers do not need it.
#pragma once

#include <c10/core/Allocator.h>

namespace torch_tpu {

c10::Allocator* pinned_host_allocator();
bool is_pinned_host_ptr(const void* p);

}  // namespace torch_tpu
