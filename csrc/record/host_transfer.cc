// Copies between tpu storages and host memory, the path of every .cpu(),
// .item(), print and host-to-device copy.
#include "record/op_call.h"

#include <ATen/ops/empty.h>
#include <ATen/ops/from_blob.h>
#include <ATen/record_function.h>

#include <cstring>

#include "aten/device.h"
#include "compile/metrics.h"
#include "record/driver.h"

#include "record/op_call_internal.h"

namespace torch_tpu::record {

using ir::ElemType;
using ir::Value;

// Views of values up to this size are read through a host copy of the whole value.
constexpr size_t kHostViewBytes = size_t{1} << 20;

void copy_to_host(const at::Tensor& src, void* dst, size_t nbytes) {
  if (nbytes == 0) return;
  RECORD_FUNCTION("tpu::device_to_host", std::vector<c10::IValue>());
  // Every host read passes here: the driver makes the value available (a
  // deferred driver flushes; strict eager runs its queue up to this value).
  StorageSlot* s = slot_of(src.storage());
  current_driver().before_host_read(s);
  ViewMeta v = view_of(src);
  if (!s->buffer && s->sharded && !s->sharded->shards.empty() && s->elem == v.elem && v.covers(s->numel)) {
    // A sharded value read whole: assembled from its shards on the host.
    std::vector<uint8_t> host = assemble_sharded(*s->sharded, s->elem);
    TORCH_INTERNAL_ASSERT(host.size() == nbytes, "tpu: a sharded value's size differs from its storage's");
    std::memcpy(dst, host.data(), nbytes);
    bump(metrics().d2h_count);
    bump(metrics().d2h_bytes, static_cast<int64_t>(nbytes));
    return;
  }
  gather_slot(s, "a host read of part of it");
  if (s->buffer && s->elem == v.elem && v.covers(s->numel)) {
    s->buffer->to_host(dst, nbytes);
  } else if (s->buffer && s->elem == v.elem && s->nbytes <= kHostViewBytes) {
    // A view of a small value (an output sliced back from its bucket size,
    // one row printed): the whole value comes to the host and the view is
    // taken there, instead of a program per view shape.
    at::Tensor whole = at::empty({s->numel}, src.options().device(c10::kCPU));
    s->buffer->to_host(whole.mutable_data_ptr(), whole.nbytes());
    at::Tensor out = at::from_blob(dst, src.sizes(), src.options().device(c10::kCPU));
    out.copy_(whole.as_strided(src.sizes(), src.strides(), src.storage_offset()));
  } else {
    // Materialise the view as its own contiguous buffer first.
    at::Tensor tmp = at::empty(src.sizes(), src.options());
    OpCall call("materialize");
    call.input(src);
    call.output(tmp);
    call.run([](ir::Builder&, const std::vector<Value>& in) { return std::vector<Value>{in[0]}; });
    StorageSlot* t = slot_of(tmp.storage());
    current_driver().before_host_read(t);  // queued behind `src`, or recorded by a deferred driver
    t->buffer->to_host(dst, nbytes);
  }
  bump(metrics().d2h_count);
  bump(metrics().d2h_bytes, static_cast<int64_t>(nbytes));
}

void copy_from_host(const at::Tensor& dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  RECORD_FUNCTION("tpu::host_to_device", std::vector<c10::IValue>());
  StorageSlot* s = slot_of(dst.storage());
  ViewMeta v = view_of(dst);
  ElemType e = v.elem;
  int dev = dst.device().index() < 0 ? 0 : dst.device().index();
  int64_t storage_elems = static_cast<int64_t>(s->nbytes) / ir::byte_size(e);
  bump(metrics().h2d_count);
  bump(metrics().h2d_bytes, static_cast<int64_t>(nbytes));
  if (v.covers(storage_elems) && static_cast<int64_t>(s->nbytes) == storage_elems * ir::byte_size(e)) {
    // A pending write recorded earlier must not land after this one.
    materialize_slot(s);
    if (s->sharded && s->elem == e && s->numel == v.numel()) {
      // A sharded tensor written whole from the host keeps its layout
      // (a checkpoint loaded into another mesh lands sharded).
      ShardedPtr fresh = scatter_host(*s->sharded, src, e);
      s->buffer = nullptr;
      s->sharded = std::move(fresh);
      return;
    }
    s->set_buffer(client().buffer_from_host(src, to_pjrt(e), {v.numel()}, dev));
    s->elem = e;
    s->numel = v.numel();
    return;
  }
  at::Tensor tmp = at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  copy_from_host(tmp, src, nbytes);
  OpCall call("copy_");
  call.input(tmp);
  call.output(dst);
  call.run([](ir::Builder&, const std::vector<Value>& in) { return std::vector<Value>{in[0]}; });
}

}  // namespace torch_tpu::record
