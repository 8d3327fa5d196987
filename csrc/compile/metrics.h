// Process-wide counters behind torch_tpu.debug.metrics(). Plain atomics so
// the hot path pays one relaxed increment per event.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace torch_tpu {

struct Metrics {
  std::atomic<int64_t> ops_dispatched{0};
  std::atomic<int64_t> compiles{0};
  std::atomic<int64_t> compile_ns{0};
  std::atomic<int64_t> cache_hits{0};
  std::atomic<int64_t> cache_misses{0};
  std::atomic<int64_t> executions{0};
  std::atomic<int64_t> h2d_count{0};
  std::atomic<int64_t> h2d_bytes{0};
  std::atomic<int64_t> d2h_count{0};
  std::atomic<int64_t> d2h_bytes{0};
  std::atomic<int64_t> sync_points{0};  // kernels that read device values on the host
  std::atomic<int64_t> key_checks{0};   // cache hits rebuilt under TORCH_TPU_CHECK_KEYS
  // Fused eager: graphs run, ops they held, and those served from the cache.
  std::atomic<int64_t> flushes{0};
  std::atomic<int64_t> fused_ops{0};
  std::atomic<int64_t> fused_cache_hits{0};
  std::atomic<int64_t> fused_max_ops{0};
  std::atomic<int64_t> replays{0};  // compiled graphs run from their capture
  std::atomic<int64_t> donated{0};  // buffers consumed in place by a graph's result
  // Tiered compiles: full-option compiles on the background thread, which
  // replace the quick programs the ops ran first.
  std::atomic<int64_t> background_compiles{0};
  std::atomic<int64_t> background_compile_ns{0};
  // Strict eager's compile-ahead: misses compiled on the pool while the
  // recording thread went on, and times the queue had to be run to the end.
  std::atomic<int64_t> compiles_ahead{0};
  std::atomic<int64_t> compile_ahead_drains{0};
  // Whole-storage fills done on the host instead of by a program (OpCall::try_host_fill).
  std::atomic<int64_t> host_fills{0};

  std::mutex mu;
  std::map<std::string, int64_t> fallbacks;      // by op name
  std::map<std::string, int64_t> flush_reasons;  // why fused eager ran its graph
  // Compiles by op (the program's name up to '['), with their time: where
  // a cold start's programs come from.
  struct OpCompiles {
    int64_t count = 0;
    int64_t ns = 0;
  };
  std::map<std::string, OpCompiles> compiles_by_op;
  void note_compile(const std::string& name, int64_t ns);

  void reset();
};

Metrics& metrics();

inline void bump(std::atomic<int64_t>& c, int64_t n = 1) { c.fetch_add(n, std::memory_order_relaxed); }

}  // namespace torch_tpu
