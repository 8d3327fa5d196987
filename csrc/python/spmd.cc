// torch_tpu.spmd's C++ side: a tensor's storage spread over a mesh as one
// buffer per partition, and read back whole.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/device.h"
#include "aten/storage.h"
#include "eager/spmd.h"
#include "ops/shape/append.h"

namespace torch_tpu {
namespace {

StorageSlot* whole_storage_slot(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what, ": expected a tpu tensor, got one on ",
              t.device());
  ops::shed_room(t);  // a small integer upload's spare room (shape/append.h)
  StorageSlot* s = slot_of(t.storage());
  TORCH_CHECK(s, what, ": the tensor has no elements");
  TORCH_CHECK(
      t.is_contiguous() && t.storage_offset() == 0 && static_cast<size_t>(t.numel() * t.element_size()) == s->nbytes,
      what, ": the tensor must be contiguous and span its whole storage (shard the base tensor, not a view)");
  return s;
}

// `shards[p]`: partition p's block as a contiguous CPU tensor.
void shard(const at::Tensor& t, const std::vector<int>& devices, const std::vector<int64_t>& tiles, int64_t replicas,
           const std::vector<int64_t>& assignment, const std::vector<int64_t>& dims,
           const std::vector<at::Tensor>& shards) {
  StorageSlot* s = whole_storage_slot(t, "mark_sharding");
  TORCH_CHECK_VALUE(shards.size() == devices.size(), "mark_sharding: one shard per device expected");
  materialize_slot(s);
  auto v = std::make_shared<ShardedValue>();
  v->devices = devices;
  v->dims = dims;
  v->sharding.tiles = tiles;
  v->sharding.replicas = replicas;
  v->sharding.devices = assignment;
  const ir::ElemType elem = to_elem(t.scalar_type());
  for (size_t p = 0; p < shards.size(); ++p) {
    const at::Tensor& h = shards[p];
    TORCH_CHECK(h.device().is_cpu() && h.is_contiguous() && h.scalar_type() == t.scalar_type(),
                "mark_sharding: internal error: shard ", p, " is not a contiguous CPU tensor of the tensor's dtype");
    std::vector<int64_t> sd(h.sizes().begin(), h.sizes().end());
    v->shards.push_back(client().buffer_from_host(h.data_ptr(), to_pjrt(elem), sd, devices[p]));
  }
  s->buffer = nullptr;
  s->sharded = std::move(v);
  s->elem = elem;
  s->numel = t.numel();
}

pybind11::object info(const at::Tensor& t) {
  if (t.device().type() != c10::DeviceType::PrivateUse1) return pybind11::none();
  StorageSlot* s = slot_of(t.storage());
  if (!s) return pybind11::none();
  materialize_slot(s);
  ShardedPtr v = s->sharded;
  if (!v) return pybind11::none();
  return pybind11::make_tuple(v->devices, v->sharding.tiles, v->sharding.replicas, v->sharding.devices, v->dims,
                              v->sharding.hlo());
}

// Per partition, its block on the host (for tests and checkpoints).
std::vector<at::Tensor> host_shards(const at::Tensor& t) {
  StorageSlot* s = slot_of(t.storage());
  TORCH_CHECK(s, "local_shards: the tensor is not sharded");
  materialize_slot(s);
  reshard_slot(s);
  ShardedPtr v = s->sharded;
  TORCH_CHECK(v, "local_shards: the tensor is not sharded");
  std::vector<at::Tensor> out;
  for (const auto& b : v->shards) {
    at::Tensor h = at::empty(b->dims(), t.options().device(c10::kCPU));
    if (h.numel() > 0) b->to_host(h.data_ptr(), static_cast<size_t>(h.numel() * h.element_size()));
    out.push_back(h);
  }
  return out;
}

void clear(const at::Tensor& t) {
  StorageSlot* s = slot_of(t.storage());
  if (!s) return;
  materialize_slot(s);
  if (!s->sharded) return;
  gather_slot(s, "clear_sharding");
  s->sharded.reset();
}

}  // namespace

void bind_spmd(pybind11::module_& m) {
  m.def("_spmd_shard", &shard);
  m.def("_spmd_info", &info);
  m.def("_spmd_host_shards", &host_shards);
  m.def("_spmd_clear", &clear);
  m.def("_spmd_last_program", []() { return pybind11::bytes(eager::last_spmd_program()); });
}

}  // namespace torch_tpu
