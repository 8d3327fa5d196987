// torch_tpu._C: the Python face of the C++ core. Only thin bindings here.
#include <ATen/ops/empty_like.h>
#include <c10/core/CachingDeviceAllocator.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <torch/csrc/Generator.h>
#include <torch/csrc/utils/pybind.h>

#include "aten/device.h"
#include "aten/fallback.h"
#include "aten/generator.h"
#include "aten/host_alias.h"
#include "aten/storage.h"
#include "compile/compile_pool.h"
#include "compile/executable_cache.h"
#include "compile/dump.h"
#include "compile/metrics.h"
#include "ops/dist/collectives.h"
#include "record/capture.h"
#include "record/driver.h"
#include "runtime/device_spans.h"
#include "runtime/eh_frame_guard.h"
#include "runtime/log.h"
#include "runtime/worker_threads.h"

namespace py = pybind11;

namespace torch_tpu {
void register_graph_impl();                    // aten/graph.cc
void bind_grad_hooks(pybind11::module_& m);    // python/grad_hooks.cc
void bind_rank_check(pybind11::module_& m);    // python/rank_check.cc
void bind_jax_kernels(pybind11::module_& m);   // python/jax_kernels.cc
void bind_spmd(pybind11::module_& m);          // python/spmd.cc
void bind_control_flow(pybind11::module_& m);  // python/control_flow.cc
}  // namespace torch_tpu
using namespace torch_tpu;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu C++ core";
  m.def("_configure", [](std::string tpu, std::string cuda, std::string cpu, int cpu_device_count) {
    DeviceConfig c;
    c.candidates = {tpu, cuda, cpu};
    c.cpu_device_count = cpu_device_count;
    configure(c);
  });
  m.def("_init", []() { client(); });
  bind_grad_hooks(m);
  bind_rank_check(m);
  bind_jax_kernels(m);
  bind_spmd(m);
  bind_control_flow(m);
  m.def("_is_initialized", &runtime_initialized);
  m.def("_device_count", &device_count);
  m.def("_platform_name", []() { return client().platform_name(); });
  m.def("_device_kind", [](int i) { return client().devices().at(i).kind; });
  m.def("_plugin_info", []() {
    const auto& c = plugin_choice();
    auto& p = runtime::Plugin::load(c.path);
    py::dict d;
    d["path"] = p.path();
    d["kind"] = c.kind;
    d["reason"] = c.reason;
    d["api_version"] = std::to_string(p.api_major()) + "." + std::to_string(p.api_minor());
    d["identity"] = p.identity();
    py::dict attrs;
    for (auto& [k, v] : p.attributes()) attrs[py::str(k)] = v;
    d["attributes"] = attrs;
    return d;
  });
  m.def("_synchronize", []() {
    py::gil_scoped_release nogil;
    record::synchronize();
  });
  m.def("_host_alias", [](const at::Tensor& t) -> py::object {
    std::optional<at::Tensor> a;
    {
      py::gil_scoped_release nogil;
      a = host_alias(t);
    }
    if (!a) return py::none();
    return py::cast(*a);
  });
  m.def("_release_host_alias", [](const at::Tensor& a) { return release_host_alias(a); });
  // The PJRT client's own threads, each as (thread id, niceness).
  m.def("_plugin_threads", []() {
    std::vector<std::pair<int, int>> out;
    for (int tid : runtime::plugin_threads()) out.emplace_back(tid, runtime::thread_nice(tid));
    return out;
  });
  m.def("_work_in_flight", []() {
    py::gil_scoped_release nogil;
    return record::work_in_flight();
  });
  // Eager modes (torch.tpu.EagerMode): 0 DEFER_NEVER, 1 DEFER_NEVER_AND_LAUNCH_BLOCKING, 2 DEFER_AND_FUSE.
  m.def("_set_eager_mode", [](int mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "unknown eager mode ", mode);
    py::gil_scoped_release nogil;
    record::set_current_driver(mode == 2 ? &record::fused_driver() : nullptr);
    record::set_launch_blocking(mode == 1);
  });
  m.def("_set_optimizer_step", [](bool on) { record::set_optimizer_step(on); });
  m.def("_set_bake_numbers", [](bool on) { record::set_bake_numbers(on); });
  m.def("_eager_mode", []() {
    if (&record::current_driver() == &record::fused_driver()) return 2;
    return record::launch_blocking() ? 1 : 0;
  });
  m.def(
      "_mark_step",
      [](const std::string& why) {
        py::gil_scoped_release nogil;
        record::current_driver().sync_point(record::SyncReason::kMarkStep, why);
      },
      py::arg("why") = "");
  py::class_<record::CaptureHandle>(m, "_CapturedGraph");
  m.def("_begin_capture", []() {
    py::gil_scoped_release nogil;
    record::begin_capture();
  });
  m.def("_end_capture", [](const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) -> py::tuple {
    std::string why;
    std::shared_ptr<record::CapturedGraph> g;
    {
      py::gil_scoped_release nogil;
      g = record::end_capture(inputs, outputs, why);
    }
    if (!g) return py::make_tuple(py::none(), why);
    return py::make_tuple(py::cast(record::CaptureHandle{g}), why);
  });
  m.def("_register_graph_impl", &register_graph_impl);
  // TORCH_TPU_DUMP_DIR names each op's Python line: torch_tpu.debug._user_frame().
  set_location_hook([]() -> std::string {
    if (!Py_IsInitialized() || _Py_IsFinalizing()) return {};  // taking the GIL now would abort
    py::gil_scoped_acquire gil;
    try {
      return py::module_::import("torch_tpu.debug").attr("_user_frame")().cast<std::string>();
    } catch (const std::exception&) {
      return {};
    }
  });
  m.def("_compile_records", []() {
    {
      py::gil_scoped_release nogil;
      record::drain_compile_ahead();
    }
    py::list out;
    for (const auto& r : compile_records())
      out.append(py::make_tuple(r.name, r.signature, r.body_digest, r.compile_ns / 1e6, r.key, r.tier));
    return out;
  });
  m.def("_clear_compile_records", &clear_compile_records);
  m.def("_graph_capturing", &record::graph_capturing);
  m.def("_cut_graph_capture", []() {
    py::gil_scoped_release nogil;
    record::cut_graph_capture();
  });
  m.def("_abort_graph_capture", []() {
    py::gil_scoped_release nogil;
    record::abort_graph_capture();
  });
  m.def("_replay", [](const record::CaptureHandle& h, const std::vector<at::Tensor>& inputs) -> py::object {
    std::optional<std::vector<at::Tensor>> outs;
    {
      py::gil_scoped_release nogil;
      outs = record::replay(*h.graph, inputs);
    }
    if (!outs) return py::none();
    return py::cast(*outs);
  });
  m.def("_memory_stats", [](int d) {
    const MemoryStats& s = memory_stats(d);
    py::dict r;
    r["allocated"] = s.allocated.load();
    r["peak"] = s.peak.load();
    r["allocated_total"] = s.allocated_total.load();
    r["freed_total"] = s.freed_total.load();
    r["count"] = s.count.load();
    r["count_peak"] = s.count_peak.load();
    r["count_total"] = s.count_total.load();
    r["count_freed"] = s.count_freed.load();
    r["num_ooms"] = s.num_ooms.load();
    return r;
  });
  m.def("_reset_peak_memory_stats", [](int d) {
    auto* a = static_cast<c10::DeviceAllocator*>(tpu_allocator());
    a->resetPeakStats(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_reset_accumulated_memory_stats", [](int d) {
    auto* a = static_cast<c10::DeviceAllocator*>(tpu_allocator());
    a->resetAccumulatedStats(static_cast<c10::DeviceIndex>(d));
  });
  m.def("_mem_get_info", [](int d) { return device_memory_info(d); });
  m.def("_device_collective", [](const std::string& kind, const std::vector<at::Tensor>& inputs,
                                 const std::string& reduce, int64_t root, bool in_place) {
    return ops::device_collective(ops::parse_collective(kind), inputs, reduce, root, in_place);
  });
  m.def("_eh_frame_guard_stats", []() {
    auto s = runtime::eh_frame_guard_stats();
    return py::dict(py::arg("redirected") = s.redirected, py::arg("registered") = s.registered,
                    py::arg("deregistered") = s.deregistered, py::arg("dropped_at_unmap") = s.dropped_at_unmap);
  });
  m.def("_internal_eh_frame_guard_self_test", []() { runtime::eh_frame_guard_self_test(); });
  // The calling thread's current stream on tpu:d, as (stream_id, device_index).
  m.def("_current_stream", [](int d) {
    c10::impl::VirtualGuardImpl g(c10::DeviceType::PrivateUse1);
    c10::Stream s = g.getStream(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(d)));
    return std::make_pair(static_cast<int64_t>(s.id()), static_cast<int>(s.device_index()));
  });
  m.def("_set_stream", [](int64_t id, int d) {
    c10::impl::VirtualGuardImpl g(c10::DeviceType::PrivateUse1);
    g.exchangeStream(c10::Stream(c10::Stream::UNSAFE,
                                 c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(d)), id));
  });
  m.def("_get_default_generator", [](int idx) {
    return py::reinterpret_steal<py::object>(THPGenerator_initDefaultGenerator(default_generator(idx)));
  });
  m.def("_set_cpu_fallback", &set_cpu_fallback);
  m.def("_cpu_fallback_enabled", &cpu_fallback_enabled);
  m.def("_sync_ops", []() {
    py::dict d;
    for (const auto& s : record::sync_ops()) d[py::str(std::string(s.op))] = record::to_string(s.reason);
    return d;
  });
  // Test hook for TORCH_TPU_CHECK_KEYS: a kernel whose lowering captures `v`
  // without adding it to the key, which is the bug the check exists for.
  m.def("_key_check_probe", [](const at::Tensor& x, double v) {
    record::OpCall call("key_check_probe");
    call.input(x);
    at::Tensor out = at::empty_like(x);
    call.output(out);
    call.run([v](ir::Builder& b, const std::vector<ir::Value>& in) {
      return std::vector<ir::Value>{b.add(in[0], b.constant(v, b.elem(in[0]), b.dims(in[0])))};
    });
    return out;
  });
  m.def("_metrics", []() {
    {
      // Counts are of finished work: ops still waiting for their compile run first.
      py::gil_scoped_release nogil;
      record::drain_compile_ahead();
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
    py::dict fb;
    {
      std::lock_guard<std::mutex> lock(mt.mu);
      for (auto& [k, v] : mt.fallbacks) fb[py::str(k)] = v;
    }
    d["fallbacks"] = fb;
    d["flushes"] = mt.flushes.load();
    d["fused_ops"] = mt.fused_ops.load();
    d["fused_cache_hits"] = mt.fused_cache_hits.load();
    d["fused_max_ops"] = mt.fused_max_ops.load();
    d["replays"] = mt.replays.load();
    d["donated_buffers"] = mt.donated.load();
    py::dict fr;
    {
      std::lock_guard<std::mutex> lock(mt.mu);
      for (auto& [k, v] : mt.flush_reasons) fr[py::str(k)] = v;
    }
    d["flush_reasons"] = fr;
    py::dict by_op;
    {
      std::lock_guard<std::mutex> lock(mt.mu);
      for (auto& [k, v] : mt.compiles_by_op) by_op[py::str(k)] = py::make_tuple(v.count, v.ns / 1e6);
    }
    d["compiles_by_op"] = by_op;
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
      record::drain_compile_ahead();  // compiles still running would count after the reset
    }
    metrics().reset();
  });
  m.def("_clear_cache", []() { ExecutableCache::get().clear(); });
  m.def("_launch_blocking", &record::launch_blocking);

  // --- compilation cache tiers ---
  m.def("_cache_configure", [](std::string disk_dir, std::string shared_dir, int64_t max_bytes) {
    py::gil_scoped_release nogil;
    // No compile may hold the tiers being replaced.
    record::drain_compile_ahead();
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
      record::drain_compile_ahead();
    } catch (const std::exception& e) {
      log::write(log::Level::kWarning, std::string("a queued op failed while flushing the cache: ") + e.what());
    }
    CompilePool::get().wait_idle();
    ExecutableCache::get().flush();
  });
  m.def("_compile_threads", []() { return CompilePool::get().threads(); });
  m.def("_compile_ahead_queued", &record::compile_ahead_queued);
  m.def("_internal_set_compile_delay_ms", [](int ms) { CompilePool::get().set_delay_ms(ms); });
  m.def("_drain_compile_ahead", []() {
    py::gil_scoped_release nogil;
    record::drain_compile_ahead();
  });
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
