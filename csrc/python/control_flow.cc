// torch_tpu._C bindings for regions and the loops built on them
// (record/region.h, ops/control/while_loop.h), used by
// torch_tpu/_control_flow.py.
#include <torch/csrc/utils/pybind.h>

#include "eager/region.h"
#include "ops/control/while_loop.h"

namespace torch_tpu {

void bind_control_flow(pybind11::module_& m) {
  pybind11::class_<record::RegionGraph, std::shared_ptr<record::RegionGraph>>(m, "_RegionGraph")
      .def_property_readonly("fingerprint", [](const record::RegionGraph& g) { return g.graph->fingerprint(); })
      // The region as a StableHLO module whose @main takes its parameters (torch_tpu.export).
      .def("text", [](const record::RegionGraph& g) { return g.graph->to_mlir(); });
  m.def("_region_begin", &eager::begin_region, pybind11::arg("params"));
  m.def("_region_end", &eager::end_region, pybind11::arg("results"));
  m.def("_region_abort", &eager::abort_region);
  m.def("_recording_region", &eager::recording_region);
  m.def("_while_loop", &ops::while_loop, pybind11::arg("cond"), pybind11::arg("body"), pybind11::arg("inputs"));
  m.def("_dynamic_index", &ops::dynamic_index, pybind11::arg("x"), pybind11::arg("i"));
  m.def("_dynamic_update_index", &ops::dynamic_update_index, pybind11::arg("y"), pybind11::arg("v"),
        pybind11::arg("i"));
}

}  // namespace torch_tpu
