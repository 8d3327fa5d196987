// Sharded storages (torch_tpu.spmd) outside SPMD programs: the whole value,
// assembled from the shards, for host reads and ops that run unsharded.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty_like_native.h>
#include <torch/library.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "aten/device.h"
#include "aten/storage.h"

namespace torch_tpu {
namespace {

// Copies between a shard (row-major, `shard_dims`) and the block of the
// whole array (`dims`) it holds, starting at `start`: into the array, or out
// of it when `into_shard`. A shard of an uneven split is padded by XLA: only
// the part inside the array is copied (the padding stays as it is).
void copy_block(uint8_t* shard, const std::vector<int64_t>& shard_dims, const std::vector<int64_t>& start,
                uint8_t* array, const std::vector<int64_t>& dims, size_t esize, bool into_shard) {
  const size_t rank = dims.size();
  std::vector<int64_t> len(rank);
  for (size_t d = 0; d < rank; ++d) {
    len[d] = std::min(shard_dims[d], dims[d] - start[d]);
    if (len[d] <= 0) return;
  }
  if (rank == 0) {
    into_shard ? std::memcpy(shard, array, esize) : std::memcpy(array, shard, esize);
    return;
  }
  // Row-major strides (in elements) of the array and of the shard.
  std::vector<int64_t> as(rank, 1), ss(rank, 1);
  for (size_t d = rank - 1; d-- > 0;) {
    as[d] = as[d + 1] * dims[d + 1];
    ss[d] = ss[d + 1] * shard_dims[d + 1];
  }
  std::vector<int64_t> i(rank, 0);  // index within the block, last dim copied whole
  const size_t row = static_cast<size_t>(len[rank - 1]) * esize;
  while (true) {
    int64_t a = 0, s = 0;
    for (size_t d = 0; d < rank; ++d) {
      a += (start[d] + i[d]) * as[d];
      s += i[d] * ss[d];
    }
    if (into_shard)
      std::memcpy(shard + s * esize, array + a * esize, row);
    else
      std::memcpy(array + a * esize, shard + s * esize, row);
    size_t d = rank - 1;
    while (d-- > 0) {
      if (++i[d] < len[d]) break;
      i[d] = 0;
    }
    if (d == static_cast<size_t>(-1)) return;
  }
}

// A shard's dims: the array's split evenly, rounded up (XLA pads the last).
std::vector<int64_t> shard_dims(const ShardedValue& v) {
  std::vector<int64_t> sd = v.dims;
  for (size_t d = 0; d < v.sharding.tiles.size() && d < sd.size(); ++d)
    sd[d] = (sd[d] + v.sharding.tiles[d] - 1) / v.sharding.tiles[d];
  return sd;
}

std::vector<int64_t> block_start(const ShardedValue& v, size_t p, const std::vector<int64_t>& shard_dims) {
  std::vector<int64_t> tile = v.sharding.tile_of(static_cast<int64_t>(p), v.dims.size());
  for (size_t d = 0; d < tile.size(); ++d) tile[d] *= shard_dims[d];
  return tile;
}

}  // namespace

std::vector<uint8_t> assemble_sharded(const ShardedValue& v, ir::ElemType elem) {
  const size_t esize = static_cast<size_t>(ir::byte_size(elem));
  int64_t numel = 1;
  for (int64_t d : v.dims) numel *= d;
  std::vector<uint8_t> out(static_cast<size_t>(numel) * esize);
  std::vector<std::vector<int64_t>> seen;  // tiles already placed (replicas hold copies)
  for (size_t p = 0; p < v.shards.size(); ++p) {
    std::vector<int64_t> tile = v.sharding.tile_of(static_cast<int64_t>(p), v.dims.size());
    bool dup = false;
    for (const auto& t : seen) dup = dup || t == tile;
    if (dup) continue;
    seen.push_back(tile);
    const runtime::Buffer& b = *v.shards[p];
    std::vector<int64_t> sd = b.dims();
    TORCH_INTERNAL_ASSERT(sd.size() == v.dims.size(), "tpu: a shard's rank differs from its array's");
    int64_t sn = 1;
    for (int64_t d : sd) sn *= d;
    std::vector<uint8_t> host(static_cast<size_t>(sn) * esize);
    if (!host.empty()) b.to_host(host.data(), host.size());
    copy_block(host.data(), sd, block_start(v, p, sd), out.data(), v.dims, esize, /*into_shard=*/false);
  }
  return out;
}

ShardedPtr scatter_host(const ShardedValue& layout, const void* src, ir::ElemType elem) {
  const size_t esize = static_cast<size_t>(ir::byte_size(elem));
  auto v = std::make_shared<ShardedValue>();
  v->devices = layout.devices;
  v->dims = layout.dims;
  v->sharding = layout.sharding;
  auto* array = static_cast<uint8_t*>(const_cast<void*>(src));  // only read (into_shard)
  for (size_t p = 0; p < layout.devices.size(); ++p) {
    std::vector<int64_t> sd = shard_dims(layout);
    int64_t sn = 1;
    for (int64_t d : sd) sn *= d;
    std::vector<uint8_t> host(static_cast<size_t>(sn) * esize, 0);
    copy_block(host.data(), sd, block_start(layout, p, sd), array, layout.dims, esize, /*into_shard=*/true);
    v->shards.push_back(client().buffer_from_host(host.data(), to_pjrt(elem), sd, layout.devices[p]));
  }
  return v;
}

ShardedPtr StorageSlot::layout_only(const ShardedPtr& v) {
  auto l = std::make_shared<ShardedValue>();
  l->devices = v->devices;
  l->dims = v->dims;
  l->sharding = v->sharding;
  return l;
}

void reshard_slot(StorageSlot* s) {
  if (!s->sharded || !s->sharded->shards.empty()) return;
  int64_t n = 1;
  for (int64_t d : s->sharded->dims) n *= d;
  if (!s->buffer || n != s->numel) {
    s->sharded.reset();
    return;
  }
  std::vector<uint8_t> host(static_cast<size_t>(n) * static_cast<size_t>(ir::byte_size(s->elem)));
  if (!host.empty()) s->buffer->to_host(host.data(), host.size());
  s->sharded = scatter_host(*s->sharded, host.data(), s->elem);
}

void gather_slot(StorageSlot* s, const char* why) {
  if (!s->sharded || s->buffer || s->sharded->shards.empty()) return;
  ShardedPtr v = s->sharded;
  if (!v->sharding.replicated()) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      TORCH_WARN("tpu: a tensor sharded over a mesh was gathered onto tpu:", s->device, " for ", why,
                 ". Ops outside torch.compile(backend=\"tpu\") or EagerMode.DEFER_AND_FUSE run unsharded; the "
                 "tensor keeps its sharding for SPMD programs.");
  }
  std::vector<uint8_t> host = assemble_sharded(*v, s->elem);
  runtime::BufferPtr b = client().buffer_from_host(host.data(), to_pjrt(s->elem), {s->numel}, s->device);
  s->buffer = std::move(b);  // the same value: the sharding stays
}

namespace {

// empty_like (and so zeros_like, ones_like: an optimizer's state) of a
// sharded tensor takes its layout, as JAX's zeros_like of a sharded array
// does under jit: the state is born split like its parameter, and the
// first SPMD program that reads it splits its value the same way.
at::Tensor empty_like_tpu(const at::Tensor& self, std::optional<c10::ScalarType> dtype,
                          std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                          std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> fmt) {
  at::Tensor out = at::native::empty_like(self, dtype, layout, device, pin_memory, fmt);
  if (self.device().type() != c10::DeviceType::PrivateUse1 || out.device() != self.device() ||
      out.scalar_type() != self.scalar_type() || !out.is_contiguous() || !self.is_contiguous() ||
      self.storage_offset() != 0)
    return out;
  StorageSlot* src = slot_of(self.storage());
  StorageSlot* dst = slot_of(out.storage());
  // A storage with no slot (empty, or a tensor of a tracing mode) has no layout.
  if (src && dst && src->sharded && src->nbytes == dst->nbytes) {
    dst->sharded = StorageSlot::layout_only(src->sharded);
    dst->elem = src->elem;
    dst->numel = src->numel;
  }
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("empty_like", empty_like_tpu); }

}  // namespace torch_tpu
