// Gather/scatter forms that many lowerings share, and an inclusive scan.
// XLA clamps out-of-range gather indices and drops out-of-range scatter
// updates, so none of these can fault on a bad index.
#pragma once
#include <optional>

#include "ir/builder.h"

namespace torch_tpu::ir {

// {lo, lo + 1, ..., hi - 1}.
Dims iota_dims(int64_t lo, int64_t hi);
// operand[idx[i], ...] for a 1-D integer `idx`: dim 0 of the result has idx's length.
Value gather_rows(Builder& b, Value operand, Value idx);
// operand[idx[i], ...] (combiner) updates[i, ...]; std::nullopt replaces.
Value scatter_rows(Builder& b, Value operand, Value idx, Value updates, std::optional<BinaryOp> combiner);
// `x` gathered along dim `d` at integer indices `idx` (shape [n] or [n, 1]):
// dim d of the result has size n.
Value gather_along(Builder& b, Value x, int64_t d, Value idx);
// Inclusive prefix combination along `dim` (a reduce_window spanning the
// dim, padded low with `init`); exact for integers.
Value inclusive_scan(Builder& b, Value x, int64_t dim, Value init, BinaryOp combiner);
// Inclusive prefix sum along `dim`.
Value cumsum(Builder& b, Value x, int64_t dim);

}  // namespace torch_tpu::ir
