#include "record/driver.h"

#include <c10/util/Exception.h>

#include <atomic>

#include "compile/metrics.h"

namespace torch_tpu::record {

const char* to_string(SyncReason r) {
  switch (r) {
    case SyncReason::kHostRead:
      return "host read";
    case SyncReason::kDataDependentShape:
      return "data-dependent shape";
    case SyncReason::kSynchronize:
      return "synchronize";
    case SyncReason::kMarkStep:
      return "mark_step";
    case SyncReason::kSizeLimit:
      return "size limit";
    case SyncReason::kModeChange:
      return "mode change";
    case SyncReason::kSlotAccess:
      return "storage access";
  }
  return "?";
}

namespace {
std::atomic<Driver*> g_driver{nullptr};

std::vector<SyncOp>& sync_registry() {
  static std::vector<SyncOp> ops;
  return ops;
}
}  // namespace

namespace {
thread_local Driver* t_driver = nullptr;  // set_thread_driver
Driver& (*g_default)() = nullptr;         // set_default_driver

Driver& default_driver() {
  TORCH_CHECK(g_default, "tpu: no default driver is registered (the eager drivers are not linked in)");
  return g_default();
}
}  // namespace

void set_default_driver(Driver& (*get)()) { g_default = get; }

void set_thread_driver(Driver* d) { t_driver = d; }

Driver& current_driver() {
  if (t_driver) return *t_driver;
  Driver* d = g_driver.load(std::memory_order_acquire);
  return d ? *d : default_driver();
}

Driver* set_current_driver(Driver* d) {
  Driver* installed = g_driver.load(std::memory_order_acquire);
  Driver& old = installed ? *installed : default_driver();
  Driver& next = d ? *d : default_driver();
  if (&old == &next) return g_driver.load();
  // The old driver runs what it holds before the new one sees any call.
  old.deactivate();
  next.activate();
  return g_driver.exchange(d);
}

void sync_point(SyncReason why, std::string_view op) {
  bump(metrics().sync_points);
  current_driver().sync_point(why, op);
}

const std::vector<SyncOp>& sync_ops() { return sync_registry(); }

SyncSite::SyncSite(std::string_view op, SyncReason reason) : op_(op), reason_(reason) {
  sync_registry().push_back({op, reason});
}

}  // namespace torch_tpu::record
