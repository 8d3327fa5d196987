// torch_tpu._C bindings for JAX kernels (ops/custom/jax_call.h).
#include <torch/csrc/utils/pybind.h>

#include "ops/custom/jax_call.h"

namespace torch_tpu {

void bind_jax_kernels(pybind11::module_& m) {
  m.def("_jax_register", &ops::register_jax_function, pybind11::arg("symbol"), pybind11::arg("text"));
  m.def("_jax_call", &ops::jax_call, pybind11::arg("symbol"), pybind11::arg("inputs"), pybind11::arg("sizes"),
        pybind11::arg("dtypes"));
}

}  // namespace torch_tpu
