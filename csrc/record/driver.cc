#include "record/driver.h"

#include <atomic>

#include "compile/metrics.h"

namespace torch_tpu::record {

const char* to_string(SyncReason r) { return r == SyncReason::kHostRead ? "host read" : "data-dependent shape"; }

namespace {
std::atomic<Driver*> g_driver{nullptr};

std::vector<SyncOp>& sync_registry() {
  static std::vector<SyncOp> ops;
  return ops;
}
}  // namespace

Driver& current_driver() {
  Driver* d = g_driver.load(std::memory_order_acquire);
  return d ? *d : strict_driver();
}

Driver* set_current_driver(Driver* d) { return g_driver.exchange(d); }

void sync_point(SyncReason why, std::string_view op) {
  bump(metrics().sync_points);
  current_driver().sync_point(why, op);
}

const std::vector<SyncOp>& sync_ops() { return sync_registry(); }

SyncSite::SyncSite(std::string_view op, SyncReason reason) : op_(op), reason_(reason) {
  sync_registry().push_back({op, reason});
}

}  // namespace torch_tpu::record
