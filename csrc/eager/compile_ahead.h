// Strict eager's compile-ahead queue as a service of the drivers: calls and
// whole graphs whose programs are not in any cache tier wait here while a
// pool thread compiles them, in order, so Python goes on recording. The
// fused and capture drivers queue their graphs behind strict eager's calls,
// and code that reads storages directly drains it first.
#pragma once
#include <atomic>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/storage.h"
#include "record/driver.h"
#include "record/op_call.h"

namespace torch_tpu::record {}  // namespace torch_tpu::record

namespace torch_tpu::eager {

// The recorder's names (OpCall, Driver, StorageSlot, ...) as eager's own.
using namespace torch_tpu::record;

// Runs every call waiting in the compile-ahead queue: for code that reads
// storages directly.
void drain_compile_ahead();
// Runs strict eager's queued calls until the value of `s` is in its buffer;
// the calls after it stay queued.
void run_queued_until(StorageSlot* s);
// Compiles (or loads from the persistent tiers) `text` on the compile pool,
// into the executable cache under `key`; urgent jobs go first.
std::shared_future<ProgramPtr> compile_on_pool(const CacheKey& key, std::string name, std::string text, bool tiered,
                                               bool urgent);
// Calls waiting in that queue now (tests and reports).
int64_t compile_ahead_queued();
// For a deferred driver reading storage `s` while strict eager's queue
// still holds its value: a function that returns that value once the queue
// has run (empty if the queue holds nothing for `s`).
std::function<runtime::BufferPtr()> queued_value(StorageSlot* s);
// A deferred driver writes `s`: the queue's value for it no longer lands there.
void forget_queued(StorageSlot* s);

// A deferred driver's graph whose program is in no cache tier, queued in
// that same queue instead of compiled on the recording thread: Python goes
// on (dynamo traces the next frame, fused eager records the next ops) while
// a pool thread compiles it, and the written storages stay pending until it
// has run.
struct QueuedGraph {
  std::string name;     // for errors and traces ("a fused graph")
  std::string program;  // the program's name in metrics and logs ("fused[12 ops]")
  int device = 0;
  int64_t out_bytes = -1;
  // Per program argument: its buffer, or (null) the queued value `from_queue[k]` returns.
  std::vector<runtime::BufferPtr> bufs;
  std::vector<std::function<runtime::BufferPtr()>> from_queue;
  std::vector<int64_t> keep;  // donatable arguments another holder still needs
  struct Out {
    StorageSlot* slot;
    ir::ElemType elem;
    int64_t numel;
    ir::ElemType elem0;  // what the storage held before (restored if the graph fails)
    int64_t numel0;
  };
  std::vector<Out> outs;  // in result order
  // Called with the results right after the launch (donated handles, metrics).
  std::function<void(const std::vector<runtime::BufferPtr>&)> launched;
};
// Whether graphs may be queued (a compile pool, no launch blocking, key
// checks or program dumps: those need errors and programs at their op).
bool compile_ahead_enabled();
// Queues `g` behind the calls already queued. Its program compiles on the
// pool (`emit` gives the StableHLO, called here and only if no compile of
// `key` is in flight), in queue order. Returns the program's future (a
// capture keeps it).
std::shared_future<ProgramPtr> enqueue_graph(const CacheKey& key, const std::function<std::string()>& emit,
                                             QueuedGraph g);

// The queue itself, for strict eager's dispatch: its lock, and the steps a
// dispatch takes under it. Everything else reaches it through the functions
// above.
class CompileAheadQueue {
 public:
  static CompileAheadQueue& get();
  // Whether calls may wait here: a compile pool, and no launch blocking,
  // key checks or program dumps (those need errors and programs at their op).
  static bool enabled();
  int64_t queued() const { return queued_.load(std::memory_order_acquire); }
  std::recursive_mutex& mutex() { return mu_; }

  // These take the lock themselves.
  void forget_queued(StorageSlot* s);
  std::shared_future<ProgramPtr> enqueue_graph(const CacheKey& key, const std::function<std::string()>& emit,
                                               QueuedGraph g);
  std::function<runtime::BufferPtr()> queued_value(StorageSlot* s);
  // Runs every queued call (a no-op when the queue is empty).
  void drain_all();
  // Runs queued calls in order until the one that writes `s` has run (a
  // host read of `s` needs no later call): the first loss of a training
  // loop reads while its backward and optimizer step still compile.
  void run_until(StorageSlot* s);

  // These need mutex() held. enqueue: queues `call` behind the others, with
  // its program `hit` or one compiling on the pool. pump: runs queued calls
  // in order, all of them (`all`) or while their programs are ready; with
  // `until`, only until that storage's value is in. drain: runs them all.
  // reads_pending: whether `call` reads a value still queued. forget: the
  // caller overwrites `s`, so the queued value no longer lands there.
  void enqueue(OpCall& call, const Lowering& lower, ProgramPtr hit);
  void pump(bool all, StorageSlot* until = nullptr);
  void drain();
  bool reads_pending(const OpCall& call) const;
  void forget(StorageSlot* s);

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

  CompileAheadQueue();
  std::shared_ptr<Cell> mark_pending(StorageSlot* s, ir::ElemType elem, int64_t numel, ir::ElemType run_elem,
                                     int64_t run_numel);
  void launch(Queued& q, const CompiledProgram& prog);
  // A queued call failed (its compile or launch): the calls from it on are
  // dropped, their storages keep the values they held before them.
  void fail();
  static void on_free(StorageSlot* s);
  static void on_materialize(StorageSlot* s);

  std::recursive_mutex mu_;
  std::atomic<int64_t> queued_{0};
  int owner_pid_ = 0;  // the process that queued the calls
  std::deque<Queued> queue_;
  std::unordered_map<StorageSlot*, PendingSlot> pending_;
  std::unordered_map<CacheKey, std::shared_future<ProgramPtr>, CacheKeyHash> inflight_;
};

}  // namespace torch_tpu::eager
