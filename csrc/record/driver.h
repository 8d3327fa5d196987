// What runs a recorded op call. Strict eager (eager/strict_driver.cc, the
// default) runs each call as its own program; the fused-eager and
// torch.compile drivers will record calls into larger graphs. Kernels never
// see which driver is active: they record through OpCall and announce host
// synchronisation points here.
#pragma once
#include <functional>
#include <future>
#include <string>
#include <string_view>
#include <vector>

#include "record/op_call.h"

namespace torch_tpu::record {

// Why a kernel needs device values on the host before it can go on.
enum class SyncReason {
  kHostRead,            // reads a value (equal, is_nonzero, an error check on device results)
  kDataDependentShape,  // its output shape depends on the data (nonzero, unique, masked_select, ...)
  // Not kernels: reasons a deferred driver runs what it holds.
  kSynchronize,  // torch.tpu.synchronize()
  kMarkStep,     // an explicit flush (torch_tpu.mark_step, an optimizer step)
  kSizeLimit,    // the pending graph reached its op limit
  kModeChange,   // the eager mode changed
  kSlotAccess,   // code outside the recorder needs a storage's buffer (resize, raw copy, host write)
};
const char* to_string(SyncReason r);

class Driver {
 public:
  virtual ~Driver() = default;
  virtual const char* name() const = 0;
  // Runs or records one call whose key is final.
  virtual void dispatch(OpCall& call, const Lowering& lower) = 0;
  // A kernel is about to read device values on the host: a deferred driver
  // must materialise what it holds first. Strict eager has nothing pending.
  virtual void sync_point(SyncReason why, std::string_view op) = 0;
  // A host read of storage `s` is about to happen (copy_to_host): its value
  // must be in its buffer when this returns. A deferred driver flushes.
  virtual void before_host_read(StorageSlot* s) {
    (void)s;
    sync_point(SyncReason::kHostRead, "copy_to_host");
  }
  // Whether each call runs as its own program (strict eager). Kernels may
  // then key elementwise work by element count alone; in a recorded graph
  // ops keep their tensors' shapes, which XLA's SPMD partitioner needs.
  virtual bool one_program_per_call() const { return false; }
  // Installed as the current driver / replaced by another one.
  virtual void activate() {}
  virtual void deactivate() {}
};

// The driver calls go to; the strict-eager driver unless one is installed.
Driver& current_driver();
// Installs `d` (nullptr restores strict eager); returns the previous one.
Driver* set_current_driver(Driver* d);
// While set (non-null), this thread's calls go to `d` instead, and the
// installed driver is neither deactivated nor told: how a loop body is
// recorded into a region (record/region.h) in the middle of any mode.
void set_thread_driver(Driver* d);
Driver& strict_driver();
Driver& fused_driver();
// Python's optimizer hooks say when an optimizer.step() is being recorded by
// the fused driver: ops that read no storage (the optimizer's lazily created
// state) then run in strict eager, outside the step's graph.
void set_optimizer_step(bool on);
// While on, the fused driver records Python numbers (and wrapped-number CPU
// scalars) as constants of the program, their values in its key, instead
// of runtime parameters: for torch.compile graphs whose numbers are all
// constants of the graph (each parameter costs every execute). Fused eager
// keeps them as parameters, so that a learning-rate schedule reuses one
// program. Any flush turns it off (numbers recorded after a host read may
// be device values).
void set_bake_numbers(bool on);

// Called before a kernel reads device values on the host.
void sync_point(SyncReason why, std::string_view op);
// Runs every call waiting in strict eager's compile-ahead queue
// (eager/strict_driver.cc): for code that reads storages directly.
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

// A kernel's host synchronisation point, declared once at file scope:
//   const record::SyncSite kNonzeroSync{"nonzero", SyncReason::kDataDependentShape};
// and called where the kernel reads: kNonzeroSync(). Declaring it registers
// the op in sync_ops(), the list a deferred driver (and the docs) read.
class SyncSite {
 public:
  SyncSite(std::string_view op, SyncReason reason);
  void operator()() const { sync_point(reason_, op_); }

 private:
  std::string_view op_;
  SyncReason reason_;
};
struct SyncOp {
  std::string_view op;
  SyncReason reason;
};
const std::vector<SyncOp>& sync_ops();

}  // namespace torch_tpu::record
