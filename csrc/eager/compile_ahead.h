// Strict eager's compile-ahead queue as a service of the drivers: calls and
// whole graphs whose programs are not in any cache tier wait here while a
// pool thread compiles them, in order, so Python goes on recording. The
// fused and capture drivers queue their graphs behind strict eager's calls,
// and code that reads storages directly drains it first.
#pragma once
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "record/driver.h"

namespace torch_tpu::record {}  // namespace torch_tpu::record

namespace torch_tpu::eager {

// The recorder's names (OpCall, Driver, StorageSlot, ...) as eager's own.
using namespace torch_tpu::record;

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

}  // namespace torch_tpu::eager
