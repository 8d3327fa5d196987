// Constants for lowerings: shaped like another value, or the identity and
// extreme values of an element type (reduction inits, masks).
#pragma once
#include "ir/builder.h"

namespace torch_tpu::ir {

// `v` with the element type and shape of `like`.
Value full_like(Builder& b, double v, Value like);
Value zero(Builder& b, ElemType t, const Dims& dims = {});
Value one(Builder& b, ElemType t, const Dims& dims = {});
// -inf for floats, the minimum for integers, false for pred.
Value lowest(Builder& b, ElemType t);
// +inf for floats, the maximum for integers, true for pred.
Value highest(Builder& b, ElemType t);

}  // namespace torch_tpu::ir
