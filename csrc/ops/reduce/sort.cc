// sort (stable, descending) and topk: one XLA stable sort carrying an iota
// for the int64 indices. NaN orders as the largest value, like torch.
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
using ir::Dims;

namespace {

std::tuple<at::Tensor&, at::Tensor&> sort_out(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                              bool descending, at::Tensor& values, at::Tensor& indices) {
  int64_t d = wrap_dim(dim, self.dim());
  check_structured_out(values, self.scalar_type());
  check_structured_out(indices, c10::kLong);
  prepare_out(values, self.sizes(), self.scalar_type(), "sort");
  prepare_out(indices, self.sizes(), c10::kLong, "sort");
  Dims shape(self.sizes().begin(), self.sizes().end());
  record::OpCall call("sort");
  call.attr(d).attr(descending);
  call.input(self);
  call.output(values);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) {
    if (shape.empty()) return Values{in[0], zero(b, ElemType::kS64)};
    Value iota = b.iota(shape, d, ElemType::kS64);
    return b.sort({in[0], iota}, d, descending);
  });
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> sort_stable(const at::Tensor& self, std::optional<bool> stable, int64_t dim,
                                               bool descending) {
  at::Tensor v = empty_like_tpu(self);
  at::Tensor i = empty_like_tpu(self, c10::kLong);
  sort_out(self, stable, dim, descending, v, i);
  return {v, i};
}

std::tuple<at::Tensor&, at::Tensor&> topk_out(const at::Tensor& self, c10::SymInt k_s, int64_t dim, bool largest,
                                              bool sorted, at::Tensor& values, at::Tensor& indices) {
  int64_t k = k_s.expect_int();
  // As CPU, whose topk kernel has no bool instantiation (sort does).
  TORCH_CHECK(self.scalar_type() != c10::kBool, "topk does not support bool dtypes on tpu");
  int64_t d = wrap_dim(dim, self.dim());
  int64_t n = self.dim() == 0 ? 1 : self.size(d);
  TORCH_CHECK(k >= 0 && k <= n, "selected index k out of range");
  check_structured_out(values, self.scalar_type());
  check_structured_out(indices, c10::kLong);
  std::vector<int64_t> oshape(self.sizes().begin(), self.sizes().end());
  if (!oshape.empty()) oshape[d] = k;
  prepare_out(values, oshape, self.scalar_type(), "topk");
  prepare_out(indices, oshape, c10::kLong, "topk");
  Dims shape(self.sizes().begin(), self.sizes().end());
  record::OpCall call("topk");
  call.attr(d).attr(largest).attr(k);
  call.input(self);
  call.output(values);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) {
    if (shape.empty()) return Values{in[0], zero(b, ElemType::kS64)};
    Value iota = b.iota(shape, d, ElemType::kS64);
    Values s = b.sort({in[0], iota}, d, largest);
    Dims start(shape.size(), 0), lim = shape, st(shape.size(), 1);
    lim[d] = k;
    return Values{b.slice(s[0], start, lim, st), b.slice(s[1], start, lim, st)};
  });
  return {values, indices};
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k, int64_t dim, bool largest, bool sorted) {
  at::Tensor v = empty_tpu({0}, self.scalar_type(), self.device());
  at::Tensor i = empty_tpu({0}, c10::kLong, self.device());
  topk_out(self, k, dim, largest, sorted, v, i);
  return {v, i};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("sort.stable", sort_stable);
  m.impl("sort.values_stable", sort_out);
  m.impl("topk", topk);
  m.impl("topk.values", topk_out);
}

}  // namespace
}  // namespace torch_tpu::ops
