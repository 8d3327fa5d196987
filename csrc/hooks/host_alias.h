// A tpu tensor's memory seen as a CPU tensor, on platforms whose device
// memory is host memory (the XLA:CPU plugin). Collectives use it to hand
// Gloo the device buffer itself instead of staging copies (the copy back
// into a fresh device buffer cost more than the collective).
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>

namespace torch_tpu {

// Runs and waits for all enqueued tpu work (so no program reads or writes
// the buffer meanwhile), then returns a CPU tensor over `t`'s device buffer:
// writes to it change `t`. nullopt where that is not possible or not safe:
// another platform, a non-contiguous tensor, a storage with no buffer yet,
// a buffer another holder shares, or a storage whose buffer type differs
// from `t`'s dtype. The alias keeps the buffer alive; a later write to `t`
// replaces `t`'s buffer and leaves the alias behind.
// An alias in use counts as a holder (a second alias is refused) until
// release_host_alias(): then it only keeps the memory valid.
std::optional<at::Tensor> host_alias(const at::Tensor& t);
// Marks an alias from host_alias() as no longer written or read (its
// collective has completed). Returns false for any other tensor.
bool release_host_alias(const at::Tensor& alias);

}  // namespace torch_tpu
