#include "aten/host_alias.h"

#include <ATen/ops/from_blob.h>

#include "aten/device.h"
#include "aten/storage.h"
#include "record/op_call.h"
#include "runtime/error.h"

namespace torch_tpu {

std::optional<at::Tensor> host_alias(const at::Tensor& t) {
  if (t.device().type() != c10::DeviceType::PrivateUse1 || !t.is_contiguous() || t.numel() == 0) return std::nullopt;
  runtime::Client& c = client();
  if (c.platform_name() != "cpu") return std::nullopt;
  record::synchronize();
  StorageSlot* s = slot_of(t.storage());
  materialize_slot(s);
  if (!s->buffer || s->pending || s->elem != to_elem(t.scalar_type())) return std::nullopt;
  if (static_cast<size_t>(s->numel) * t.element_size() < (t.storage_offset() + t.numel()) * t.element_size())
    return std::nullopt;
  // The slot's reference is the only one: no other storage (and no pending
  // graph) holds this buffer, so writing it changes `t` alone.
  if (s->buffer.use_count() != 1) return std::nullopt;
  PJRT_Buffer_UnsafePointer_Args a{};
  a.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE;
  a.buffer = s->buffer->get();
  if (!runtime::take_error(c.api(), c.api()->PJRT_Buffer_UnsafePointer(&a)).empty() || a.buffer_pointer == 0)
    return std::nullopt;
  auto* keep = new runtime::BufferPtr(s->buffer);
  char* base = reinterpret_cast<char*>(a.buffer_pointer) + t.storage_offset() * t.element_size();
  return at::from_blob(
      base, t.sizes(), t.strides(), [keep](void*) { delete keep; },
      at::TensorOptions().dtype(t.scalar_type()).device(c10::kCPU));
}

}  // namespace torch_tpu
