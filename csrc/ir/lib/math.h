// Small math building blocks shared by many lowerings.
#pragma once
#include "ir/builder.h"

namespace torch_tpu::ir {

// PyTorch's "opmath" rule in IR terms: 16-bit floats compute in f32 and are
// rounded once at the end; every other type computes in itself.
ElemType compute_type(ElemType t);
// `x` converted to compute_type(elem(x)) (a no-op when it already is).
Value upcast(Builder& b, Value x);

// x != x: true exactly for NaN elements (false for every non-float type).
Value is_nan(Builder& b, Value x);

}  // namespace torch_tpu::ir
