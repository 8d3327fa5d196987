// Device guard and hooks for PrivateUse1 ("tpu"). The autograd engine,
// torch.accelerator, DDP and FSDP all reach the device through these.
#include <ATen/core/CachingHostAllocator.h>
#include <ATen/detail/PrivateUse1HooksInterface.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/CPUAllocator.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <cstring>

#include "aten/device.h"
#include "aten/generator.h"
#include "aten/pinned_host.h"
#include "aten/storage.h"
#include "eager/capture.h"
#include "record/op_call.h"
#include "record/work_mark.h"

namespace torch_tpu {
namespace {

std::atomic<c10::StreamId> g_next_stream{0};
c10::StreamId& current_stream_id(c10::Device d) {
  thread_local c10::StreamId current[64] = {};
  return current[d.index() < 0 ? current_device_index() : d.index()];
}
c10::Stream stream_on(c10::Device d, c10::StreamId id) {
  return c10::Stream(c10::Stream::UNSAFE,
                     c10::Device(c10::DeviceType::PrivateUse1, d.index() < 0 ? current_device_index() : d.index()), id);
}

// Every tensor on tpu:N passes a guard for N first, so an index past the
// last device fails here with CUDA's wording rather than deep in the runtime.
void check_ordinal(c10::DeviceIndex i) {
  const int n = device_count();
  TORCH_CHECK(i < n, "tpu error: invalid device ordinal: tpu:", static_cast<int>(i), " was requested, but ", n,
              n == 1 ? " tpu device is" : " tpu devices are", " available (tpu:0",
              n > 1 ? " to tpu:" + std::to_string(n - 1) : std::string(), ")");
}

struct TpuGuardImpl final : public c10::impl::DeviceGuardImplInterface {
  static constexpr c10::DeviceType D = c10::DeviceType::PrivateUse1;
  c10::DeviceType type() const override { return D; }
  c10::Device exchangeDevice(c10::Device d) const override {
    c10::Device old(D, current_device_index());
    if (d.index() >= 0) {
      check_ordinal(d.index());
      set_current_device_index(d.index());
    }
    return old;
  }
  c10::Device getDevice() const override { return c10::Device(D, current_device_index()); }
  void setDevice(c10::Device d) const override {
    TORCH_CHECK(d.type() == D, "expected a tpu device, got ", d);
    if (d.index() >= 0) {
      check_ordinal(d.index());
      set_current_device_index(d.index());
    }
  }
  void uncheckedSetDevice(c10::Device d) const noexcept override {
    if (d.index() >= 0) set_current_device_index(d.index());
  }
  // Streams are ids with a per-thread current one per device; see
  // record/work_mark.h for why they need no queue of their own.
  c10::Stream getStream(c10::Device d) const override { return stream_on(d, current_stream_id(d)); }
  c10::Stream getDefaultStream(c10::Device d) const override { return c10::Stream(c10::Stream::DEFAULT, d); }
  c10::Stream getNewStream(c10::Device d, int) const override { return stream_on(d, ++g_next_stream); }
  c10::Stream getStreamFromGlobalPool(c10::Device d, bool) const override { return getNewStream(d, 0); }
  c10::Stream exchangeStream(c10::Stream s) const override {
    c10::Stream old = getStream(s.device());
    current_stream_id(s.device()) = s.id();
    return old;
  }
  c10::DeviceIndex deviceCount() const noexcept override { return static_cast<c10::DeviceIndex>(device_count()); }
  // An event is a record::WorkMark: the work enqueued before it, with its
  // completion time. A stream waiting on one needs no action (PJRT orders
  // device work by its buffer dependencies).
  void record(void** event, const c10::Stream&, const c10::DeviceIndex, const c10::EventFlag) const override {
    if (*event == nullptr) *event = new record::WorkMark();
    static_cast<record::WorkMark*>(*event)->record();
  }
  void block(void*, const c10::Stream&) const override {}
  bool queryEvent(void* e) const override { return e == nullptr || static_cast<record::WorkMark*>(e)->query(); }
  void destroyEvent(void* e, const c10::DeviceIndex) const noexcept override {
    delete static_cast<record::WorkMark*>(e);
  }
  void synchronizeEvent(void* e) const override {
    if (e) static_cast<record::WorkMark*>(e)->synchronize();
  }
  double elapsedTime(void* start, void* end, const c10::DeviceIndex) const override {
    TORCH_CHECK(start && end, "elapsed_time: both events must be recorded before measuring");
    return static_cast<record::WorkMark*>(start)->elapsed_ms(*static_cast<record::WorkMark*>(end));
  }
  bool queryStream(const c10::Stream&) const override {
    record::WorkMark m;
    m.record();
    return m.query();
  }
  void synchronizeStream(const c10::Stream&) const override { record::synchronize(); }
  void synchronizeDevice(const c10::DeviceIndex) const override { record::synchronize(); }
  void recordDataPtrOnStream(const c10::DataPtr&, const c10::Stream&) const override {}
  // A graph capture records every thread's tpu work, so every stream is capturing.
  bool isStreamCapturing(const c10::Stream&) const override { return eager::graph_capturing(); }
};

C10_REGISTER_GUARD_IMPL(PrivateUse1, TpuGuardImpl);

struct TpuHooks final : public at::PrivateUse1HooksInterface {
  bool isBuilt() const override { return true; }
  bool isAvailable() const override { return device_count() > 0; }
  const at::Generator& getDefaultGenerator(c10::DeviceIndex idx) const override { return default_generator(idx); }
  at::Generator getNewGenerator(c10::DeviceIndex idx) const override {
    return at::make_generator<TpuGeneratorImpl>(idx < 0 ? 0 : idx);
  }
  at::Device getDeviceFromPtr(void*) const override {
    return at::Device(c10::DeviceType::PrivateUse1, current_device_index());
  }
  bool isPinnedPtr(const void* p) const override { return is_pinned_host_ptr(p); }
  at::Allocator* getPinnedMemoryAllocator() const override { return pinned_host_allocator(); }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return runtime_initialized(); }
  c10::DeviceIndex deviceCount() const override { return static_cast<c10::DeviceIndex>(device_count()); }
  void setCurrentDevice(c10::DeviceIndex d) const override {
    if (d >= 0) check_ordinal(d);
    set_current_device_index(d);
  }
  c10::DeviceIndex getCurrentDevice() const override { return current_device_index(); }
  c10::DeviceIndex exchangeDevice(c10::DeviceIndex d) const override {
    if (d >= 0) check_ordinal(d);
    auto old = current_device_index();
    set_current_device_index(d);
    return old;
  }
  c10::DeviceIndex maybeExchangeDevice(c10::DeviceIndex d) const override { return exchangeDevice(d); }
  void resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const override;
};

void TpuHooks::resizePrivateUse1Bytes(const c10::Storage& storage, size_t newsize) const {
  // New slot; the old contents are kept by reading them into the new size.
  // On the storage's own device, not the current one: torch.arange(...,
  // device="tpu:1") resizes an empty tensor while tpu:0 is current.
  c10::DataPtr fresh;
  {
    c10::DeviceGuard on(storage.device());
    fresh = tpu_allocator()->allocate(newsize);
  }
  StorageSlot* old_slot = slot_of(storage);
  StorageSlot* new_slot = static_cast<StorageSlot*>(fresh.get_context());
  materialize_slot(old_slot);
  gather_slot(old_slot, "resize_");
  if (old_slot->buffer && old_slot->nbytes > 0 && newsize > 0) {
    ir::ElemType e = old_slot->elem;
    int64_t keep = std::min<int64_t>(old_slot->numel, static_cast<int64_t>(newsize) / ir::byte_size(e));
    int64_t new_numel = static_cast<int64_t>(newsize) / ir::byte_size(e);
    ir::Graph g;
    ir::Builder b(g);
    ir::Value p = g.param(ir::TensorType{e, {old_slot->numel}});
    ir::Value kept = b.slice(p, {0}, {keep}, {1});
    g.set_outputs({b.pad(kept, b.constant(0, e), {0}, {new_numel - keep}, {0})});
    auto exe = client().compile(g.to_mlir(), runtime::CompileOptions{});
    new_slot->buffer = exe->execute({old_slot->buffer->get()}, pjrt_device(old_slot->device))[0];
    new_slot->elem = e;
    new_slot->numel = new_numel;
  }
  const_cast<c10::Storage&>(storage).set_data_ptr_noswap(std::move(fresh));
  const_cast<c10::Storage&>(storage).set_nbytes(newsize);
}

// "Pinned" host memory for tpu is ordinary host memory: PJRT copies from any
// host buffer. torch.accelerator.empty_host_cache() and host-memory stats
// reach the device's host allocator, which must exist (a null one crashes).
struct TpuHostAllocator final : public at::HostAllocator {
  at::DataPtr allocate(size_t n) override { return c10::GetCPUAllocator()->allocate(n); }
  void copy_data(void* dst, const void* src, std::size_t n) const override { std::memcpy(dst, src, n); }
  bool record_event(void*, void*, c10::Stream) override { return true; }
  void empty_cache() override {}
  at::HostStats get_stats() override { return {}; }
  void reset_accumulated_stats() override {}
  void reset_peak_stats() override {}
};
TpuHostAllocator g_host_allocator;
REGISTER_HOST_ALLOCATOR(at::kPrivateUse1, &g_host_allocator)

// Registered at load time, before any tpu tensor exists.
const bool g_hooks_registered = [] {
  at::RegisterPrivateUse1HooksInterface(new TpuHooks());
  return true;
}();

}  // namespace
}  // namespace torch_tpu
