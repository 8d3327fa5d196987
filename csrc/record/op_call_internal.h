// Helpers shared by the recorder's files (op_call.cc, scalars.cc, work.cc,
// execute.cc, host_fill.cc, host_transfer.cc); private to csrc/record.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string_view>

#include "aten/storage.h"
#include "ir/types.h"

namespace torch_tpu::record {

// Whether environment variable `name` is set to something other than "" or "0".
inline bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

// Host bytes of a scalar as an element type (complex128 needs all 16).
using ScalarBits = std::array<uint64_t, 2>;
ScalarBits scalar_bits(const c10::Scalar& s, ir::ElemType t);

// Whether a slot holds a value (run, or pending in a deferred graph).
inline bool has_value(const StorageSlot* s) {
  return s->buffer || s->pending || (s->sharded && !s->sharded->shards.empty());
}

// Raises torch.OutOfMemoryError before a program whose results (`out_bytes`)
// exceed the device's whole memory is compiled or run.
void check_fits_device(int device, std::string_view what, int64_t out_bytes);

}  // namespace torch_tpu::record
