// Order statistics: median / nanmedian (whole tensor and along a dim),
// kthvalue and mode. All sort the reduced dim stably (NaN last) carrying an
// iota, then pick one position per row, so the index returned is the
// original position of the chosen element:
//  - median/nanmedian: CPU's nth_element breaks ties by index, which is
//    exactly the stable sort order; median of a row holding NaN is its
//    first NaN.
//  - mode: CPU sorts (value, index) pairs with std::sort and reports the
//    last pair of the longest run (smallest value on ties). For rows of up
//    to 16 elements std::sort is an insertion sort, i.e. stable, so the
//    index is the largest position holding the mode; we return that for
//    every row length.
//  - kthvalue: CPU's quickselect may return any of several equal elements;
//    we return the stable-sort one (it agrees whenever the k-th value is
//    unique).
#include <ATen/ops/empty.h>
#include <torch/library.h>

#include <algorithm>
#include <numeric>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
using ir::Dims;

namespace {

Dims dims_without(const Dims& s, int64_t d) {
  Dims r;
  for (int64_t i = 0; i < static_cast<int64_t>(s.size()); ++i)
    if (i != d) r.push_back(i);
  return r;
}

std::vector<int64_t> reduced_shape(const at::Tensor& self, int64_t d, bool keepdim) {
  std::vector<int64_t> s(self.sizes().begin(), self.sizes().end());
  if (s.empty()) return s;
  if (keepdim)
    s[d] = 1;
  else
    s.erase(s.begin() + d);
  return s;
}

// Value and index of each row of the sorted (sv, si) at position `pos`
// (shape: sv's without dim d). Results have dim d removed.
Values pick(Builder& b, Value sv, Value si, int64_t d, Value pos) {
  Dims shape = b.dims(sv);
  Value posb = b.broadcast_in_dim(pos, shape, dims_without(shape, d));
  Value mask = b.compare(b.iota(shape, d, kS64), posb, Direction::kEq);
  // Sum of the one selected element and zeros, on the raw bits so that
  // NaN payloads and -0.0 come through unchanged.
  ElemType e = b.elem(sv), ie = e;
  switch (e) {
    case ElemType::kF32:
      ie = ElemType::kS32;
      break;
    case ElemType::kF64:
      ie = ElemType::kS64;
      break;
    case ElemType::kBF16:
    case ElemType::kF16:
      ie = ElemType::kS16;
      break;
    default:
      break;
  }
  Value bits = ie == e ? sv : b.bitcast_convert(sv, ie);
  Value v = b.reduce(b.select(mask, bits, zero(b, ie, shape)), zero(b, ie), {d}, BinaryOp::kAdd);
  if (ie != e) v = b.bitcast_convert(v, e);
  Value i = b.reduce(b.select(mask, si, zero(b, kS64, shape)), zero(b, kS64), {d}, BinaryOp::kAdd);
  return {v, i};
}

enum class Kind { kMedian, kNanMedian, kKth, kMode };

// The whole lowering: `x` has rank >= 1; returns {values, indices} with d
// removed (callers reshape for keepdim).
Values order_stat(Builder& b, Value x, int64_t d, Kind kind, int64_t k) {
  if (b.elem(x) == ElemType::kPred) x = b.convert(x, ElemType::kS8);
  Dims shape = b.dims(x);
  int64_t n = shape[d];
  Dims rshape;
  for (int64_t i = 0; i < static_cast<int64_t>(shape.size()); ++i)
    if (i != d) rshape.push_back(shape[i]);
  Values s = b.sort({x, b.iota(shape, d, kS64)}, d, false);
  Value sv = s[0], si = s[1];
  auto cst = [&](int64_t v) { return b.constant(static_cast<double>(v), kS64, rshape); };
  Value pos;
  if (kind == Kind::kKth) {
    pos = cst(k - 1);
  } else if (kind == Kind::kMode) {
    Dims st(shape.size(), 1), lo(shape.size(), 0), hi = shape;
    Value iota = b.iota(shape, d, kS64);
    Value boundary;  // true at the first element of each run (n entries)
    Dims one_shape = shape;
    one_shape[d] = 1;
    Value t = b.constant(1, ElemType::kPred, one_shape);
    if (n > 1) {
      Dims lim = shape, start(shape.size(), 0);
      lim[d] = n - 1;
      Value cur = b.slice(sv, start, lim, st);
      start[d] = 1;
      Value nxt = b.slice(sv, start, shape, st);
      Value ne = b.compare(cur, nxt, Direction::kNe);
      boundary = b.concatenate({t, ne}, d);
      Value is_end = b.concatenate({ne, t}, d);
      // Start of the run each element is in: running max of start positions.
      Value starts = b.select(boundary, iota, zero(b, kS64, shape));
      Dims window(shape.size(), 1), dil(shape.size(), 1);
      std::vector<std::pair<int64_t, int64_t>> padding(shape.size(), {0, 0});
      window[d] = n;
      padding[d] = {n - 1, 0};
      Value run_start = b.reduce_window(starts, zero(b, kS64), window, dil, dil, dil, padding, BinaryOp::kMax);
      Value len = b.add(b.sub(iota, run_start), one(b, kS64, shape));
      Value freq = b.select(is_end, len, zero(b, kS64, shape));
      Value maxf = b.reduce(freq, zero(b, kS64), {d}, BinaryOp::kMax);
      Value cand = b.compare(freq, b.broadcast_in_dim(maxf, shape, dims_without(shape, d)), Direction::kEq);
      pos = b.reduce(b.select(cand, iota, b.constant(static_cast<double>(n), kS64, shape)),
                     b.constant(static_cast<double>(n), kS64), {d}, BinaryOp::kMin);
    } else {
      pos = cst(0);
    }
  } else {
    Value isnan = b.convert(b.compare(x, x, Direction::kNe), kS64);
    Value nnan = b.reduce(isnan, zero(b, kS64), {d}, BinaryOp::kAdd);
    Value nn = b.sub(cst(n), nnan);  // non-NaN count
    if (kind == Kind::kMedian) {
      // A row with NaN yields its first NaN, which sorts to position n - nnan.
      Value has_nan = b.compare(nnan, cst(0), Direction::kGt);
      pos = b.select(has_nan, nn, b.div(cst(n - 1), cst(2)));
    } else {
      Value m = b.max(b.sub(nn, cst(1)), cst(0));
      pos = b.div(m, cst(2));
      // In an all-NaN row every comparison is false, and which element
      // std::nth_element leaves in front then depends only on n: ask it.
      std::vector<int64_t> order(n);
      std::iota(order.begin(), order.end(), 0);
      std::nth_element(order.begin(), order.begin(), order.end(), [](int64_t, int64_t) { return false; });
      pos = b.select(b.compare(nn, cst(0), Direction::kEq), cst(order[0]), pos);
    }
  }
  return pick(b, sv, si, d, pos);
}

void check_not_bool(const at::Tensor& self, const char* name) {
  TORCH_CHECK(self.scalar_type() != c10::kBool && !c10::isComplexType(self.scalar_type()), "\"", name,
              "\" not implemented for '", c10::toString(self.scalar_type()), "'");
}

// Tensor-wide median / nanmedian (value only).
at::Tensor median_all(const at::Tensor& self, bool ignore_nan) {
  check_not_bool(self, ignore_nan ? "nanmedian_cpu" : "median_cpu");
  at::Tensor out = empty_tpu({}, self.scalar_type(), self.device());
  if (self.numel() == 0) {
    // CPU gives NaN for an empty input.
    record::OpCall call("median_empty");
    call.output(out);
    call.run([&](Builder& b, const Values&) {
      return Values{b.constant(std::numeric_limits<double>::quiet_NaN(), to_elem(self.scalar_type()))};
    });
    return out;
  }
  int64_t n = self.numel();
  record::OpCall call("median_all");
  call.attr(ignore_nan);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.reshape(in[0], {n});
    Values r = order_stat(b, x, 0, ignore_nan ? Kind::kNanMedian : Kind::kMedian, 0);
    return Values{r[0]};
  });
  return out;
}

at::Tensor median(const at::Tensor& self) { return median_all(self, false); }
at::Tensor nanmedian(const at::Tensor& self) { return median_all(self, true); }

void check_outs(const at::Tensor& self, const at::Tensor& values, const at::Tensor& indices, const char* name) {
  TORCH_CHECK(indices.scalar_type() == c10::kLong, name, "(): Expected out tensor to have dtype int64 (Long), but got ",
              indices.scalar_type(), " instead");
  TORCH_CHECK(values.scalar_type() == self.scalar_type(), name, "(): Expected out tensor to have dtype ",
              self.scalar_type(), ", but got ", values.scalar_type(), " instead");
}

struct StatMeta : PairMeta {
  int64_t dim = 0;
};

// Checks and result shapes of a values-and-indices order statistic over `dim`.
StatMeta stat_meta(const char* name, Kind kind, const at::Tensor& self, int64_t dim, int64_t k, bool keepdim) {
  StatMeta m;
  m.dim = wrap_dim(dim, self.dim());
  int64_t n = self.dim() == 0 ? 1 : self.size(m.dim);
  if (kind == Kind::kKth) {
    TORCH_CHECK(k >= 1 && k <= n, "kthvalue(): selected number k out of range for dimension ", m.dim);
  } else {
    TORCH_CHECK_INDEX(self.dim() == 0 || self.size(m.dim) != 0, name, "(): Expected reduction dim ", m.dim,
                      " to have non-zero size.");
  }
  static_cast<PairMeta&>(m) = values_and_indices(self, reduced_shape(self, m.dim, keepdim));
  return m;
}

void stat_impl(const char* name, Kind kind, const at::Tensor& self, const StatMeta& m, int64_t k, bool keepdim,
               const at::Tensor& values, const at::Tensor& indices) {
  if (self.numel() == 0) return;
  Dims in_shape(self.sizes().begin(), self.sizes().end());
  Dims out_shape(m.results[0].sizes.begin(), m.results[0].sizes.end());
  int64_t d = m.dim;
  record::OpCall call(name);
  call.attr(d).attr(static_cast<int64_t>(kind)).attr(k).attr(keepdim);
  call.input(self);
  call.output(values);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    int64_t dd = d;
    if (in_shape.empty()) {
      x = b.reshape(x, {1});
      dd = 0;
    }
    Values r = order_stat(b, x, dd, kind, k);
    return Values{b.reshape(r[0], out_shape), b.reshape(r[1], out_shape)};
  });
}

// median.dim, nanmedian.dim and mode: values and indices over one dim.
template <Kind K>
struct StatDim {
  static constexpr const char* kName = K == Kind::kMedian ? "median" : K == Kind::kNanMedian ? "nanmedian" : "mode";
  static StatMeta meta(const at::Tensor& self, int64_t dim, bool keepdim) {
    if constexpr (K != Kind::kMode) check_not_bool(self, "median_out");
    return stat_meta(kName, K, self, dim, 0, keepdim);
  }
  static void check_out(const at::Tensor& values, const at::Tensor& indices, const StatMeta&, const at::Tensor& self,
                        int64_t, bool) {
    check_outs(self, values, indices, kName);
  }
  static void impl(const at::Tensor& values, const at::Tensor& indices, const StatMeta& m, const at::Tensor& self,
                   int64_t, bool keepdim) {
    stat_impl(kName, K, self, m, 0, keepdim, values, indices);
  }
};

struct Kthvalue {
  static constexpr const char* kName = "kthvalue";
  static StatMeta meta(const at::Tensor& self, int64_t k, int64_t dim, bool keepdim) {
    check_not_bool(self, "kthvalue_cpu");
    return stat_meta(kName, Kind::kKth, self, dim, k, keepdim);
  }
  static void check_out(const at::Tensor& values, const at::Tensor& indices, const StatMeta&, const at::Tensor& self,
                        int64_t, int64_t, bool) {
    check_outs(self, values, indices, kName);
  }
  static void impl(const at::Tensor& values, const at::Tensor& indices, const StatMeta& m, const at::Tensor& self,
                   int64_t k, int64_t, bool keepdim) {
    stat_impl(kName, Kind::kKth, self, m, k, keepdim, values, indices);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("median", median);
  m.impl("nanmedian", nanmedian);
  register_variants<StatDim<Kind::kMedian>>(m, {"median.dim", "", "median.dim_values"});
  register_variants<StatDim<Kind::kNanMedian>>(m, {"nanmedian.dim", "", "nanmedian.dim_values"});
  register_variants<StatDim<Kind::kMode>>(m, {"mode", "", "mode.values"});
  register_variants<Kthvalue>(m, {"kthvalue", "", "kthvalue.values"});
}

}  // namespace
}  // namespace torch_tpu::ops
