// Functions written in JAX (or Pallas) as ops on tpu tensors: their
// StableHLO, lowered by JAX in Python (torch_tpu/pallas.py), is registered
// once under a symbol and inlined into tpu programs by func.call, so strict
// eager, fused eager and compiled graphs run it like any other op.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace torch_tpu::ops {

// Registers the private func.func definitions `text` (JAX's module body,
// every symbol renamed under `symbol`'s prefix) whose entry is `symbol`.
// Registering a symbol again with other text is an error.
void register_jax_function(const std::string& symbol, const std::string& text);

// Runs the registered `symbol` on `inputs` (tpu tensors, any views) and
// returns new tensors of the given sizes and dtypes, which must be what the
// function returns.
std::vector<at::Tensor> jax_call(const std::string& symbol, const std::vector<at::Tensor>& inputs,
                                 const std::vector<std::vector<int64_t>>& sizes,
                                 const std::vector<c10::ScalarType>& dtypes);

}  // namespace torch_tpu::ops
