// torch.cat as an append with room to spare, for the integer sequences
// that grow by a few elements per step (generate()'s token ids, attention
// mask and cache positions).
//
// A plain cat's program holds both input lengths, so a loop that appends one
// token per step compiles a new cat at every length. Here the result of such
// a cat gets a storage rounded up to a power of two, and the next append to
// it is a dynamic_update_slice of that storage at a runtime offset: one
// program per storage size, not per length. The result still owns its
// storage (the update writes a new buffer), so it aliases nothing, and it
// is a contiguous tensor of the usual shape; only its storage is larger.
#pragma once
#include <ATen/core/Tensor.h>

#include <optional>
#include <vector>

namespace torch_tpu::ops {

struct Room {
  at::Tensor out;       // the result: shape `sizes`, over a storage with room
  bool filled = false;  // false: the caller still writes the cat into `out`
};

// cat(`ins`, `dim`) (result shape `sizes`, a wrapped dim) given room to
// grow: appended in place of a copy when the first input already has the
// room, else an empty result for the caller to fill. nullopt when the call
// is not such an append: not strict eager, not two non-empty integer or
// bool tensors of one dtype, not a single row along `dim`, or too large.
std::optional<Room> cat_with_room(const std::vector<at::Tensor>& ins, int64_t dim, c10::IntArrayRef sizes,
                                  c10::ScalarType dtype);

}  // namespace torch_tpu::ops
