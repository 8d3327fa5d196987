#include "aten/storage.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include "aten/device.h"

namespace torch_tpu {
namespace {

std::atomic<SlotFreeHook> g_free_hook{nullptr};
struct PendingHooks {
  std::atomic<SlotFreeHook> on_free{nullptr};
  std::atomic<SlotMaterializeHook> on_materialize{nullptr};
};
PendingHooks g_pending_hooks[PendingWrite::kHolders];

const char* holder_name(PendingWrite::Holder h) {
  switch (h) {
    case PendingWrite::kQueue:
      return "the compile-ahead queue";
    case PendingWrite::kGraph:
      return "a recorded graph";
    case PendingWrite::kRegion:
      return "a loop body being recorded";
    default:
      return "nothing";
  }
}

void delete_slot(void* p) {
  auto* s = static_cast<StorageSlot*>(p);
  // Installed only while a deferred driver runs; it may name this slot.
  auto free_hook = g_free_hook.load(std::memory_order_acquire);
  if (s->pending) {
    PendingHooks& hooks = g_pending_hooks[s->pending.holder()];
    // A captured tpu graph may adopt the slot's value (fused_driver.cc), so
    // a value still queued is run first; otherwise the queue forgets it.
    if (free_hook && s->pending.holder() == PendingWrite::kQueue)
      if (auto h = hooks.on_materialize.load(std::memory_order_acquire)) h(s);
    if (auto h = hooks.on_free.load(std::memory_order_acquire)) h(s);
  }
  if (free_hook) free_hook(s);
  auto& st = memory_stats(s->device);
  st.allocated -= static_cast<int64_t>(s->nbytes);
  st.freed_total += static_cast<int64_t>(s->nbytes);
  --st.count;
  ++st.count_freed;
  delete s;
}

void raise_peak(std::atomic<int64_t>& peak, int64_t now) {
  int64_t p = peak.load();
  while (now > p && !peak.compare_exchange_weak(p, now)) {
  }
}

void fill(c10::CachingAllocator::Stat& s, int64_t current, int64_t peak, int64_t allocated, int64_t freed) {
  s.current = current;
  s.peak = peak;
  s.allocated = allocated;
  s.freed = freed;
}

// A DeviceAllocator, so torch.accelerator's memory API (and FSDP's stream
// bookkeeping) works on tpu. Storages are slots whose PJRT buffers the
// runtime allocates when a program writes them; nothing is cached, so
// reserved equals allocated and empty_cache has nothing to release.
class TpuAllocator final : public c10::DeviceAllocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex idx = current_device_index();
    auto* s = new StorageSlot();
    s->nbytes = nbytes;
    s->device = idx;
    auto& st = memory_stats(idx);
    raise_peak(st.peak, st.allocated += static_cast<int64_t>(nbytes));
    st.allocated_total += static_cast<int64_t>(nbytes);
    raise_peak(st.count_peak, ++st.count);
    ++st.count_total;
    return c10::DataPtr(s, s, &delete_slot, c10::Device(c10::DeviceType::PrivateUse1, idx));
  }
  bool initialized() override { return runtime_initialized(); }
  void emptyCache(c10::MempoolId_t) override {}
  // Device work runs in order and PJRT keeps a buffer alive while queued
  // work uses it, so no stream bookkeeping is needed.
  void recordStream(const c10::DataPtr&, c10::Stream) override {}
  c10::CachingDeviceAllocator::DeviceStats getDeviceStats(c10::DeviceIndex device) override {
    const MemoryStats& m = memory_stats(device);
    c10::CachingDeviceAllocator::DeviceStats d;
    const auto all = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
    for (auto* a : {&d.allocation, &d.segment, &d.active})
      fill((*a)[all], m.count, m.count_peak, m.count_total, m.count_freed);
    for (auto* a : {&d.allocated_bytes, &d.reserved_bytes, &d.active_bytes, &d.requested_bytes})
      fill((*a)[all], m.allocated, m.peak, m.allocated_total, m.freed_total);
    d.num_ooms = m.num_ooms;
    d.num_device_alloc = m.count_total;
    d.num_device_free = m.count_freed;
    return d;
  }
  void resetAccumulatedStats(c10::DeviceIndex device) override {
    MemoryStats& m = memory_stats(device);
    m.allocated_total = 0;
    m.freed_total = 0;
    m.count_total = 0;
    m.count_freed = 0;
    m.num_ooms = 0;
  }
  void resetPeakStats(c10::DeviceIndex device) override {
    MemoryStats& m = memory_stats(device);
    m.peak = m.allocated.load();
    m.count_peak = m.count.load();
  }
  std::pair<size_t, size_t> getMemoryInfo(c10::DeviceIndex device) override { return device_memory_info(device); }
  c10::DeleterFnPtr raw_deleter() const override { return &delete_slot; }
  // Storage-to-storage copies of tpu memory happen through programs
  // (copy_/clone), never through raw memcpy.
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    auto* d = static_cast<StorageSlot*>(dest);
    auto* s = static_cast<const StorageSlot*>(src);
    TORCH_CHECK(count == s->nbytes && count == d->nbytes, "tpu: partial raw storage copies are not supported");
    materialize_slot(const_cast<StorageSlot*>(s));
    materialize_slot(d);
    d->buffer = s->buffer;  // buffers are immutable: sharing is a copy
    d->sharded = s->sharded;
    d->elem = s->elem;
    d->numel = s->numel;
  }
};

TpuAllocator g_allocator;
thread_local c10::DeviceIndex g_current = 0;

}  // namespace

c10::DeviceIndex current_device_index() { return g_current; }
void set_current_device_index(c10::DeviceIndex i) { g_current = i; }

MemoryStats& memory_stats(int device) {
  static MemoryStats per_device[64];
  if (device < 0) device = current_device_index();
  return per_device[device < 64 ? device : 63];
}

void set_slot_free_hook(SlotFreeHook h) { g_free_hook.store(h, std::memory_order_release); }
SlotFreeHook slot_free_hook() { return g_free_hook.load(std::memory_order_acquire); }
void set_pending_hooks(PendingWrite::Holder h, SlotFreeHook on_free, SlotMaterializeHook on_materialize) {
  g_pending_hooks[h].on_free.store(on_free, std::memory_order_release);
  g_pending_hooks[h].on_materialize.store(on_materialize, std::memory_order_release);
}
void materialize_slot(StorageSlot* s) {
  if (!s->pending) return;
  if (auto h = g_pending_hooks[s->pending.holder()].on_materialize.load(std::memory_order_acquire)) h(s);
}

void PendingWrite::take(Holder h) {
  TORCH_INTERNAL_ASSERT(holder_ == kNone || holder_ == h, "a storage's pending write is held by ", holder_name(holder_),
                        ", so ", holder_name(h), " cannot take it");
  holder_ = h;
}

StorageSlot* slot_of(const c10::Storage& s) {
  const c10::DataPtr& d = s.data_ptr();
  // Memory that torch_tpu did not allocate (a DLPack capsule, from_blob) is
  // not a slot: reading it as one would crash.
  TORCH_CHECK(d.get_deleter() == &delete_slot || d.get_context() == nullptr,
              "tpu: this tensor's memory was not allocated by torch_tpu (it came from DLPack or from_blob); "
              "tpu tensors can only be made by tpu ops or by copying, e.g. cpu_tensor.to(\"tpu\")");
  return static_cast<StorageSlot*>(d.get_context());
}

c10::Allocator* tpu_allocator() { return &g_allocator; }

REGISTER_ALLOCATOR(c10::DeviceType::PrivateUse1, &g_allocator);

}  // namespace torch_tpu
