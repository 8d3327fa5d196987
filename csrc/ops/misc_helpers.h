// Small IR helpers shared by the embedding_bag, set, loss and layout ops:
// row gather / scatter along dim 0 and a 1-D inclusive prefix sum.
#pragma once
#include "ops/common.h"

namespace torch_tpu::ops::misc {

using ir::Dims;

inline Dims iota_dims(int64_t lo, int64_t hi) {
  Dims d;
  for (int64_t i = lo; i < hi; ++i) d.push_back(i);
  return d;
}

// operand[idx[i], ...] for a 1-D s64 `idx` (XLA clamps out-of-range rows).
inline Value gather_rows(Builder& b, Value operand, Value idx) {
  Dims od = b.dims(operand);
  int64_t n = b.dims(idx)[0];
  Value ix = b.reshape(b.convert(idx, ElemType::kS64), {n, 1});
  Dims slice = od;
  slice[0] = 1;
  Dims out = od;
  out[0] = n;
  return b.gather(operand, ix, iota_dims(1, od.size()), {0}, {0}, 1, slice, out);
}

// operand[idx[i], ...] (combiner) updates[i, ...]; out-of-range rows are dropped.
inline Value scatter_rows(Builder& b, Value operand, Value idx, Value updates, const char* combiner) {
  int64_t n = b.dims(idx)[0];
  Value ix = b.reshape(b.convert(idx, ElemType::kS64), {n, 1});
  return b.scatter(operand, ix, updates, iota_dims(1, b.dims(operand).size()), {0}, {0}, 1, combiner);
}

// Inclusive prefix sum along `dim`.
inline Value cumsum(Builder& b, Value x, int64_t dim) {
  int64_t r = b.dims(x).size();
  int64_t n = b.dims(x)[dim];
  if (n == 0) return x;
  Dims window(r, 1), strides(r, 1), dil(r, 1);
  std::vector<std::pair<int64_t, int64_t>> padding(r, {0, 0});
  window[dim] = n;
  padding[dim] = {n - 1, 0};
  return b.reduce_window(x, zero(b, b.elem(x)), window, strides, dil, dil, padding, "stablehlo.add");
}

inline Value full_like(Builder& b, double v, Value like) { return b.constant(v, b.elem(like), b.dims(like)); }

inline Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

}  // namespace torch_tpu::ops::misc
