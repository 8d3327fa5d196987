// The compile-ahead queue (eager/compile_ahead.h). Strict eager queues
// calls here whose programs are in no cache tier; the fused and capture
// drivers queue their graphs behind them. The queue runs in order, as far as
// its programs are ready, on every later dispatch, and completely at every
// sync point (host reads, synchronize), mode change, graph replay, and
// access to a pending storage from outside the recorder. It is the one
// owner of a storage's pending state while its value is queued.
#include "eager/compile_ahead.h"

#include <ATen/ThreadLocalState.h>
#include <ATen/record_function.h>
#include <unistd.h>

#include "aten/device.h"
#include "compile/compile_pool.h"
#include "compile/dump.h"
#include "compile/metrics.h"

namespace torch_tpu::eager {

CompileAheadQueue& CompileAheadQueue::get() {
  static CompileAheadQueue* q = new CompileAheadQueue();  // never destroyed: slots may be freed at exit
  return *q;
}

bool CompileAheadQueue::enabled() {
  static const bool pool = CompilePool::get().threads() > 0;
  return pool && !launch_blocking() && !check_keys() && !dumping();
}

CompileAheadQueue::CompileAheadQueue() {
  set_pending_hooks(PendingWrite::kQueue, &CompileAheadQueue::on_free, &CompileAheadQueue::on_materialize);
}

void CompileAheadQueue::forget_queued(StorageSlot* s) {
  if (queued_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::recursive_mutex> lock(mu_);
  forget(s);
}

std::shared_future<ProgramPtr> CompileAheadQueue::enqueue_graph(const CacheKey& key,
                                                                const std::function<std::string()>& emit,
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

std::function<runtime::BufferPtr()> CompileAheadQueue::queued_value(StorageSlot* s) {
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
void CompileAheadQueue::drain_all() {
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
void CompileAheadQueue::run_until(StorageSlot* s) {
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

bool CompileAheadQueue::reads_pending(const OpCall& call) const {
  for (size_t i = 0; i < call.num_slots(); ++i)
    if (call.needs_value(i) && pending_.count(call.slot(i))) return true;
  return false;
}

void CompileAheadQueue::forget(StorageSlot* s) {
  auto it = pending_.find(s);
  if (it == pending_.end()) return;
  it->second.cell->slot = nullptr;
  s->pending.release(PendingWrite::kQueue);
  pending_.erase(it);
}

// Storage `s` takes the value a queued call or graph will write (type
// elem x numel); if the queue fails it reads as what it held before
// (run_elem x run_numel).
std::shared_ptr<CompileAheadQueue::Cell> CompileAheadQueue::mark_pending(StorageSlot* s, ir::ElemType elem,
                                                                         int64_t numel, ir::ElemType run_elem,
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
  s->pending.take(PendingWrite::kQueue);
  s->elem = elem;
  s->numel = numel;
  return cell;
}

void CompileAheadQueue::enqueue(OpCall& call, const Lowering& lower, ProgramPtr hit) {
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
void CompileAheadQueue::pump(bool all, StorageSlot* until) {
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

void CompileAheadQueue::drain() {
  if (queue_.empty()) return;
  bump(metrics().compile_ahead_drains);
  pump(true);
}

void CompileAheadQueue::launch(Queued& q, const CompiledProgram& prog) {
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
    s->pending.release(PendingWrite::kQueue);
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
void CompileAheadQueue::fail() {
  for (auto& [s, p] : pending_) {
    p.cell->slot = nullptr;
    s->pending.release(PendingWrite::kQueue);
    s->elem = p.run_elem;
    s->numel = p.run_numel;
  }
  pending_.clear();
  queued_.fetch_sub(static_cast<int64_t>(queue_.size()), std::memory_order_release);
  queue_.clear();
  inflight_.clear();
}

void CompileAheadQueue::on_free(StorageSlot* s) {
  CompileAheadQueue& d = get();
  if (d.queued_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::recursive_mutex> lock(d.mu_);
  d.forget(s);  // the value is dead: the call still runs for the calls that read it
}
void CompileAheadQueue::on_materialize(StorageSlot* s) {
  CompileAheadQueue& d = get();
  if (d.queued_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::recursive_mutex> lock(d.mu_);
  if (d.pending_.count(s)) d.drain();
}

void drain_compile_ahead() { CompileAheadQueue::get().drain_all(); }

void run_queued_until(StorageSlot* s) { CompileAheadQueue::get().run_until(s); }

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

int64_t compile_ahead_queued() { return CompileAheadQueue::get().queued(); }

std::function<runtime::BufferPtr()> queued_value(StorageSlot* s) { return CompileAheadQueue::get().queued_value(s); }

void forget_queued(StorageSlot* s) { CompileAheadQueue::get().forget_queued(s); }

bool compile_ahead_enabled() { return CompileAheadQueue::enabled(); }

std::shared_future<ProgramPtr> enqueue_graph(const CacheKey& key, const std::function<std::string()>& emit,
                                             QueuedGraph g) {
  return CompileAheadQueue::get().enqueue_graph(key, emit, std::move(g));
}

}  // namespace torch_tpu::eager
