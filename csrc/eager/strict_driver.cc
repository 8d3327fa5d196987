// Strict eager, the default driver: every recorded call runs as its own
// program, asynchronously (the Python thread waits only when a value is
// needed).
//
// Compile-ahead: a call whose program is in no cache tier does not block
// the thread that records it. Its StableHLO is emitted here, compiled on a
// pool thread (compile/compile_pool.h), and the call waits in an ordered
// queue with the storages it writes marked pending. A later call that reads
// a pending storage, or misses too, queues behind it; a call independent of
// the queue runs at once (PJRT buffers are values, so running it before the
// queued calls changes nothing they read). So a model's first step compiles
// its programs on every core at once while Python goes on recording.
//
// The queue runs in order, as far as its programs are ready, on every later
// dispatch, and completely at every sync point (host reads, synchronize),
// mode change, graph replay, and access to a pending storage from outside
// the recorder. Off with TORCH_TPU_COMPILE_THREADS=0, under launch blocking
// (errors must surface at their op), key checks and program dumps.
#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/device.h"
#include "aten/storage.h"
#include "compile/compile_pool.h"
#include "compile/dump.h"
#include "compile/metrics.h"
#include "record/driver.h"
#include "eager/drivers.h"
#include "eager/compile_ahead.h"

namespace torch_tpu::eager {
namespace {

class StrictDriver final : public Driver {
 public:
  static bool ahead_enabled() {
    static const bool pool = CompilePool::get().threads() > 0;
    return pool && !launch_blocking() && !check_keys() && !dumping();
  }

  const char* name() const override { return "strict"; }

  void dispatch(OpCall& call, const Lowering& lower) override {
    // A sharded input runs whole here (SPMD programs come from the fused driver).
    for (size_t i = 0; i < call.num_slots(); ++i) {
      StorageSlot* s = call.slot(i);
      if (s->sharded && !s->buffer && call.needs_value(i)) gather_slot(s, "an eager op");
    }
    if (queued_.load(std::memory_order_acquire) == 0) {
      ProgramPtr prog = call.lookup(lower);
      if (prog) {
        call.execute_and_swap(*prog);
        return;
      }
      if (call.try_host_fill(lower)) return;
      bump(metrics().cache_misses);
      if (!ahead_enabled() || large(call)) {
        call.execute_and_swap(*call.compile(lower));
        return;
      }
      std::lock_guard<std::recursive_mutex> lock(mu_);
      enqueue(call, lower, nullptr);
      pump(false);
      return;
    }
    std::lock_guard<std::recursive_mutex> lock(mu_);
    pump(false);
    ProgramPtr prog = call.lookup(lower);
    if (!prog && call.try_host_fill(lower)) {
      // A fill reads nothing: it lands now, ahead of the queue, which no
      // longer writes the storages it overwrote.
      for (size_t i = 0; i < call.num_slots(); ++i)
        if (call.writes(i)) forget(call.slot(i));
      return;
    }
    if (!prog) bump(metrics().cache_misses);
    if (prog && !reads_pending(call)) {
      // Independent of the queue: run now. A storage it overwrites whole
      // no longer takes the queued value.
      for (size_t i = 0; i < call.num_slots(); ++i)
        if (call.writes(i)) forget(call.slot(i));
      call.execute_and_swap(*prog);
      return;
    }
    if (!prog && (!ahead_enabled() || large(call))) {
      drain();
      call.execute_and_swap(*call.compile(lower));
      return;
    }
    enqueue(call, lower, prog);
    pump(false);
  }

  void sync_point(SyncReason, std::string_view) override { drain_all(); }
  // Only the calls up to the one that writes `s` run; later ones stay queued.
  void before_host_read(StorageSlot* s) override { run_until(s); }
  bool one_program_per_call() const override { return true; }
  // Not drained at a mode change: fused eager reads queued values at its
  // flush (queued_value), so the optimizer step's graph compiles while the
  // queue ahead of it still does.

  void forget_queued(StorageSlot* s) {
    if (queued_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    forget(s);
  }

  std::shared_future<ProgramPtr> enqueue_graph(const CacheKey& key, const std::function<std::string()>& emit,
                                               QueuedGraph g) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    RECORD_FUNCTION("tpu::compile_ahead_enqueue", std::vector<c10::IValue>());
    Queued q;
    q.name = std::move(g.name);
    q.device = g.device;
    q.out_bytes = g.out_bytes;
    if (auto it = inflight_.find(key); it != inflight_.end()) {
      q.prog = it->second;  // the same graph, recorded again before its first compile finished
    } else {
      q.prog = compile_on_pool(key, g.program, emit(), /*tiered=*/false, /*urgent=*/false);
      inflight_.emplace(key, q.prog);
      bump(metrics().compiles_ahead);
    }
    q.bufs = std::move(g.bufs);
    q.fns = std::move(g.from_queue);
    q.cells.assign(q.bufs.size(), nullptr);
    q.keep = std::move(g.keep);
    q.launched = std::move(g.launched);
    for (const QueuedGraph::Out& o : g.outs) q.outs.push_back(mark_pending(o.slot, o.elem, o.numel, o.elem0, o.numel0));
    auto prog = q.prog;
    queue_.push_back(std::move(q));
    queued_.fetch_add(1, std::memory_order_release);
    owner_pid_ = ::getpid();
    pump(false);
    return prog;
  }

  std::function<runtime::BufferPtr()> queued_value(StorageSlot* s) {
    if (queued_.load(std::memory_order_acquire) == 0) return {};
    std::lock_guard<std::recursive_mutex> lock(mu_);
    auto it = pending_.find(s);
    if (it == pending_.end()) return {};
    return [cell = it->second.cell]() {
      TORCH_CHECK(cell->buffer, "tpu: an op this graph reads from failed before it (see the error it raised)");
      return cell->buffer;
    };
  }

  // Runs every queued call (a no-op when the queue is empty).
  void drain_all() {
    if (queued_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (owner_pid_ != ::getpid()) {
      // A forked child: the compiles its queue waits for run in the parent.
      fail();
      return;
    }
    drain();
  }

  // Runs queued calls in order until the one that writes `s` has run (a
  // host read of `s` needs no later call): the first loss of a training
  // loop reads while its backward and optimizer step still compile.
  void run_until(StorageSlot* s) {
    if (queued_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!pending_.count(s)) return;
    if (owner_pid_ != ::getpid()) {
      fail();
      return;
    }
    bump(metrics().compile_ahead_drains);
    pump(true, s);
  }

  int64_t queued() const { return queued_.load(std::memory_order_acquire); }

  static StrictDriver& get() {
    static StrictDriver* d = new StrictDriver();  // never destroyed: slots may be freed at exit
    return *d;
  }

 private:
  // One value a queued call writes into a storage.
  struct Cell {
    runtime::BufferPtr buffer;    // set once the call has run
    StorageSlot* slot = nullptr;  // null once the storage is freed or written again
    ir::ElemType elem;
    int64_t numel = 0;
  };
  struct Queued {
    std::shared_future<ProgramPtr> prog;
    std::string name;
    int device = 0;
    int64_t out_bytes = 0;
    // Arguments in order: a buffer, or the value a call ahead in the queue makes.
    std::vector<runtime::BufferPtr> bufs;
    std::vector<std::shared_ptr<Cell>> cells;
    std::vector<std::shared_ptr<Cell>> outs;  // the written storages' new values, in slot order
    // A deferred driver's graph (enqueue_graph): arguments read from the
    // queue through its own accessors, donation, and what runs after the launch.
    std::vector<std::function<runtime::BufferPtr()>> fns;
    std::vector<int64_t> keep;
    std::function<void(const std::vector<runtime::BufferPtr>&)> launched;
  };
  // A storage whose value is still queued: the cell that will hold it, and
  // the type of the buffer the storage holds now (restored if the queue fails).
  struct PendingSlot {
    std::shared_ptr<Cell> cell;
    ir::ElemType run_elem;
    int64_t run_numel = 0;
  };

  StrictDriver() { set_queue_slot_hooks(&StrictDriver::on_free, &StrictDriver::on_materialize); }

  // A call whose results need a large share of the device's free memory
  // runs at once, so that running out of memory raises at the op itself.
  static bool large(const OpCall& call) {
    const int64_t bytes = call.output_bytes();
    if (bytes < (int64_t{64} << 20)) return false;
    return static_cast<size_t>(bytes) > device_memory_info(call.device()).first / 4;
  }

  bool reads_pending(const OpCall& call) const {
    for (size_t i = 0; i < call.num_slots(); ++i)
      if (call.needs_value(i) && pending_.count(call.slot(i))) return true;
    return false;
  }

  void forget(StorageSlot* s) {
    auto it = pending_.find(s);
    if (it == pending_.end()) return;
    it->second.cell->slot = nullptr;
    s->pending = false;
    pending_.erase(it);
  }

  // Storage `s` takes the value a queued call or graph will write (type
  // elem x numel); if the queue fails it reads as what it held before
  // (run_elem x run_numel).
  std::shared_ptr<Cell> mark_pending(StorageSlot* s, ir::ElemType elem, int64_t numel, ir::ElemType run_elem,
                                     int64_t run_numel) {
    auto cell = std::make_shared<Cell>();
    cell->slot = s;
    cell->elem = elem;
    cell->numel = numel;
    auto [it, fresh] = pending_.try_emplace(s);
    if (fresh) {
      it->second.run_elem = run_elem;
      it->second.run_numel = run_numel;
    } else {
      it->second.cell->slot = nullptr;  // superseded: only the last write lands in the storage
    }
    it->second.cell = cell;
    s->pending = true;
    s->elem = elem;
    s->numel = numel;
    return cell;
  }

  void enqueue(OpCall& call, const Lowering& lower, ProgramPtr hit) {
    RECORD_FUNCTION("tpu::compile_ahead_enqueue", std::vector<c10::IValue>());
    Queued q;
    q.name = std::string(call.name());
    q.device = call.device();
    q.out_bytes = call.output_bytes();
    if (hit) {
      std::promise<ProgramPtr> ready;
      ready.set_value(std::move(hit));
      q.prog = ready.get_future().share();
    } else if (auto it = inflight_.find(call.key()); it != inflight_.end()) {
      q.prog = it->second;  // the same program, already compiling for a call ahead
    } else {
      // Emitted here: kernels' lowerings capture their locals by reference.
      q.prog = compile_on_pool(call.key(), q.name, call.program_text(lower), OpCall::tiered_allowed(), false);
      inflight_.emplace(call.key(), q.prog);
      bump(metrics().compiles_ahead);
    }
    for (size_t i = 0; i < call.num_slots(); ++i) {
      if (!call.needs_value(i)) continue;
      StorageSlot* s = call.slot(i);
      auto it = pending_.find(s);
      if (it != pending_.end()) {
        q.bufs.push_back(nullptr);
        q.cells.push_back(it->second.cell);
      } else {
        q.bufs.push_back(s->buffer);
        q.cells.push_back(nullptr);
      }
    }
    for (auto& b : call.scalar_buffers()) {
      q.bufs.push_back(std::move(b));
      q.cells.push_back(nullptr);
    }
    for (size_t i = 0; i < call.num_slots(); ++i) {
      if (!call.writes(i)) continue;
      StorageSlot* s = call.slot(i);
      auto [elem, numel] = call.result_elem(i);
      q.outs.push_back(mark_pending(s, elem, numel, s->elem, s->numel));
    }
    queue_.push_back(std::move(q));
    queued_.fetch_add(1, std::memory_order_release);
    owner_pid_ = ::getpid();
  }

  // Runs queued calls in order: all of them (`all`), or while their
  // programs are ready; with `until`, only until that storage's value is in.
  void pump(bool all, StorageSlot* until = nullptr) {
    while (!queue_.empty()) {
      if (until && !pending_.count(until)) return;
      Queued& q = queue_.front();
      if (!all && q.prog.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
      try {
        ProgramPtr prog;
        {
          RECORD_FUNCTION("tpu::compile_ahead_wait", std::vector<c10::IValue>());
          prog = q.prog.get();  // a failed compile rethrows here
        }
        launch(q, *prog);
      } catch (...) {
        fail();
        throw;
      }
      queue_.pop_front();
      queued_.fetch_sub(1, std::memory_order_release);
    }
    inflight_.clear();  // every program the queue waited for is in the memory cache now
  }

  void drain() {
    if (queue_.empty()) return;
    bump(metrics().compile_ahead_drains);
    pump(true);
  }

  void launch(Queued& q, const CompiledProgram& prog) {
    std::vector<PJRT_Buffer*> argv;
    argv.reserve(q.bufs.size());
    for (size_t k = 0; k < q.bufs.size(); ++k) {
      if (q.cells[k]) {
        argv.push_back(q.cells[k]->buffer->get());
      } else if (k < q.fns.size() && q.fns[k]) {
        q.bufs[k] = q.fns[k]();  // held until the launch is done
        argv.push_back(q.bufs[k]->get());
      } else {
        argv.push_back(q.bufs[k]->get());
      }
    }
    auto outs = execute_on(*prog.exe, argv, q.device, q.name, q.keep, q.out_bytes);
    bump(metrics().executions);
    if (q.launched) q.launched(outs);
    for (size_t k = 0; k < q.outs.size(); ++k) {
      Cell& c = *q.outs[k];
      c.buffer = outs[k];
      OpCall::track_result(c.buffer, q.name);
      if (!c.slot) continue;
      StorageSlot* s = c.slot;
      s->set_buffer(c.buffer);
      s->pending = false;
      pending_.erase(s);
      c.slot = nullptr;
    }
    // The arguments are held by the launched program now.
    q.bufs.clear();
    q.cells.clear();
    q.fns.clear();
  }

  // A queued call failed (its compile or launch): the calls from it on are
  // dropped, their storages keep the values they held before them.
  void fail() {
    for (auto& [s, p] : pending_) {
      p.cell->slot = nullptr;
      s->pending = false;
      s->elem = p.run_elem;
      s->numel = p.run_numel;
    }
    pending_.clear();
    queued_.fetch_sub(static_cast<int64_t>(queue_.size()), std::memory_order_release);
    queue_.clear();
    inflight_.clear();
  }

  static void on_free(StorageSlot* s) {
    StrictDriver& d = get();
    if (d.queued_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::recursive_mutex> lock(d.mu_);
    d.forget(s);  // the value is dead: the call still runs for the calls that read it
  }
  static void on_materialize(StorageSlot* s) {
    StrictDriver& d = get();
    if (d.queued_.load(std::memory_order_acquire) == 0) return;
    std::lock_guard<std::recursive_mutex> lock(d.mu_);
    if (d.pending_.count(s)) d.drain();
  }

  std::recursive_mutex mu_;
  std::atomic<int64_t> queued_{0};
  int owner_pid_ = 0;  // the process that queued the calls
  std::deque<Queued> queue_;
  std::unordered_map<StorageSlot*, PendingSlot> pending_;
  std::unordered_map<CacheKey, std::shared_future<ProgramPtr>, CacheKeyHash> inflight_;
};

}  // namespace

Driver& strict_driver() { return StrictDriver::get(); }

namespace {
// Strict eager is what runs when no other driver is installed. Only the
// function is registered here: the driver is built on first use, not
// during static initialisation.
const bool kStrictIsDefault = (set_default_driver(&strict_driver), true);
}  // namespace

void drain_compile_ahead() { StrictDriver::get().drain_all(); }

void run_queued_until(StorageSlot* s) { StrictDriver::get().run_until(s); }

std::shared_future<ProgramPtr> compile_on_pool(const CacheKey& key, std::string name, std::string text, bool tiered,
                                               bool urgent) {
  // The thread-local state travels with the job, so that an active
  // torch.profiler records the compile (as the autograd engine's threads do).
  return CompilePool::get().submit(
      [key, name = std::move(name), text = std::move(text), tiered, tls = at::ThreadLocalState()]() mutable {
        at::ThreadLocalStateGuard guard(tls);
        return ExecutableCache::get().compile_and_insert(
            client(), key, name, [&text]() { return std::move(text); }, tiered);
      },
      urgent);
}

int64_t compile_ahead_queued() { return StrictDriver::get().queued(); }

std::function<runtime::BufferPtr()> queued_value(StorageSlot* s) { return StrictDriver::get().queued_value(s); }

void forget_queued(StorageSlot* s) { StrictDriver::get().forget_queued(s); }

bool compile_ahead_enabled() { return StrictDriver::ahead_enabled(); }

std::shared_future<ProgramPtr> enqueue_graph(const CacheKey& key, const std::function<std::string()>& emit,
                                             QueuedGraph g) {
  return StrictDriver::get().enqueue_graph(key, emit, std::move(g));
}

}  // namespace torch_tpu::eager
