// Strict eager, the default driver: every recorded call runs as its own
// program, asynchronously (the Python thread waits only when a value is
// needed).
//
// Compile-ahead (eager/compile_ahead.h, the queue this driver shares with
// the others): a call whose program is in no cache tier does not block the
// thread that records it. Its StableHLO is emitted here, compiled on a pool
// thread (compile/compile_pool.h), and the call waits in an ordered queue
// with the storages it writes marked pending. A later call that reads
// a pending storage, or misses too, queues behind it; a call independent of
// the queue runs at once (PJRT buffers are values, so running it before the
// queued calls changes nothing they read). So a model's first step compiles
// its programs on every core at once while Python goes on recording.
// Off with TORCH_TPU_COMPILE_THREADS=0, under launch blocking (errors must
// surface at their op), key checks and program dumps.
#include <mutex>
#include <string_view>

#include "aten/device.h"
#include "aten/storage.h"
#include "compile/compile_pool.h"
#include "compile/dump.h"
#include "compile/metrics.h"
#include "eager/compile_ahead.h"
#include "eager/drivers.h"
#include "record/driver.h"

namespace torch_tpu::eager {
namespace {

class StrictDriver final : public Driver {
 public:
  const char* name() const override { return "strict"; }

  void dispatch(OpCall& call, const Lowering& lower) override {
    // A sharded input runs whole here (SPMD programs come from the fused driver).
    for (size_t i = 0; i < call.num_slots(); ++i) {
      StorageSlot* s = call.slot(i);
      if (s->sharded && !s->buffer && call.needs_value(i)) gather_slot(s, "an eager op");
    }
    CompileAheadQueue& q = CompileAheadQueue::get();
    if (q.queued() == 0) {
      ProgramPtr prog = call.lookup(lower);
      if (prog) {
        call.execute_and_swap(*prog);
        return;
      }
      if (call.try_host_fill(lower)) return;
      bump(metrics().cache_misses);
      if (!CompileAheadQueue::enabled() || large(call)) {
        call.execute_and_swap(*call.compile(lower));
        return;
      }
      std::lock_guard<std::recursive_mutex> lock(q.mutex());
      q.enqueue(call, lower, nullptr);
      q.pump(false);
      return;
    }
    std::lock_guard<std::recursive_mutex> lock(q.mutex());
    q.pump(false);
    ProgramPtr prog = call.lookup(lower);
    if (!prog && call.try_host_fill(lower)) {
      // A fill reads nothing: it lands now, ahead of the queue, which no
      // longer writes the storages it overwrote.
      for (size_t i = 0; i < call.num_slots(); ++i)
        if (call.writes(i)) q.forget(call.slot(i));
      return;
    }
    if (!prog) bump(metrics().cache_misses);
    if (prog && !q.reads_pending(call)) {
      // Independent of the queue: run now. A storage it overwrites whole
      // no longer takes the queued value.
      for (size_t i = 0; i < call.num_slots(); ++i)
        if (call.writes(i)) q.forget(call.slot(i));
      call.execute_and_swap(*prog);
      return;
    }
    if (!prog && (!CompileAheadQueue::enabled() || large(call))) {
      q.drain();
      call.execute_and_swap(*call.compile(lower));
      return;
    }
    q.enqueue(call, lower, prog);
    q.pump(false);
  }

  void sync_point(SyncReason, std::string_view) override { CompileAheadQueue::get().drain_all(); }
  // Only the calls up to the one that writes `s` run; later ones stay queued.
  void before_host_read(StorageSlot* s) override { CompileAheadQueue::get().run_until(s); }
  bool one_program_per_call() const override { return true; }
  // Not drained at a mode change: fused eager reads queued values at its
  // flush (queued_value), so the optimizer step's graph compiles while the
  // queue ahead of it still does.

  static StrictDriver& get() {
    static StrictDriver* d = new StrictDriver();  // never destroyed, as the queue
    return *d;
  }

 private:
  // A call whose results need a large share of the device's free memory
  // runs at once, so that running out of memory raises at the op itself.
  static bool large(const OpCall& call) {
    const int64_t bytes = call.output_bytes();
    if (bytes < (int64_t{64} << 20)) return false;
    return static_cast<size_t>(bytes) > device_memory_info(call.device()).first / 4;
  }
};

}  // namespace

Driver& strict_driver() { return StrictDriver::get(); }

namespace {
// Strict eager is what runs when no other driver is installed. Only the
// function is registered here: the driver is built on first use, not
// during static initialisation.
const bool kStrictIsDefault = (set_default_driver(&strict_driver), true);
}  // namespace

}  // namespace torch_tpu::eager
