// searchsorted / bucketize (Tensor and Scalar values, functional and out=):
// an unrolled binary search (ceil(log2(M + 1)) gather steps), with ATen's
// comparisons so NaNs land at the end.
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"

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

c10::ScalarType index_dtype(bool out_int32) { return out_int32 ? c10::kInt : c10::kLong; }

// out= of searchsorted/bucketize over a tensor must have the index dtype.
void check_index_out(const at::Tensor& out, bool out_int32) {
  TORCH_CHECK(out.scalar_type() == index_dtype(out_int32),
              "torch.searchsorted(): output tensor's dtype is wrong, it can only be Int(int32) "
              "or Long(int64) depending on whether out_int32 flag is True, but we got output tensor's dtype ",
              out.scalar_type(), " and out_int32 flag is ", out_int32 ? "True" : "False");
}

// Positions of self's values in the sorted last dim of seq: self's shape.
OutMeta positions_meta(const at::Tensor& seq, const at::Tensor& self, bool out_int32) {
  OutMeta m{self.sizes().vec(), index_dtype(out_int32), seq.device(), OutDtype::kOwn};
  m.operand_layout = false;
  return m;
}

struct SearchSorted {
  static constexpr const char* kName = "searchsorted";
  static OutMeta meta(const at::Tensor& seq, const at::Tensor& self, bool out_int32, bool right,
                      std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
    searchsorted_checks(seq, self, out_int32, right, side, sorter.value_or(at::Tensor()));
    return positions_meta(seq, self, out_int32);
  }
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor&, const at::Tensor&, bool out_int32,
                        bool, std::optional<std::string_view>, const std::optional<at::Tensor>&) {
    check_index_out(out, out_int32);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& seq, const at::Tensor& self, bool,
                   bool right, std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
    searchsorted_into(seq, self, self.sizes(), is_right(right, side), sorter.value_or(at::Tensor()), out);
  }
};

// A single value: a 0-d result, whose out= may be any dtype it casts to.
struct SearchSortedScalar {
  static constexpr const char* kName = "searchsorted";
  static OutMeta meta(const at::Tensor& seq, const c10::Scalar&, bool out_int32, bool right,
                      std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
    TORCH_CHECK(seq.dim() == 1,
                "torch.searchsorted(): input value can be a scalar only when boundaries tensor dimension "
                "is 1, but we got boundaries tensor dim(",
                seq.dim(), ") and input value's dim(0) numel(1)");
    at::Tensor dummy = empty_tpu({}, seq.scalar_type(), c10::Device(c10::kMeta));
    searchsorted_checks(seq, dummy, out_int32, right, side, sorter.value_or(at::Tensor()));
    return OutMeta{{}, index_dtype(out_int32), seq.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& seq, const c10::Scalar& self, bool,
                   bool right, std::optional<std::string_view> side, const std::optional<at::Tensor>& sorter) {
    searchsorted_into(seq, self, {}, is_right(right, side), sorter.value_or(at::Tensor()), out);
  }
};

void check_boundaries(const at::Tensor& boundaries) {
  TORCH_CHECK(boundaries.dim() == 1, "boundaries tensor must be 1 dimension, but got dim(", boundaries.dim(), ")");
}

struct Bucketize {
  static constexpr const char* kName = "bucketize";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& boundaries, bool out_int32, bool right) {
    check_boundaries(boundaries);
    searchsorted_checks(boundaries, self, out_int32, right, std::nullopt, at::Tensor());
    return positions_meta(boundaries, self, out_int32);
  }
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor&, const at::Tensor&, bool out_int32,
                        bool) {
    check_index_out(out, out_int32);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const at::Tensor& boundaries, bool,
                   bool right) {
    searchsorted_into(boundaries, self, self.sizes(), right, at::Tensor(), out);
  }
};

// bucketize of a single value: its first argument is a number, which the
// variant mechanism does not take.
at::Tensor bucketize_scalar(const c10::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right) {
  check_boundaries(boundaries);
  return VariantsOf<SearchSortedScalar>::functional(boundaries, self, out_int32, right, std::nullopt, std::nullopt);
}
at::Tensor& bucketize_scalar_out(const c10::Scalar& self, const at::Tensor& boundaries, bool out_int32, bool right,
                                 at::Tensor& out) {
  check_boundaries(boundaries);
  return VariantsOf<SearchSortedScalar>::out(boundaries, self, out_int32, right, std::nullopt, std::nullopt, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<SearchSorted>(m, {"searchsorted.Tensor", "", "searchsorted.Tensor_out"});
  register_variants<SearchSortedScalar>(m, {"searchsorted.Scalar", "", "searchsorted.Scalar_out"});
  register_variants<Bucketize>(m, {"bucketize.Tensor", "", "bucketize.Tensor_out"});
  m.impl("bucketize.Scalar", bucketize_scalar);
  m.impl("bucketize.Scalar_out", bucketize_scalar_out);
}

}  // namespace
}  // namespace torch_tpu::ops
