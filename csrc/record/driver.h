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
  // Whether a call's lengths may enter as runtime scalars, so that tensors
  // with room to grow (ops/shape/append.h) are read whole: true where each
  // recorded call's numbers reach its program as parameters (strict eager,
  // fused eager), false where a capture bakes them for replay.
  virtual bool runtime_lengths() const { return one_program_per_call(); }
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
// The driver current_driver() falls back to (strict eager, which registers
// itself from the drivers' layer: record does not know the drivers).
void set_default_driver(Driver& (*get)());

// Called before a kernel reads device values on the host.
void sync_point(SyncReason why, std::string_view op);
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
