// Scans along a dim: cumsum / cumprod (functional, in-place and out=),
// cummax / cummin (the _cummax_helper / _cummin_helper kernels) and
// _logcumsumexp. cumsum/cumprod lower as an inclusive prefix scan with
// reduce_window (a window spanning the whole dim, padded on the low side
// with the identity), which is exact for integers and is the form XLA's TPU
// backend recognises as a scan; cummax/cummin are such scans too (of the
// values and of the positions that hit the running extreme), and
// _logcumsumexp is a Hillis-Steele scan of log-add-exp steps.
#include <ATen/native/Resize.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/shape/append.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

// ATen's result dtype: the dtype argument, else integers and bool widen to int64.
c10::ScalarType scan_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? c10::kLong : self.scalar_type();
}

// cumsum along the last dim of a tensor with room (generate()'s attention
// mask, shape/append.h), over its whole storage with the row length a
// runtime scalar: one program per storage size, not per prompt length.
// Each row's sums are the flat prefix sums less those before the row
// (exact in integers, where wrap-around cancels too).
bool cumsum_over_room(const at::Tensor& self, int64_t dim, const at::Tensor& out) {
  const int64_t room = room_of(self);
  if (room == 0 || dim != self.dim() - 1 || !out.sizes().equals(self.sizes())) return false;
  std::optional<at::Tensor> whole = whole_out(out, room);
  if (!whole) return false;
  const ElemType de = to_elem(out.scalar_type());
  record::OpCall call("cumsum_room");
  call.input(whole_of(self));
  call.scalar(self.size(dim), at::kLong);
  call.output(*whole);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(b.convert(in[0], de), ElemType::kS64);
    Value sums = cumsum(b, x, 0);
    auto num = [&](int64_t v) { return b.constant(static_cast<double>(v), ElemType::kS64, {room}); };
    Value len = b.broadcast_to(in[1], {room});
    Value i = b.iota({room}, 0, ElemType::kS64);
    Value start = b.binary(BinaryOp::kMul, b.binary(BinaryOp::kDiv, i, len), len);
    Value last = b.clamp(num(0), b.binary(BinaryOp::kSub, start, num(1)), num(room - 1));
    Value before = b.select(b.compare(start, num(0), Direction::kGt), gather_rows(b, sums, last), num(0));
    return Values{b.convert(b.binary(BinaryOp::kSub, sums, before), de)};
  });
  return true;
}

void scan_into(const at::Tensor& self, int64_t dim, bool prod, const at::Tensor& out) {
  if (!prod && cumsum_over_room(self, dim, out)) return;
  c10::ScalarType dtype = out.scalar_type();
  ElemType de = to_elem(dtype);
  // Half-precision floats accumulate in f32, like ATen's CPU kernels; bool in int64.
  ElemType acc = (dtype == c10::kBFloat16 || dtype == c10::kHalf) ? ElemType::kF32
                 : dtype == c10::kBool                            ? ElemType::kS64
                                                                  : de;
  record::OpCall call(prod ? "cumprod" : "cumsum");
  call.input(self);
  call.attr(dim).attr(static_cast<int64_t>(dtype));
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(b.convert(in[0], de), acc);
    int64_t r = b.type(x).rank();
    if (r == 0) return Values{x};
    int64_t n = b.dims(x)[dim];
    std::vector<int64_t> window(r, 1), strides(r, 1), dil(r, 1);
    std::vector<std::pair<int64_t, int64_t>> padding(r, {0, 0});
    window[dim] = n;
    padding[dim] = {n - 1, 0};
    Value init = prod ? one(b, acc) : zero(b, acc);
    return Values{b.reduce_window(x, init, window, strides, dil, dil, padding, prod ? BinaryOp::kMul : BinaryOp::kAdd)};
  });
}

// cumsum / cumprod in their three forms. The result's dtype is dtype= or
// else self's, with integers widened to int64; out= decides its own.
template <bool kProd>
struct Scan {
  static constexpr const char* kName = kProd ? "cumprod" : "cumsum";
  struct Meta : OutMeta {
    int64_t dim = 0;
  };
  static Meta meta(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
    Meta m;
    m.dim = wrap_dim(dim, self.dim());
    m.sizes = self.sizes().vec();
    m.dtype = scan_dtype(self, dtype);
    m.device = self.device();
    m.out_dtype = OutDtype::kOwn;
    m.operand_layout = false;
    return m;
  }
  static void check_out(const at::Tensor& out, const Meta&, const at::Tensor&, int64_t,
                        std::optional<c10::ScalarType> dtype) {
    if (dtype) check_structured_out(out, *dtype);
    // CPU's scan kernels dispatch on out's dtype and have no bool one.
    TORCH_CHECK_NOT_IMPLEMENTED(out.scalar_type() != c10::kBool, "\"", kName, "_out_cpu\" not implemented for 'Bool'");
  }
  // In place, the scan keeps self's dtype; only a dtype= that differs is refused.
  static void inplace_rule(const at::Tensor& self, const Meta&, int64_t, std::optional<c10::ScalarType> dtype) {
    if (dtype)
      TORCH_CHECK(self.scalar_type() == *dtype, "Bad in-place call: input tensor dtype ", self.dtype(),
                  " and output tensor dtype ", c10::scalarTypeToTypeMeta(*dtype), " should match");
  }
  static void impl(const at::Tensor& out, const Meta& m, const at::Tensor& self, int64_t,
                   std::optional<c10::ScalarType>) {
    scan_into(self, m.dim, kProd, out);
  }
};

// --- cummax / cummin ----------------------------------------------------------------
// CPU moves the index to j whenever x[j] is NaN or ties/beats the running
// extreme, i.e. whenever x[j] equals the running extreme at j (NaN once a
// NaN was seen). So indices are a running max of those j, and both outputs
// are plain reduce_window scans.

Value running(Builder& b, Value x, int64_t dim, Value init, BinaryOp kind) {
  int64_t r = b.type(x).rank();
  int64_t n = b.dims(x)[dim];
  std::vector<int64_t> window(r, 1), strides(r, 1), dil(r, 1);
  std::vector<std::pair<int64_t, int64_t>> padding(r, {0, 0});
  window[dim] = n;
  padding[dim] = {n - 1, 0};
  return b.reduce_window(x, init, window, strides, dil, dil, padding, kind);
}

template <bool kMax>
void cummaxmin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  int64_t d = wrap_dim(dim, self.dim());
  record::OpCall call(kMax ? "cummax" : "cummin");
  call.attr(d);
  call.input(self);
  call.output(values);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    if (b.type(x).rank() == 0) return Values{x, b.constant(0, ElemType::kS64)};
    BinaryOp ext = kMax ? BinaryOp::kMax : BinaryOp::kMin;
    ElemType et = b.elem(x);
    Value v;
    Value hit;
    if (ir::is_float(et)) {
      Value isnan = b.compare(x, x, Direction::kNe);
      Value clean = b.select(isnan, b.constant(kMax ? -INFINITY : INFINITY, et, b.dims(x)), x);
      Value ext_v = running(b, clean, d, kMax ? lowest(b, et) : highest(b, et), ext);
      Value nan_seen = running(b, b.convert(isnan, ElemType::kS32), d, b.constant(0, ElemType::kS32), BinaryOp::kMax);
      nan_seen = b.compare(nan_seen, b.constant(0, ElemType::kS32, b.dims(x)), Direction::kNe);
      v = b.select(nan_seen, b.constant(NAN, et, b.dims(x)), ext_v);
      hit = b.or_(isnan, b.compare(x, v, Direction::kEq));
    } else if (et == ElemType::kPred) {
      Value xi = b.convert(x, ElemType::kS32);
      Value vi = running(b, xi, d, b.constant(kMax ? 0 : 1, ElemType::kS32), ext);
      v = b.convert(vi, et);
      hit = b.compare(xi, vi, Direction::kEq);
    } else {
      v = running(b, x, d, kMax ? lowest(b, et) : highest(b, et), ext);
      hit = b.compare(x, v, Direction::kEq);
    }
    Value j = b.iota(b.dims(x), d, ElemType::kS64);
    Value cand = b.select(hit, j, b.constant(-1, ElemType::kS64, b.dims(x)));
    Value idx = running(b, cand, d, b.constant(-1, ElemType::kS64), BinaryOp::kMax);
    return Values{v, idx};
  });
}

// --- _logcumsumexp -----------------------------------------------------------------------
// log(exp(a) + exp(b)) as CPU computes it: infinities of equal sign stay put.
Value log_add_exp(Builder& b, Value x, Value y) {
  Value mn = b.min(x, y);
  Value mx = b.max(x, y);
  Value r = b.add(mx, b.log1p(b.exp(b.sub(mn, mx))));
  Value inf = full_like(b, std::numeric_limits<double>::infinity(), mn);
  Value infinite = b.compare(b.abs(mn), inf, Direction::kEq);
  Value keep = b.and_(b.compare(mn, mx, Direction::kEq), infinite);
  // NaN propagates explicitly: XLA:CPU's minimum/maximum need not.
  Value nan = b.or_(b.compare(x, x, Direction::kNe), b.compare(y, y, Direction::kNe));
  return b.select(nan, b.add(x, y), b.select(keep, x, r));
}
struct LogCumSumExp {
  static constexpr const char* kName = "logcumsumexp";
  struct Meta : OutMeta {
    int64_t dim = 0;
  };
  static Meta meta(const at::Tensor& self, int64_t dim) {
    check_float(self, "logcumsumexp_out_cpu");
    Meta m;
    m.dim = wrap_dim(dim, std::max<int64_t>(self.dim(), 1));
    m.sizes = self.sizes().vec();
    m.dtype = self.scalar_type();
    m.device = self.device();
    m.out_dtype = OutDtype::kExact;  // CPU refuses any other out dtype, a wider float too
    return m;
  }
  static void impl(const at::Tensor& out, const Meta& m, const at::Tensor& self, int64_t);
};

void LogCumSumExp::impl(const at::Tensor& out, const Meta& m, const at::Tensor& self, int64_t) {
  const int64_t d0 = m.dim;
  if (self.numel() == 0) return;
  // CPU accumulates float in double; an f64 scan here corrupted the heap
  // inside XLA:CPU for some shapes (e.g. [9, 4] along dim 0), so this stays
  // in opmath and the f32 backward (which cancels large terms) is ~1e-3 off.
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  Dims d = dims_of(self);
  Dims d1 = d.empty() ? Dims{1} : d;
  record::OpCall call("_logcumsumexp");
  call.attr(d0).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    // Hillis-Steele scan: log2(n) steps of y[i] = lae(y[i], y[i - k]).
    Value y = b.reshape(b.convert(in[0], e), d1);
    int64_t n = d1[d0];
    for (int64_t k = 1; k < n; k *= 2) {
      Dims start(d1.size(), 0), limit = d1, strides(d1.size(), 1);
      limit[d0] = n - k;
      Value head = b.slice(y, start, limit, strides);
      Dims lo(d1.size(), 0), hi(d1.size(), 0), interior(d1.size(), 0);
      lo[d0] = k;
      Value shifted = b.pad(head, b.constant(-std::numeric_limits<double>::infinity(), e), lo, hi, interior);
      y = log_add_exp(b, y, shifted);
    }
    return Values{b.reshape(y, d)};
  });
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Scan<false>>(m, "cumsum");
  register_variants<Scan<true>>(m, "cumprod");
  m.impl("_cummax_helper", cummaxmin_helper<true>);
  m.impl("_cummin_helper", cummaxmin_helper<false>);
  register_variants<LogCumSumExp>(m, {"_logcumsumexp", "", "_logcumsumexp.out"});
}

}  // namespace
}  // namespace torch_tpu::ops
