// torch_tpu._C bindings of the compile layer: compile records, metrics,
// device spans and the compilation cache's tiers.
#include <ATen/ops/empty_like.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/device.h"
#include "aten/fallback.h"
#include "aten/generator.h"
#include "aten/storage.h"
#include "compile/compile_pool.h"
#include "compile/dump.h"
#include "compile/executable_cache.h"
#include "compile/metrics.h"
#include "eager/capture.h"
#include "eager/compile_ahead.h"
#include "hooks/host_alias.h"
#include "ops/dist/collectives.h"
#include "record/driver.h"
#include "runtime/device_spans.h"
#include "runtime/eh_frame_guard.h"
#include "runtime/log.h"
#include "runtime/worker_threads.h"

namespace py = pybind11;

namespace torch_tpu {

namespace {
// One of the metrics' maps keyed by name, copied under their lock.
template <class Map, class Fn>
py::dict by_name(Metrics& mt, const Map& map, Fn value) {
  py::dict out;
  std::lock_guard<std::mutex> lock(mt.mu);
  for (const auto& [k, v] : map) out[py::str(k)] = value(v);
  return out;
}
}  // namespace

void bind_compile(py::module_& m) {
  m.def("_compile_records", []() {
    {
      py::gil_scoped_release nogil;
      eager::drain_compile_ahead();
    }
    py::list out;
    for (const auto& r : compile_records())
      out.append(py::make_tuple(r.name, r.signature, r.body_digest, r.compile_ns / 1e6, r.key, r.tier));
    return out;
  });
  m.def("_clear_compile_records", &clear_compile_records);
  m.def("_metrics", []() {
    {
      // Counts are of finished work: ops still waiting for their compile run first.
      py::gil_scoped_release nogil;
      eager::drain_compile_ahead();
    }
    auto& mt = metrics();
    py::dict d;
    d["ops_dispatched"] = mt.ops_dispatched.load();
    d["compiles"] = mt.compiles.load();
    d["compile_ms"] = mt.compile_ns.load() / 1e6;
    d["cache_hits"] = mt.cache_hits.load();
    d["cache_misses"] = mt.cache_misses.load();
    d["executions"] = mt.executions.load();
    d["h2d_transfers"] = mt.h2d_count.load();
    d["h2d_bytes"] = mt.h2d_bytes.load();
    d["d2h_transfers"] = mt.d2h_count.load();
    d["d2h_bytes"] = mt.d2h_bytes.load();
    d["sync_points"] = mt.sync_points.load();
    d["key_checks"] = mt.key_checks.load();
    d["host_fills"] = mt.host_fills.load();
    d["fallbacks"] = by_name(mt, mt.fallbacks, [](int64_t n) { return py::int_(n); });
    d["flushes"] = mt.flushes.load();
    d["fused_ops"] = mt.fused_ops.load();
    d["fused_cache_hits"] = mt.fused_cache_hits.load();
    d["fused_max_ops"] = mt.fused_max_ops.load();
    d["replays"] = mt.replays.load();
    d["donated_buffers"] = mt.donated.load();
    d["flush_reasons"] = by_name(mt, mt.flush_reasons, [](int64_t n) { return py::int_(n); });
    d["compiles_by_op"] = by_name(mt, mt.compiles_by_op,
                                  [](const Metrics::OpCompiles& c) { return py::make_tuple(c.count, c.ns / 1e6); });
    d["background_compiles"] = mt.background_compiles.load();
    d["compiles_ahead"] = mt.compiles_ahead.load();
    d["compile_ahead_drains"] = mt.compile_ahead_drains.load();
    d["background_compile_ms"] = mt.background_compile_ns.load() / 1e6;
    d["background_pending"] = ExecutableCache::get().background_pending();
    d["cached_executables"] = ExecutableCache::get().size();
    return d;
  });
  // Device execution spans for torch.profiler traces (torch_tpu/_profiler.py).
  m.def("_set_device_spans", [](bool on) { runtime::DeviceSpans::get().set_enabled(on); });
  m.def("_take_device_spans", [](int64_t wait_ms) {
    std::vector<runtime::DeviceSpan> spans;
    {
      py::gil_scoped_release nogil;  // the wait is for plugin threads
      spans = runtime::DeviceSpans::get().take(wait_ms);
    }
    py::list out;
    for (const auto& s : spans) out.append(py::make_tuple(s.name, s.device, s.start_ns, s.end_ns));
    return out;
  });
  m.def("_reset_metrics", []() {
    {
      py::gil_scoped_release nogil;
      eager::drain_compile_ahead();  // compiles still running would count after the reset
    }
    metrics().reset();
  });
  m.def("_clear_cache", []() { ExecutableCache::get().clear(); });

  // --- compilation cache tiers ---
  m.def("_cache_configure", [](std::string disk_dir, std::string shared_dir, int64_t max_bytes) {
    py::gil_scoped_release nogil;
    // No compile may hold the tiers being replaced.
    eager::drain_compile_ahead();
    CompilePool::get().wait_idle();
    ExecutableCache::get().configure(TierSettings{disk_dir, shared_dir, max_bytes});
  });
  m.def("_cache_settings", []() {
    auto s = ExecutableCache::get().settings();
    py::dict d;
    d["disk_dir"] = s.disk_dir;
    d["shared_dir"] = s.shared_dir;
    d["max_bytes"] = s.max_bytes;
    return d;
  });
  m.def("_cache_flush", []() {
    py::gil_scoped_release nogil;
    // Ops still waiting for their compile run first (their programs then
    // reach the disk tier), and no compile may outlive the process.
    try {
      eager::drain_compile_ahead();
    } catch (const std::exception& e) {
      log::write(log::Level::kWarning, std::string("a queued op failed while flushing the cache: ") + e.what());
    }
    CompilePool::get().wait_idle();
    ExecutableCache::get().flush();
  });
  m.def("_compile_threads", []() { return CompilePool::get().threads(); });
  m.def("_wait_background_compiles", [](int64_t timeout_ms) {
    py::gil_scoped_release nogil;  // the worker may need nothing from Python, but others might
    return ExecutableCache::get().wait_background(timeout_ms);
  });
  m.def("_cache_stats", []() {
    auto& c = ExecutableCache::get();
    auto& mt = metrics();
    py::dict d;
    py::dict mem;
    mem["requests"] = c.mem_requests.load();
    mem["hits"] = c.mem_hits.load();
    mem["misses"] = c.mem_misses.load();
    mem["entries"] = c.size();
    mem["evictions"] = c.evictions.load();
    mem["mapping_evictions"] = c.mapping_evictions.load();
    mem["max_programs"] = c.max_programs();
    d["memory"] = mem;
    int64_t saved = 0;
    for (auto* t : {c.disk(), c.shared()}) {
      if (!t) continue;
      py::dict td;
      td["dir"] = t->dir();
      td["enabled"] = t->enabled();
      td["requests"] = t->requests.load();
      td["hits"] = t->hits.load();
      td["misses"] = t->misses.load();
      td["writes"] = t->writes.load();
      td["corrupt"] = t->corrupt.load();
      int64_t bytes = 0, n = 0;
      for (auto& e : t->list()) {
        bytes += e.bytes;
        n++;
      }
      td["entries"] = n;
      td["bytes"] = bytes;
      saved += t->saved_ns.load();
      d[py::str(t->label())] = td;
    }
    d["compiles"] = mt.compiles.load();
    d["compile_ms"] = mt.compile_ns.load() / 1e6;
    d["compile_ms_saved"] = saved / 1e6;
    d["load_ms"] = c.load_ns.load() / 1e6;
    d["load_failures"] = c.load_failures.load();
    d["unserializable"] = c.unserializable.load();
    return d;
  });
  m.def("_cache_list", [](std::string tier) {
    auto& c = ExecutableCache::get();
    DiskTier* t = tier == "shared" ? c.shared() : c.disk();
    py::list out;
    if (!t) return out;
    for (auto& e : t->list()) {
      py::dict d;
      d["file"] = e.file;
      d["name"] = e.name;
      d["bytes"] = e.bytes;
      d["age_s"] = e.age_s;
      d["compile_ms"] = e.compile_ns / 1e6;
      d["hits"] = e.hits;
      d["current"] = e.current;
      out.append(d);
    }
    return out;
  });
  m.def("_cache_prune", [](std::string tier, int64_t max_bytes) -> int64_t {
    auto& c = ExecutableCache::get();
    DiskTier* t = tier == "shared" ? c.shared() : c.disk();
    return t ? t->prune(max_bytes) : 0;
  });
}

}  // namespace torch_tpu
