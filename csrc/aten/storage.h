// Tensor storage on tpu. PJRT buffers are immutable values; a torch storage
// is mutable. A StorageSlot holds the storage's *current* buffer (flat,
// rank-1). Writes build a new buffer and swap it in. The DataPtr of every
// tpu storage points at its slot, an opaque handle never dereferenced on
// the host. A slot starts empty (no buffer): reading it yields zeros,
// so torch.empty never transfers anything.
#pragma once
#include <c10/core/Allocator.h>
#include <c10/core/Storage.h>

#include <atomic>
#include <memory>
#include <vector>

#include "ir/types.h"
#include "runtime/buffer.h"
#include "runtime/sharding.h"

namespace torch_tpu {

// A value spread over the devices of a mesh (torch_tpu.spmd): one buffer
// per partition of the SPMD programs that read and write it. `dims` is the
// shape the sharding applies to: the tensor's shape when it was sharded, or
// the flat storage for a result XLA laid out itself.
struct ShardedValue {
  std::vector<int> devices;  // the tpu device index of each partition
  std::vector<int64_t> dims;
  runtime::Sharding sharding;
  std::vector<runtime::BufferPtr> shards;  // per partition
};
using ShardedPtr = std::shared_ptr<const ShardedValue>;

// Which part of the runtime holds a storage's recorded, not yet run write:
// strict eager's compile-ahead queue, a recorded graph (fused eager, a
// torch.compile capture, torch.tpu.graph), or a loop body being recorded.
// One holder at a time; only the holder sets and clears it, and
// materialize_slot() asks the holder to run it.
class PendingWrite {
 public:
  enum Holder : uint8_t { kNone, kQueue, kGraph, kRegion, kHolders };
  explicit operator bool() const { return holder_ != kNone; }
  Holder holder() const { return holder_; }
  // `h` holds the write from now on. A write held by another holder must be
  // released by it first (a graph that supersedes a queued value asks the
  // queue to forget it).
  void take(Holder h);
  // The write is no longer pending; a no-op unless `h` holds it.
  void release(Holder h) {
    if (holder_ == h) holder_ = kNone;
  }

 private:
  Holder holder_ = kNone;
};

struct StorageSlot {
  size_t nbytes = 0;
  int device = 0;
  runtime::BufferPtr buffer;              // null until first write
  ir::ElemType elem = ir::ElemType::kU8;  // element type of `buffer`
  int64_t numel = 0;                      // elements in `buffer`
  // A write recorded but not yet run, and who holds it: `elem`/`numel`
  // already describe the pending value, `buffer` is the old one (or null).
  PendingWrite pending;
  // Set while the value lives on a mesh. `buffer`, when also set, holds the
  // same value whole on `device` (gathered for an op that runs unsharded).
  // A sharding sticks to the storage until clear_sharding: a write of the
  // whole value (set_buffer) keeps the layout but not the shards, which
  // are made again from `buffer` when an SPMD program next reads it
  // (reshard_slot). An SPMD program's write sets the shards and clears
  // `buffer`.
  ShardedPtr sharded;
  void set_buffer(runtime::BufferPtr b) {
    buffer = std::move(b);
    if (sharded && !sharded->shards.empty()) sharded = layout_only(sharded);
  }
  static ShardedPtr layout_only(const ShardedPtr& v);
};

// Makes a sharded slot's shards current (they are stale after a whole
// write: see StorageSlot::sharded). Drops the sharding when the value no
// longer fits its layout (a different size).
void reshard_slot(StorageSlot* s);

// Makes `s->buffer` hold the whole value of a sharded slot: a replicated
// value's shard on the slot's device, else the shards assembled on the
// host and copied in (a one-time warning names the cost). No-op otherwise.
void gather_slot(StorageSlot* s, const char* why);
// The whole array of a sharded value, row-major, on the host.
std::vector<uint8_t> assemble_sharded(const ShardedValue& v, ir::ElemType elem);
// The whole array at `src` (row-major, `layout.dims`), spread as `layout` is.
ShardedPtr scatter_host(const ShardedValue& layout, const void* src, ir::ElemType elem);

// Called just before any slot is freed while set (by a deferred driver,
// which must forget the slots its recorded graph names, pending or read).
using SlotFreeHook = void (*)(StorageSlot*);
void set_slot_free_hook(SlotFreeHook h);
SlotFreeHook slot_free_hook();
// What the holder of pending writes does when a slot it holds is freed
// (`on_free`, before the free hook above) or must be made current
// (`on_materialize`). One pair per holder; null: nothing to do.
using SlotMaterializeHook = void (*)(StorageSlot*);
void set_pending_hooks(PendingWrite::Holder h, SlotFreeHook on_free, SlotMaterializeHook on_materialize);
// Makes `s->buffer` current (a no-op unless `s->pending`).
void materialize_slot(StorageSlot* s);

StorageSlot* slot_of(const c10::Storage& s);

// The c10 allocator registered for PrivateUse1.
c10::Allocator* tpu_allocator();

// Per device. Bytes are storages' logical sizes; PJRT allocates and frees
// the buffers behind them (there is no cache of free blocks to report).
struct MemoryStats {
  std::atomic<int64_t> allocated{0};  // bytes held by live storages
  std::atomic<int64_t> peak{0};
  std::atomic<int64_t> allocated_total{0};  // bytes ever allocated / freed (since reset)
  std::atomic<int64_t> freed_total{0};
  std::atomic<int64_t> count{0};  // live storages
  std::atomic<int64_t> count_peak{0};
  std::atomic<int64_t> count_total{0};
  std::atomic<int64_t> count_freed{0};
  std::atomic<int64_t> num_ooms{0};
};
MemoryStats& memory_stats(int device = -1);  // -1: the current device

// The calling thread's current tpu device (set through the device guard).
c10::DeviceIndex current_device_index();
void set_current_device_index(c10::DeviceIndex i);

}  // namespace torch_tpu
