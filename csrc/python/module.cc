// torch_tpu._C: the Python face of the C++ core, one bind_* function per
// part (python/bind_*.cc and the files named below). Only thin bindings.
#include <torch/csrc/utils/pybind.h>

namespace torch_tpu {
void bind_grad_hooks(pybind11::module_& m);    // python/grad_hooks.cc
void bind_rank_check(pybind11::module_& m);    // python/rank_check.cc
void bind_jax_kernels(pybind11::module_& m);   // python/jax_kernels.cc
void bind_spmd(pybind11::module_& m);          // python/spmd.cc
void bind_control_flow(pybind11::module_& m);  // python/control_flow.cc
void bind_device(pybind11::module_& m);        // python/bind_device.cc
void bind_compile(pybind11::module_& m);       // python/bind_compile.cc
void bind_execution(pybind11::module_& m);     // python/bind_execution.cc
}  // namespace torch_tpu
using namespace torch_tpu;

PYBIND11_MODULE(_C, m) {
  m.doc() = "torch_tpu C++ core";
  bind_device(m);
  bind_compile(m);
  bind_execution(m);
  bind_grad_hooks(m);
  bind_rank_check(m);
  bind_jax_kernels(m);
  bind_spmd(m);
  bind_control_flow(m);
}
