// torch_tpu._C bindings of execution: eager modes and drivers, synchronize,
// graph capture and replay of compiled graphs and torch.tpu.graph.
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
#include "eager/drivers.h"
#include "hooks/host_alias.h"
#include "ops/dist/collectives.h"
#include "record/driver.h"
#include "runtime/device_spans.h"
#include "runtime/eh_frame_guard.h"
#include "runtime/log.h"
#include "runtime/worker_threads.h"

namespace py = pybind11;

namespace torch_tpu {
void register_graph_impl();  // aten/graph.cc

void bind_execution(py::module_& m) {
  m.def("_synchronize", []() {
    py::gil_scoped_release nogil;
    record::synchronize();
  });
  m.def("_work_in_flight", []() {
    py::gil_scoped_release nogil;
    return record::work_in_flight();
  });
  // Eager modes (torch.tpu.EagerMode): 0 DEFER_NEVER, 1 DEFER_NEVER_AND_LAUNCH_BLOCKING, 2 DEFER_AND_FUSE.
  m.def("_set_eager_mode", [](int mode) {
    TORCH_CHECK(mode >= 0 && mode <= 2, "unknown eager mode ", mode);
    py::gil_scoped_release nogil;
    record::set_current_driver(mode == 2 ? &eager::fused_driver() : nullptr);
    record::set_launch_blocking(mode == 1);
  });
  m.def("_set_optimizer_step", [](bool on) { eager::set_optimizer_step(on); });
  m.def("_set_bake_numbers", [](bool on) { eager::set_bake_numbers(on); });
  m.def("_set_compiled_graph_run", [](bool on) { return eager::set_compiled_graph_run(on); });
  m.def("_eager_mode", []() {
    if (&record::current_driver() == &eager::fused_driver()) return 2;
    return record::launch_blocking() ? 1 : 0;
  });
  m.def(
      "_mark_step",
      [](const std::string& why) {
        py::gil_scoped_release nogil;
        record::current_driver().sync_point(record::SyncReason::kMarkStep, why);
      },
      py::arg("why") = "");
  py::class_<eager::CaptureHandle>(m, "_CapturedGraph");
  m.def("_begin_capture", []() {
    py::gil_scoped_release nogil;
    eager::begin_capture();
  });
  m.def("_end_capture", [](const std::vector<at::Tensor>& inputs, const std::vector<at::Tensor>& outputs) -> py::tuple {
    std::string why;
    std::shared_ptr<eager::CapturedGraph> g;
    {
      py::gil_scoped_release nogil;
      g = eager::end_capture(inputs, outputs, why);
    }
    if (!g) return py::make_tuple(py::none(), why);
    return py::make_tuple(py::cast(eager::CaptureHandle{g}), why);
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
  m.def("_graph_capturing", &eager::graph_capturing);
  m.def("_cut_graph_capture", []() {
    py::gil_scoped_release nogil;
    eager::cut_graph_capture();
  });
  m.def("_abort_graph_capture", []() {
    py::gil_scoped_release nogil;
    eager::abort_graph_capture();
  });
  m.def("_replay", [](const eager::CaptureHandle& h, const std::vector<at::Tensor>& inputs) -> py::object {
    std::optional<std::vector<at::Tensor>> outs;
    {
      py::gil_scoped_release nogil;
      outs = eager::replay(*h.graph, inputs);
    }
    if (!outs) return py::none();
    return py::cast(*outs);
  });
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
  m.def("_launch_blocking", &record::launch_blocking);
  m.def("_compile_ahead_queued", &eager::compile_ahead_queued);
  m.def("_internal_set_compile_delay_ms", [](int ms) { CompilePool::get().set_delay_ms(ms); });
  m.def("_drain_compile_ahead", []() {
    py::gil_scoped_release nogil;
    eager::drain_compile_ahead();
  });
}

}  // namespace torch_tpu
