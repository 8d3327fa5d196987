// torch_tpu._C bindings of the device: the PJRT client and plugin, memory
// statistics, streams, the generator, the CPU fallback and host aliases.
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
#include "hooks/host_alias.h"
#include "ops/dist/collectives.h"
#include "record/driver.h"
#include "runtime/device_spans.h"
#include "runtime/eh_frame_guard.h"
#include "runtime/log.h"
#include "runtime/worker_threads.h"

namespace py = pybind11;

namespace torch_tpu {

void bind_device(py::module_& m) {
  m.def("_configure", [](std::string tpu, std::string cuda, std::string cpu, int cpu_device_count) {
    DeviceConfig c;
    c.candidates = {tpu, cuda, cpu};
    c.cpu_device_count = cpu_device_count;
    configure(c);
  });
  m.def("_init", []() { client(); });
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
}

}  // namespace torch_tpu
