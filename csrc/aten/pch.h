// Precompiled header for torch-facing translation units: only the narrow
// ATen/c10 headers the kernels need (never torch/extension.h).
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/Functions.h>
#include <c10/core/ScalarType.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <memory>
#include <string>
#include <vector>
