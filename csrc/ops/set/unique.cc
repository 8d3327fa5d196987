// unique (_unique, _unique2, unique_consecutive). It runs on device (sort,
// adjacent difference, prefix sum); the only host sync is a scalar - the
// number of unique values - that fixes the output size.
#include <torch/library.h>

#include "ops/common.h"
#include "record/driver.h"

namespace torch_tpu::ops {

const record::SyncSite kUniqueSync{"unique", record::SyncReason::kDataDependentShape};
namespace {

// --- unique ------------------------------------------------------------------------------

// Flattened keys (sorted unless consecutive) with their original positions
// and the "starts a new group" flags.
struct Groups {
  Value keys, perm, flags;
};
Groups groups(Builder& b, Value x, bool consecutive) {
  int64_t n = b.type(x).numel();
  Value flat = b.reshape(x, {n});
  // Sort bools as integers.
  if (b.elem(flat) == ElemType::kPred) flat = b.convert(flat, ElemType::kS32);
  Value perm = b.iota({n}, 0, kS64);
  if (!consecutive) {
    Values s = b.sort({flat, perm}, 0, false);
    flat = s[0];
    perm = s[1];
  }
  Value prev = b.slice(flat, {0}, {n - 1}, {1});
  Value next = b.slice(flat, {1}, {n}, {1});
  Value diff = b.compare(next, prev, Direction::kNe);
  Value flags = b.concatenate({b.constant(1, ElemType::kPred, {1}), diff}, 0);
  return {flat, perm, flags};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_impl(const at::Tensor& self, bool consecutive,
                                                           bool return_inverse, bool return_counts) {
  int64_t n = self.numel();
  at::Tensor inverse = empty_tpu(return_inverse ? self.sizes() : c10::IntArrayRef{0}, c10::kLong, self.device());
  if (n == 0) {
    at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device());
    at::Tensor counts = empty_tpu({0}, c10::kLong, self.device());
    return {out, inverse, counts};
  }
  // Phase 1: the number of groups (the one host sync).
  at::Tensor count = empty_tpu({}, c10::kLong, self.device());
  {
    record::OpCall call("unique_count");
    call.attr(consecutive);
    call.input(self);
    call.output(count);
    call.run([&](Builder& b, const Values& in) {
      Groups g = groups(b, in[0], consecutive);
      return Values{b.reduce(b.convert(g.flags, kS64), zero(b, kS64), {0}, BinaryOp::kAdd)};
    });
  }
  kUniqueSync();
  int64_t u = count.item<int64_t>();
  at::Tensor out = empty_tpu({u}, self.scalar_type(), self.device());
  at::Tensor counts = empty_tpu({return_counts ? u : 0}, c10::kLong, self.device());
  record::OpCall call("unique");
  call.attr(consecutive).attr(u).attr(return_inverse).attr(return_counts);
  call.input(self);
  call.output(out);
  if (return_inverse) call.output(inverse);
  if (return_counts) call.output(counts);
  Dims shape = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    Groups g = groups(b, in[0], consecutive);
    Value gid = b.sub(cumsum(b, b.convert(g.flags, kS64), 0), one(b, kS64, {n}));
    Values res;
    res.push_back(scatter_rows(b, zero(b, b.elem(g.keys), {u}), gid, g.keys, std::nullopt));
    if (return_inverse) res.push_back(b.reshape(scatter_rows(b, zero(b, kS64, {n}), g.perm, gid, std::nullopt), shape));
    if (return_counts) res.push_back(scatter_rows(b, zero(b, kS64, {u}), gid, one(b, kS64, {n}), BinaryOp::kAdd));
    return res;
  });
  return {out, inverse, counts};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> unique2(const at::Tensor& self, bool sorted, bool return_inverse,
                                                       bool return_counts) {
  // Unsorted unique may return any order; sorted order is a valid one.
  return unique_impl(self, false, return_inverse, return_counts);
}
std::tuple<at::Tensor, at::Tensor> unique1(const at::Tensor& self, bool sorted, bool return_inverse) {
  auto r = unique_impl(self, false, return_inverse, false);
  return {std::get<0>(r), std::get<1>(r)};
}
std::tuple<at::Tensor, at::Tensor, at::Tensor> unique_consecutive(const at::Tensor& self, bool return_inverse,
                                                                  bool return_counts, std::optional<int64_t> dim) {
  if (dim.has_value()) {
    wrap_dim(*dim, self.dim());
    TORCH_CHECK_NOT_IMPLEMENTED(self.dim() == 1,
                                "unique_consecutive with dim is only supported for 1-D tensors on tpu");
  }
  return unique_impl(self, true, return_inverse, return_counts);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_unique2", unique2);
  m.impl("_unique", unique1);
  m.impl("unique_consecutive", unique_consecutive);
}

}  // namespace
}  // namespace torch_tpu::ops
