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
// is not such an append: lengths not at runtime (a capture), not two non-empty integer or
// bool tensors of one dtype, not a single row along `dim`, or too large.
std::optional<Room> cat_with_room(const std::vector<at::Tensor>& ins, int64_t dim, c10::IntArrayRef sizes,
                                  c10::ScalarType dtype);

// What generate() does next with such a tensor, read as its whole storage
// with the length a runtime scalar, so that these too compile once per
// storage size rather than once per length. Both apply in strict and fused eager to a
// contiguous integer or bool tensor at the start of a storage rounded up as
// above (`has_room`).
bool has_room(const at::Tensor& t);

// dst.copy_(src) with a dtype conversion (the attention mask's `.bool()`),
// where dst is a fresh contiguous tensor of src's sizes that nothing else
// shares: dst gets a storage with the same room, converted whole. Returns
// false (nothing done) when the call is not of that form.
bool convert_with_room(const at::Tensor& src, const at::Tensor& dst);

// Host data uploaded into a fresh tensor (`.to("tpu")` of a prompt or its
// attention mask): a small integer dst gets a storage with room, the tail
// zero, so that the glue computed from it reads it whole. `host` is
// contiguous, of dst's sizes and dtype. False (nothing done) when dst is not
// a fresh, small, integer tensor in strict or fused eager.
bool upload_with_room(const at::Tensor& host, const at::Tensor& dst);

// fill_ of such a fresh tensor (torch.ones for a missing attention mask),
// or of a tensor that has room (its whole storage is filled).
bool fill_with_room(const at::Tensor& self, const c10::Scalar& value);

// The elementwise ops generate() applies to these tensors (comparisons,
// arithmetic, masked_fill, a cumsum along a row) act on whole storages: the
// room's elements are computed too and never read. room_of is the storage's
// element count where has_room(t), else 0; whole_of is that storage as a
// flat tensor. A tensor that fills its storage (a prompt of 128 tokens)
// counts too, so that it shares its programs with shorter ones.
int64_t room_of(const at::Tensor& t);
at::Tensor whole_of(const at::Tensor& t);
// The whole storage to write a result of `room` elements into: out's own
// where it has that room, or a fresh out's (contiguous, at the start of its
// exact storage, which nothing else holds) regrown to it. nullopt otherwise.
std::optional<at::Tensor> whole_out(const at::Tensor& out, int64_t room);

// Gives a tensor with room an exact storage of its own, for code that needs
// a tensor to span its storage (sharding it, a collective's buffer). False
// (nothing done) where t has no room or another tensor shares its storage.
bool shed_room(const at::Tensor& t);

// constant_pad_nd of such a tensor along its last dim only (the padding
// mask widened to the cache length at every step): the result's shape
// holds len + lo + hi, which stays fixed while len grows, and len itself is
// a runtime scalar. nullopt when the call is not of that form.
std::optional<at::Tensor> pad_with_room(const at::Tensor& self, int64_t lo, int64_t hi, const c10::Scalar& value);

}  // namespace torch_tpu::ops
