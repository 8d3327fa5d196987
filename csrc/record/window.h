// Windows: a read-only integer view into a larger storage, passed to its op
// as a small buffer of its own instead of the whole storage.
//
// Without them, an op on `ids[:, -1]` takes the whole of `ids` as its
// parameter and slices it in the program, so its key holds the storage's
// size and the view's offset: every step of a loop that grows `ids` (token
// ids in generate(), an attention mask, cache positions) compiles the same
// op again. A window is a PJRT buffer over the view's own bytes (no copy),
// so the op's program depends on the view's shape alone.
//
// Only strict eager uses them (a recorded graph keeps its storages as they
// are), only on platforms whose device memory the host addresses (XLA:CPU),
// and only for integer and bool views, where the values that grow live;
// TORCH_TPU_EAGER_WINDOWS=0 turns them off.
#pragma once
#include <memory>
#include <optional>

#include "aten/storage.h"
#include "record/strided.h"

namespace torch_tpu::record {

struct Window {
  std::unique_ptr<StorageSlot> slot;  // the window's own storage
  ViewMeta view;                      // the input's elements within it
};

// `v`, a read of storage `s` on tpu:`device`, as a window; nullopt to read `s`
// as usual. May wait: for the queued write of `s`, and for its value.
std::optional<Window> window_for(StorageSlot* s, const ViewMeta& v, int device);

// Whether strict or fused eager reads `v`, an integer view of part of `s`, at a
// runtime offset and strides (OpCall's hidden scalars, read_view_at) rather
// than at the position baked into the program: for the views no window
// covers (strided, such as one column of a batch of growing rows, or any
// view on a platform without windows), so that their keys hold the view's
// shape and the storage's size, not where the view lies.
bool read_at_runtime_position(const StorageSlot* s, const ViewMeta& v);

}  // namespace torch_tpu::record
