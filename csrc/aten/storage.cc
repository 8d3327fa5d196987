#include "aten/storage.h"

#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/alloc_cpu.h>

#include "aten/device.h"

namespace torch_tpu {
namespace {

std::atomic<SlotFreeHook> g_free_hook{nullptr};
std::atomic<SlotMaterializeHook> g_materialize_hook{nullptr};

void delete_slot(void* p) {
  auto* s = static_cast<StorageSlot*>(p);
  // Installed only while a deferred driver runs; it may name this slot.
  if (auto h = g_free_hook.load(std::memory_order_acquire)) h(s);
  memory_stats().allocated -= static_cast<int64_t>(s->nbytes);
  delete s;
}

class TpuAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t nbytes) override {
    c10::DeviceIndex idx = current_device_index();
    auto* s = new StorageSlot();
    s->nbytes = nbytes;
    s->device = idx;
    auto& st = memory_stats();
    int64_t now = (st.allocated += static_cast<int64_t>(nbytes));
    int64_t peak = st.peak.load();
    while (now > peak && !st.peak.compare_exchange_weak(peak, now)) {
    }
    return c10::DataPtr(s, s, &delete_slot, c10::Device(c10::DeviceType::PrivateUse1, idx));
  }
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
    d->elem = s->elem;
    d->numel = s->numel;
  }
};

TpuAllocator g_allocator;
thread_local c10::DeviceIndex g_current = 0;

}  // namespace

c10::DeviceIndex current_device_index() { return g_current; }
void set_current_device_index(c10::DeviceIndex i) { g_current = i; }

MemoryStats& memory_stats() {
  static MemoryStats s;
  return s;
}

void set_slot_free_hook(SlotFreeHook h) { g_free_hook.store(h, std::memory_order_release); }
void set_slot_materialize_hook(SlotMaterializeHook h) { g_materialize_hook.store(h, std::memory_order_release); }
void materialize_slot(StorageSlot* s) {
  if (!s->pending) return;
  if (auto h = g_materialize_hook.load(std::memory_order_acquire)) h(s);
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
