// Fused eager (EagerMode.DEFER_AND_FUSE): recorded calls are appended to one
// pending graph instead of running. A storage written by a pending call is
// marked `pending`; its value lives in the graph until a flush, which runs
// the whole graph as one program. The flush's outputs are the storages
// written in the graph that are still alive, so intermediates freed before
// the flush (most temporaries of a training step) never leave the program.
//
// The program's key is the sequence of the calls' own keys plus the data
// flow between them (which graph storage each call touched), so a loop that
// records the same calls again reuses the compiled program. The IR is built
// while recording, because kernels' lowerings capture their locals by
// reference; it is emitted as text only on a cache miss.
#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/device.h"
#include "aten/storage.h"
#include "compile/executable_cache.h"
#include "compile/metrics.h"
#include "record/driver.h"

namespace torch_tpu::record {
namespace {

int64_t max_ops_from_env() {
  const char* v = std::getenv("TORCH_TPU_FUSE_MAX_OPS");
  if (!v || !*v) return 4096;
  int64_t n = std::atoll(v);
  return n > 0 ? n : 4096;
}

class FusedDriver final : public Driver {
 public:
  const char* name() const override { return "fused"; }

  void activate() override {
    set_slot_free_hook(&FusedDriver::on_free);
    set_slot_materialize_hook(&FusedDriver::on_materialize);
  }

  void dispatch(OpCall& call, const Lowering& lower) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (p_ && p_->device != call.device()) flush_locked(SyncReason::kMarkStep, "device change");
    if (!p_) p_ = std::make_unique<Pending>(call.device());
    Pending& p = *p_;
    p.key.add(call.key().hi);
    p.key.add(call.key().lo);
    const size_t n = call.num_slots();
    std::vector<ir::Value> storage(n);
    std::vector<int> ids(n);
    for (size_t i = 0; i < n; ++i) {
      StorageSlot* s = call.slot(i);
      auto [it, fresh] = p.ids.try_emplace(s, static_cast<int>(p.slots.size()));
      if (fresh) p.slots.push_back(GraphSlot{s});
      ids[i] = it->second;
      p.key.add(static_cast<uint64_t>(ids[i]));
      GraphSlot& gs = p.slots[ids[i]];
      if (gs.value.valid()) {
        storage[i] = gs.value;
      } else if (call.needs_value(i)) {
        // First use of a storage that holds a run buffer: a parameter.
        TORCH_INTERNAL_ASSERT(s->buffer && !s->pending, "fused eager: storage state out of sync");
        gs.value = p.g.param(ir::TensorType{s->elem, {s->numel}});
        p.args.push_back(s->buffer);
        storage[i] = gs.value;
      }
    }
    std::vector<ir::Value> scalars;
    std::vector<ir::ElemType> elems = call.scalar_elems();
    std::vector<runtime::BufferPtr> bufs = call.scalar_buffers();
    for (size_t k = 0; k < bufs.size(); ++k) {
      scalars.push_back(p.g.param(ir::TensorType{elems[k], {}}));
      p.args.push_back(std::move(bufs[k]));
    }
    // What each written slot holds afterwards, computed before any slot changes.
    std::vector<std::pair<ir::ElemType, int64_t>> after(n);
    for (size_t i = 0; i < n; ++i)
      if (call.writes(i)) after[i] = call.result_elem(i);
    ir::Builder b(p.g);
    std::vector<ir::Value> written = call.assemble(b, storage, scalars, lower);
    size_t wi = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!call.writes(i)) continue;
      GraphSlot& gs = p.slots[ids[i]];
      gs.value = written[wi++];
      gs.written = true;
      StorageSlot* s = call.slot(i);
      s->pending = true;
      s->elem = after[i].first;
      s->numel = after[i].second;
    }
    ++p.ops;
    if (p.ops >= max_ops_) flush_locked(SyncReason::kSizeLimit, "size limit");
  }

  void sync_point(SyncReason why, std::string_view op) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush_locked(why, op);
  }

  void deactivate() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush_locked(SyncReason::kModeChange, "mode change");
    set_slot_free_hook(nullptr);
    set_slot_materialize_hook(nullptr);
  }

  static FusedDriver& get() {
    static FusedDriver* d = new FusedDriver();  // never destroyed: slots may be freed at exit
    return *d;
  }

 private:
  struct GraphSlot {
    StorageSlot* slot;  // null once the storage is freed
    ir::Value value;    // its current value in the graph (invalid: not read or written yet)
    bool written = false;
  };
  struct Pending {
    explicit Pending(int dev) : device(dev) {}
    int device;
    ir::Graph g;
    std::vector<runtime::BufferPtr> args;  // one per graph parameter, in order
    std::unordered_map<StorageSlot*, int> ids;
    std::vector<GraphSlot> slots;
    KeyBuilder key;
    int64_t ops = 0;
  };

  static void on_free(StorageSlot* s) {
    FusedDriver& d = get();
    std::lock_guard<std::recursive_mutex> lock(d.mu_);
    if (!d.p_) return;
    auto it = d.p_->ids.find(s);
    if (it == d.p_->ids.end()) return;
    d.p_->slots[it->second].slot = nullptr;  // dead: not an output
    d.p_->ids.erase(it);
  }
  static void on_materialize(StorageSlot*) { get().sync_point(SyncReason::kSlotAccess, "storage access"); }

  void flush_locked(SyncReason why, std::string_view op) {
    if (!p_ || flushing_) return;
    flushing_ = true;
    std::unique_ptr<Pending> p = std::move(p_);
    struct Reset {
      bool& f;
      ~Reset() { f = false; }
    } reset{flushing_};
    auto& mt = metrics();
    bump(mt.flushes);
    bump(mt.fused_ops, p->ops);
    for (int64_t m = mt.fused_max_ops.load(); p->ops > m && !mt.fused_max_ops.compare_exchange_weak(m, p->ops);) {
    }
    {
      std::lock_guard<std::mutex> l(mt.mu);
      ++mt.flush_reasons[std::string(to_string(why)) + (op.empty() ? "" : ": ") + std::string(op)];
    }
    std::vector<int> outs;
    for (size_t i = 0; i < p->slots.size(); ++i)
      if (p->slots[i].written && p->slots[i].slot) outs.push_back(static_cast<int>(i));
    if (outs.empty()) {
      clear_pending(*p);
      return;
    }
    for (int i : outs) p->key.add(static_cast<uint64_t>(i) | (1ull << 40));
    CacheKey key = p->key.finish();
    try {
      auto& cache = ExecutableCache::get();
      ProgramPtr prog = cache.lookup(key);
      if (prog) {
        bump(mt.cache_hits);
        bump(mt.fused_cache_hits);
      } else {
        bump(mt.cache_misses);
        prog = cache.compile_and_insert(client(), key, "fused[" + std::to_string(p->ops) + " ops]", [&]() {
          std::vector<ir::Value> vals;
          for (int i : outs) vals.push_back(p->slots[i].value);
          p->g.set_outputs(vals);
          return p->g.to_mlir();
        });
      }
      std::vector<PJRT_Buffer*> argv;
      for (auto& a : p->args) argv.push_back(a->get());
      auto results = prog->exe->execute(argv, pjrt_device(p->device));
      bump(mt.executions);
      for (size_t k = 0; k < outs.size(); ++k) {
        StorageSlot* s = p->slots[outs[k]].slot;
        s->buffer = results[k];
        s->pending = false;
        OpCall::track_result(s->buffer, "fused graph");
      }
    } catch (...) {
      // The values the graph would have produced are lost: the storages
      // read as empty again rather than as stale data, and the error
      // propagates to whoever needed them.
      for (int i : outs) {
        StorageSlot* s = p->slots[i].slot;
        if (s && s->pending) {
          s->buffer = nullptr;
          s->pending = false;
        }
      }
      clear_pending(*p);
      throw;
    }
    clear_pending(*p);
  }

  static void clear_pending(Pending& p) {
    for (auto& gs : p.slots)
      if (gs.slot) gs.slot->pending = false;
  }

  std::recursive_mutex mu_;
  std::unique_ptr<Pending> p_;
  bool flushing_ = false;
  const int64_t max_ops_ = max_ops_from_env();
};

}  // namespace

Driver& fused_driver() { return FusedDriver::get(); }

}  // namespace torch_tpu::record
