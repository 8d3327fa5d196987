// index_reduce (prod / mean / amax / amin, with or without self): one
// stablehlo.scatter of whole slices along `dim` with the reduction as
// combiner. Without include_self the indexed slices are first reset to the
// reduction's identity; mean divides by a scattered count (floor division
// for integers, as CPU does).
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/index_reduce.h>
#include <torch/library.h>

#include <string>

#include "ops/common.h"
#include "ops/index/checks.h"
#include "ops/index/reduce_into.h"

namespace torch_tpu::ops {
using ir::Dims;

namespace {

// Scatter of slices `updates` (self's shape with `dim` sized n) into `self`
// at positions `index` along `dim`; `comb` nullptr replaces.
Value scatter_slices(Builder& b, Value self, Value index, Value updates, int64_t dim, std::optional<BinaryOp> comb) {
  Dims shape = b.dims(self);
  if (shape.empty()) self = b.reshape(self, {1});
  Dims s1 = b.dims(self);
  int64_t r = s1.size();
  int64_t n = b.type(index).numel();
  Dims ushape = s1;
  ushape[dim] = n;
  updates = b.convert(updates, b.elem(self));
  updates = b.type(updates).rank() == 0 ? b.broadcast_to(updates, ushape) : b.reshape(updates, ushape);
  Value idx = b.reshape(b.convert(index, kS64), {n, 1});
  Dims win;
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) win.push_back(i);
  return b.reshape(b.scatter(self, idx, updates, win, {dim}, {dim}, 1, comb), shape);
}

at::Tensor& index_reduce_out(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                             c10::string_view reduce, bool include_self, at::Tensor& out) {
  // The meta kernel raises CPU's errors for dtypes, shapes and the reduce name.
  at::index_reduce(meta_of(self), dim, meta_of(index), meta_of(source), reduce, include_self);
  prepare_out(out, self.sizes(), self.scalar_type(), "index_reduce");
  int64_t d = wrap_dim(dim, self.dim());
  check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kSelect);
  BinaryOp comb = reduce == "prod"   ? BinaryOp::kMul
                  : reduce == "amax" ? BinaryOp::kMax
                  : reduce == "amin" ? BinaryOp::kMin
                                     : BinaryOp::kAdd;
  record_reduce_into("index_reduce", self, d, index, source, reduce, include_self, comb, BinaryOp::kAdd, scatter_slices,
                     out);
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // index_reduce and index_reduce_ reach this through the structured-kernel
  // composite wrappers.
  m.impl("index_reduce.out", index_reduce_out);
}

}  // namespace
}  // namespace torch_tpu::ops
