// searchsorted / bucketize (Tensor and Scalar values, functional and out=):
// an unrolled binary search (ceil(log2(M + 1)) gather steps), with ATen's
// comparisons so NaNs land at the end.
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

// x[r, idx[r, k]] for x [B, M] and s64 idx [B, K] (indices already in range).
Value gather2d(Builder& b, Value x, Value idx) {
  Dims id = b.dims(idx);
  Dims cd = id;
  cd.push_back(1);
  Value rows = b.reshape(b.iota(id, 0, kS64), cd);
  Value cols = b.reshape(idx, cd);
  Value coords = b.concatenate({rows, cols}, 2);
  return b.gather(x, coords, {}, {0, 1}, {0, 1}, 2, {1, 1}, id);
}

// --- searchsorted / bucketize --------------------------------------------------------

void searchsorted_checks(const at::Tensor& seq, const at::Tensor& self, bool out_int32, bool right,
                         std::optional<std::string_view> side, const at::Tensor& sorter) {
  if (side) {
    TORCH_CHECK(*side == "left" || *side == "right", "torch.searchsorted(): side can only be 'left' or 'right' but ",
                "got ", *side);
    TORCH_CHECK(!right || *side == "right",
                "torch.searchsorted(): side and right can't be set to opposites, got side "
                "of ",
                *side, " while right was True");
  }
  TORCH_CHECK(seq.dim() > 0,
              "torch.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
              "dimension");
  TORCH_CHECK(seq.dim() == 1 || (seq.dim() == self.dim() &&
                                 seq.sizes().slice(0, seq.dim() - 1).equals(self.sizes().slice(0, self.dim() - 1))),
              "torch.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 dimensions of boundaries "
              "tensor and input value tensor must match, but we got boundaries tensor ",
              seq.sizes(), " and input value tensor ", self.sizes());
  if (sorter.defined()) {
    TORCH_CHECK(sorter.scalar_type() == c10::kLong,
                "torch.searchsorted(): sorter must be a tensor of long dtype but "
                "got dtype ",
                sorter.scalar_type());
    TORCH_CHECK(sorter.sizes().equals(seq.sizes()),
                "torch.searchsorted(): boundary and sorter must have the same size, "
                "but got boundary tensor ",
                seq.sizes(), "and got sorter tensor ", sorter.sizes());
  }
  TORCH_CHECK(!(seq.scalar_type() == c10::kBool || self.scalar_type() == c10::kBool),
              "torch.searchsorted(): bool dtype is not supported");
}

// Shared lowering; `self_shape` is the value tensor's shape.
void searchsorted_into(const at::Tensor& seq, const Operand& value, c10::IntArrayRef self_shape, bool right,
                       const at::Tensor& sorter, const at::Tensor& out) {
  auto ct = value.t.defined() ? at::result_type(seq, value.t) : at::result_type(seq, *value.s);
  record::OpCall call("searchsorted");
  call.attr(right).attr(sorter.defined()).attr(static_cast<int64_t>(ct));
  call.input(seq);
  if (value.t.defined())
    call.input(value.t);
  else
    call.scalar(*value.s, ct);
  if (sorter.defined()) call.input(sorter);
  call.output(out);
  Dims sd = dims_of(seq), vd(self_shape.begin(), self_shape.end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    int64_t m = sd.back();
    int64_t batch = sd.size() == 1 ? 1 : b.type(in[0]).numel() / std::max<int64_t>(m, 1);
    int64_t nv = 1;
    for (int64_t d : vd) nv *= d;
    int64_t k = batch == 0 ? 0 : nv / batch;
    if (sd.size() == 1) k = nv;
    Value s = b.reshape(b.convert(in[0], e), {batch, m});
    Value v = b.reshape(b.convert(in[1], e), {batch, k});
    if (m == 0 || nv == 0) return Values{b.reshape(zero(b, kS64, {batch, k}), vd)};
    if (sorter.defined()) s = gather2d(b, s, b.reshape(in[2], {batch, m}));
    Value lo = zero(b, kS64, {batch, k}), hi = b.constant(m, kS64, {batch, k});
    int steps = 0;
    while ((int64_t(1) << steps) <= m) ++steps;
    Value onev = one(b, kS64, {batch, k}), two = b.constant(2, kS64, {batch, k});
    for (int i = 0; i < steps; ++i) {
      Value active = b.compare(lo, hi, Direction::kLt);
      Value mid = b.div(b.add(lo, hi), two);
      Value midc = b.clamp(zero(b, kS64), mid, b.constant(m - 1, kS64));
      Value mv = gather2d(b, s, midc);
      // ATen: left moves right unless mid >= v; right unless mid > v.
      Value go_right = b.not_(b.compare(mv, v, right ? Direction::kGt : Direction::kGe));
      Value move_lo = b.and_(active, go_right);
      Value move_hi = b.and_(active, b.not_(go_right));
      lo = b.select(move_lo, b.add(mid, onev), lo);
      hi = b.select(move_hi, mid, hi);
    }
    return Values{b.reshape(lo, vd)};
  });
}

bool is_right(bool right, std::optional<std::string_view> side) { return right || (side && *side == "right"); }

at::Tensor& searchsorted_out(const at::Tensor& seq, const at::Tensor& self, bool out_int32, bool right,
                             std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter_opt,
                             at::Tensor& out) {
  at::Tensor sorter = sorter_opt.value_or(at::Tensor());
  searchsorted_checks(seq, self, out_int32, right, side, sorter);
  auto dt = out_int32 ? c10::kInt : c10::kLong;
  TORCH_CHECK(out.scalar_type() == dt,
              "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) "
              "or Long(int64) depending on whether out_int32 flag is True, but we got output tensor's dtype ",
              out.scalar_type(), " and out_int32 flag is ", out_int32 ? "True" : "False");
  at::native::resize_output(out, self.sizes());
  searchsorted_into(seq, self, self.sizes(), is_right(right, side), sorter, out);
  return out;
}
at::Tensor ss_tensor(const at::Tensor& seq, const at::Tensor& self, bool out_int32, bool right,
                     std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor out = empty_tpu(self.sizes(), out_int32 ? c10::kInt : c10::kLong, seq.device());
  return searchsorted_out(seq, self, out_int32, right, side, sorter, out);
}
at::Tensor& searchsorted_scalar_out(const at::Tensor& seq, const c10::Scalar& self, bool out_int32, bool right,
                                    std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter_opt,
                                    at::Tensor& out) {
  at::Tensor sorter = sorter_opt.value_or(at::Tensor());
  TORCH_CHECK(seq.dim() == 1,
              "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension "
              "is 1, but we got boundaries tensor dim(",
              seq.dim(), ") and input value's dim(0) numel(1)");
  at::Tensor dummy = empty_tpu({}, seq.scalar_type(), c10::Device(c10::kMeta));
  searchsorted_checks(seq, dummy, out_int32, right, side, sorter);
  prepare_out(out, {}, out_int32 ? c10::kInt : c10::kLong, "searchsorted");
  searchsorted_into(seq, self, {}, is_right(right, side), sorter, out);
  return out;
}
at::Tensor ss_scalar(const at::Tensor& seq, const c10::Scalar& self, bool out_int32, bool right,
                     std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
  at::Tensor out = empty_tpu({}, out_int32 ? c10::kInt : c10::kLong, seq.device());
  return searchsorted_scalar_out(seq, self, out_int32, right, side, sorter, out);
}

at::Tensor& bucketize_out(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right,
                          at::Tensor& out) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsorted_out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}
at::Tensor bucketize(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return ss_tensor(boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}
at::Tensor bucketize_scalar(const c10::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return ss_scalar(boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}
at::Tensor& bucketize_scalar_out(const c10::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right,
                                 at::Tensor& out) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
  return searchsorted_scalar_out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("searchsorted.Tensor", ss_tensor);
  m.impl("searchsorted.Tensor_out", searchsorted_out);
  m.impl("searchsorted.Scalar", ss_scalar);
  m.impl("searchsorted.Scalar_out", searchsorted_scalar_out);
  m.impl("bucketize.Tensor", bucketize);
  m.impl("bucketize.Tensor_out", bucketize_out);
  m.impl("bucketize.Scalar", bucketize_scalar);
  m.impl("bucketize.Scalar_out", bucketize_scalar_out);
}

}  // namespace
}  // namespace torch_tpu::ops
