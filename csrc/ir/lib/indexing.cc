#include "ir/lib/indexing.h"

#include <utility>
#include <vector>

namespace torch_tpu::ir {

Dims iota_dims(int64_t lo, int64_t hi) {
  Dims d;
  for (int64_t i = lo; i < hi; ++i) d.push_back(i);
  return d;
}

Value gather_rows(Builder& b, Value operand, Value idx) {
  Dims od = b.dims(operand);
  int64_t n = b.dims(idx)[0];
  Value ix = b.reshape(b.convert(idx, ElemType::kS64), {n, 1});
  Dims slice = od, out = od;
  slice[0] = 1;
  out[0] = n;
  return b.gather(operand, ix, iota_dims(1, od.size()), {0}, {0}, 1, slice, out);
}

Value scatter_rows(Builder& b, Value operand, Value idx, Value updates, std::optional<BinaryOp> combiner) {
  int64_t n = b.dims(idx)[0];
  Value ix = b.reshape(b.convert(idx, ElemType::kS64), {n, 1});
  return b.scatter(operand, ix, updates, iota_dims(1, b.dims(operand).size()), {0}, {0}, 1, combiner);
}

Value gather_along(Builder& b, Value x, int64_t d, Value idx) {
  Dims xd = b.dims(x), offs, sizes = xd, out = xd;
  for (int64_t i = 0; i < static_cast<int64_t>(xd.size()); ++i)
    if (i != d) offs.push_back(i);
  sizes[d] = 1;
  out[d] = b.dims(idx)[0];
  return b.gather(x, b.reshape(idx, {out[d], 1}), offs, {d}, {d}, 1, sizes, out);
}

Value inclusive_scan(Builder& b, Value x, int64_t dim, Value init, BinaryOp combiner) {
  int64_t r = b.dims(x).size();
  int64_t n = b.dims(x)[dim];
  if (n == 0) return x;
  Dims window(r, 1), strides(r, 1), dil(r, 1);
  std::vector<std::pair<int64_t, int64_t>> padding(r, {0, 0});
  window[dim] = n;
  padding[dim] = {n - 1, 0};
  return b.reduce_window(x, init, window, strides, dil, dil, padding, combiner);
}

Value cumsum(Builder& b, Value x, int64_t dim) {
  return inclusive_scan(b, x, dim, b.constant(0, b.elem(x)), BinaryOp::kAdd);
}

}  // namespace torch_tpu::ir
