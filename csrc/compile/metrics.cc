#include "compile/metrics.h"

namespace torch_tpu {

Metrics& metrics() {
  static Metrics* m = new Metrics();  // never destroyed: read at exit
  return *m;
}

void Metrics::reset() {
  for (auto* c : {&ops_dispatched,
                  &compiles,
                  &compile_ns,
                  &cache_hits,
                  &cache_misses,
                  &executions,
                  &h2d_count,
                  &h2d_bytes,
                  &d2h_count,
                  &d2h_bytes,
                  &sync_points,
                  &key_checks,
                  &flushes,
                  &fused_ops,
                  &fused_cache_hits,
                  &fused_max_ops,
                  &replays,
                  &donated,
                  &background_compiles,
                  &background_compile_ns,
                  &compiles_ahead,
                  &compile_ahead_drains,
                  &host_fills})
    c->store(0);
  std::lock_guard<std::mutex> lock(mu);
  fallbacks.clear();
  flush_reasons.clear();
  compiles_by_op.clear();
}

void Metrics::note_compile(const std::string& name, int64_t ns) {
  std::lock_guard<std::mutex> lock(mu);
  auto& c = compiles_by_op[name.substr(0, name.find('['))];
  ++c.count;
  c.ns += ns;
}

}  // namespace torch_tpu
