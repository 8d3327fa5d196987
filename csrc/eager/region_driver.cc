// The region driver (record/region.h): records a loop body or a branch into
// a closed graph. It is installed for the recording thread only
// (set_thread_driver), so a body recorded while fused eager holds a pending
// graph, or while torch.compile captures one, leaves that graph as it was:
// the loop that uses the region is then recorded there as one op.
//
// Region tensors are placeholders: their storages hold no buffer. While
// recording, every storage the region wrote is marked pending (its value
// lives in the region), so the recorder treats partial writes and reads of
// it as it treats a deferred driver's values; the marks are taken off at
// the end, and the storages are left empty.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <atomic>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/device.h"
#include "aten/storage.h"
#include "eager/region.h"
#include "record/driver.h"
#include "record/region.h"
#include "record/strided.h"

namespace torch_tpu::eager {
namespace {

struct Region {
  explicit Region(int dev) : device(dev), graph(std::make_shared<ir::Graph>()) {}
  int device;
  std::shared_ptr<ir::Graph> graph;
  std::unordered_map<StorageSlot*, ir::Value> values;  // storages with a value in the region
  Driver* outer = nullptr;                             // the thread's driver before this region
};

thread_local std::vector<std::unique_ptr<Region>> t_regions;
std::atomic<SlotFreeHook> g_chained{nullptr};  // the free hook installed before the first region

// A storage freed while regions record: forgotten by this thread's regions
// (a new storage may reuse its address), then the hook that was there
// before (fused eager's) is told, whichever thread freed it.
void on_free(StorageSlot* s) {
  for (auto& r : t_regions) r->values.erase(s);
  if (SlotFreeHook h = g_chained.load(std::memory_order_acquire)) h(s);
}

// After `r` has left t_regions.
void leave(Region& r) {
  for (auto& [s, v] : r.values) s->pending.release(PendingWrite::kRegion);  // placeholders and temporaries stay empty
  if (t_regions.empty() && slot_free_hook() == &on_free) set_slot_free_hook(g_chained.exchange(nullptr));
  set_thread_driver(r.outer);
}

class RegionDriver final : public Driver {
 public:
  const char* name() const override { return "region"; }

  void dispatch(OpCall& call, const Lowering& lower) override {
    Region& r = *t_regions.back();
    TORCH_CHECK(call.device() == r.device, "a loop body or branch mixes tpu:", r.device, " and tpu:", call.device());
    const size_t n = call.num_slots();
    std::vector<ir::Value> storage(n);
    for (size_t i = 0; i < n; ++i) {
      StorageSlot* s = call.slot(i);
      if (auto it = r.values.find(s); it != r.values.end()) {
        storage[i] = it->second;
      } else {
        TORCH_CHECK_NOT_IMPLEMENTED(!call.needs_value(i), "a loop body or branch read a tensor that is not among ",
                                    "its inputs (", call.name(), "); pass it as an input");
        // Writing a tensor from outside would change it only inside the loop.
        TORCH_CHECK_NOT_IMPLEMENTED(!call.writes(i) || !(s->buffer || s->pending || s->sharded),
                                    "a loop body or branch wrote a tensor that is not its own (", call.name(),
                                    "); return the new value instead");
      }
    }
    ir::Builder b(*r.graph);
    std::vector<ir::Value> scalars;
    std::vector<ir::ElemType> elems = call.scalar_elems();
    std::vector<OpCall::ScalarSource> srcs = call.scalar_sources();
    for (size_t k = 0; k < srcs.size(); ++k) {
      // Numbers are constants of the region (its fingerprint keys them);
      // random ops would draw the same numbers on every iteration.
      TORCH_CHECK_NOT_IMPLEMENTED(
          srcs[k].kind != OpCall::ScalarSource::kRngSeed && srcs[k].kind != OpCall::ScalarSource::kRngOffset,
          "random ops inside a loop body or branch are not supported (", call.name(), ")");
      scalars.push_back(b.constant_bits(call.scalar_bits_at(k), elems[k]));
    }
    std::vector<std::pair<ir::ElemType, int64_t>> after(n);
    for (size_t i = 0; i < n; ++i)
      if (call.writes(i)) after[i] = call.result_elem(i);
    std::vector<ir::Value> written = call.assemble(b, storage, scalars, lower);
    size_t wi = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!call.writes(i)) continue;
      StorageSlot* s = call.slot(i);
      r.values[s] = written[wi++];
      s->pending.take(PendingWrite::kRegion);
      s->elem = after[i].first;
      s->numel = after[i].second;
    }
  }

  void sync_point(SyncReason why, std::string_view op) override {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "a loop body or branch cannot ", to_string(why),
                                op.empty() ? "" : " (" + std::string(op) + ")",
                                ": its values exist only inside the compiled loop");
  }
  void before_host_read(StorageSlot*) override { sync_point(SyncReason::kHostRead, "a host read"); }

  static RegionDriver& get() {
    static auto* d = new RegionDriver();
    return *d;
  }
};

}  // namespace

void begin_region(const std::vector<at::Tensor>& params) {
  int device = 0;
  for (const at::Tensor& t : params) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1 && t.is_contiguous() && t.storage_offset() == 0,
                "begin_region: parameters must be contiguous tpu tensors of their own");
    device = std::max<int>(t.device().index(), 0);
  }
  auto r = std::make_unique<Region>(device);
  for (const at::Tensor& t : params) {
    StorageSlot* s = slot_of(t.storage());
    TORCH_CHECK(!s->buffer && !s->pending, "begin_region: a parameter must be a fresh tensor");
    const ir::ElemType e = to_elem(t.scalar_type());
    s->pending.take(PendingWrite::kRegion);
    s->elem = e;
    s->numel = t.numel();
    // The parameter has the tensor's shape; the storage's value is flat.
    const ir::Value v = r->graph->param(ir::TensorType{e, ir::Dims(t.sizes().begin(), t.sizes().end())});
    ir::Builder b(*r->graph);
    r->values[s] = b.reshape(v, {t.numel()});
  }
  // Nested in another region: that one is this thread's driver again after.
  r->outer = t_regions.empty() ? nullptr : &RegionDriver::get();
  if (slot_free_hook() != &on_free) {
    g_chained.store(slot_free_hook(), std::memory_order_release);
    set_slot_free_hook(&on_free);
  }
  t_regions.push_back(std::move(r));
  set_thread_driver(&RegionDriver::get());
}

std::shared_ptr<RegionGraph> end_region(const std::vector<at::Tensor>& results) {
  TORCH_CHECK(!t_regions.empty(), "end_region without begin_region");
  std::unique_ptr<Region> r = std::move(t_regions.back());
  t_regions.pop_back();
  struct Leave {
    Region& r;
    ~Leave() { leave(r); }
  } done{*r};
  ir::Builder b(*r->graph);
  std::vector<ir::Value> outs;
  for (const at::Tensor& t : results) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "a loop body or branch returned a tensor on ",
                t.device(), "; its results must be tpu tensors");
    StorageSlot* s = slot_of(t.storage());
    auto it = r->values.find(s);
    if (it == r->values.end()) {
      // Never written: empty (zero elements), or torch.empty's storage,
      // which the recorder reads as zeros everywhere.
      TORCH_CHECK_NOT_IMPLEMENTED(!s->buffer && !s->pending && !s->sharded,
                                  "a loop body or branch returned a tensor that is not among its inputs; pass it ",
                                  "as an input");
      outs.push_back(b.constant(0, to_elem(t.scalar_type()), ir::Dims(t.sizes().begin(), t.sizes().end())));
      continue;
    }
    outs.push_back(read_view(b, it->second, view_of(t)));
  }
  r->graph->set_outputs(outs);
  auto g = std::make_shared<RegionGraph>();
  g->graph = r->graph;
  g->device = r->device;
  return g;
}

void abort_region() {
  if (t_regions.empty()) return;
  std::unique_ptr<Region> r = std::move(t_regions.back());
  t_regions.pop_back();
  leave(*r);
}

bool recording_region() { return !t_regions.empty(); }

}  // namespace torch_tpu::eager
