// segment_reduce (sum, mean, max, min, prod; + its backward,
// _segment_reduce_backward) over lengths or offsets along the last dim of
// lengths/offsets. Validating lengths (when !unsafe) syncs with the host,
// as on CPU; the reduction itself does not.
#include <torch/library.h>

#include <limits>
#include <vector>

#include "ops/common.h"
#include "record/driver.h"

namespace torch_tpu::ops {

const record::SyncSite kSegmentReduceSync{"segment_reduce", record::SyncReason::kHostRead};
using ir::Dims;

namespace {

// --- segment_reduce ---------------------------------------------------------
// Segments along `axis` (the last dim of lengths/offsets) as a membership
// mask M[outer..., S, L]: every reduction is a masked reduce over L, and
// the backward reads each position's segment value with a masked reduce
// over S (a position is in at most one segment).

enum class SegRed { kSum, kMean, kMax, kMin, kProd };

SegRed seg_reduction(c10::string_view r) {
  if (r == "sum") return SegRed::kSum;
  if (r == "mean") return SegRed::kMean;
  if (r == "max") return SegRed::kMax;
  if (r == "min") return SegRed::kMin;
  if (r == "prod") return SegRed::kProd;
  TORCH_CHECK(false, "reduce argument must be either sum, prod, mean, amax or amin, got ", r);
}

struct SegArgs {
  at::Tensor bounds;  // lengths or offsets
  bool offsets = false;
  int64_t axis = 0;
  int64_t segments = 0;
};

SegArgs seg_args(const at::Tensor& data, const std::optional<at::Tensor>& lengths,
                 const std::optional<at::Tensor>& offsets, int64_t axis_in, bool check_lengths) {
  SegArgs a;
  a.axis = wrap_dim(axis_in, data.dim());
  TORCH_CHECK((lengths.has_value() && lengths->defined()) || (offsets.has_value() && offsets->defined()),
              "segment_reduce(): Either lengths or offsets must be defined.");
  a.offsets = offsets.has_value() && offsets->defined();
  a.bounds = a.offsets ? *offsets : *lengths;
  const char* what = a.offsets ? "offsets" : "lengths";
  TORCH_CHECK(data.dim() >= a.bounds.dim());
  TORCH_CHECK(a.axis == a.bounds.dim() - 1, "segment_reduce(): Expected axis to be the last dimension of ", what,
              " but got ", a.axis, ".");
  TORCH_CHECK(a.bounds.scalar_type() == c10::kLong || a.bounds.scalar_type() == c10::kInt, what,
              " must be an int or long tensor");
  for (int64_t i = 0; i < a.axis; ++i)
    TORCH_CHECK(a.bounds.size(i) == data.size(i), "segment_reduce(): ", what, " and data disagree in dim ", i);
  a.segments = a.bounds.size(a.axis) - (a.offsets ? 1 : 0);
  TORCH_CHECK(a.segments >= 0, "segment_reduce(): offsets must not be empty");
  if (check_lengths && !a.offsets) {
    // CPU validates lengths against the data (a host sync there too).
    kSegmentReduceSync();
    at::Tensor h = a.bounds.to(c10::kCPU).to(c10::kLong);
    TORCH_CHECK(h.numel() == 0 || h.min().item<int64_t>() >= 0, "lengths contains negative value!");
    TORCH_CHECK(h.sum({-1}).eq(data.size(a.axis)).all().item<bool>(),
                "segment_reduce(): Expected all rows of lengths along axis to sum to data.size(lengths.dim()-1) "
                "when !unsafe.");
  }
  return a;
}

// Segment starts and ends [outer..., S] (s64) from lengths or offsets.
std::pair<Value, Value> seg_bounds(Builder& b, Value bounds, bool offsets, int64_t axis, int64_t S) {
  Value v = b.convert(bounds, kS64);
  Dims bd = b.dims(v);
  Dims st(bd.size(), 1), lo(bd.size(), 0), hi = bd;
  if (offsets) {
    hi[axis] = S;
    Value starts = b.slice(v, lo, hi, st);
    lo[axis] = 1;
    hi[axis] = S + 1;
    return {starts, b.slice(v, lo, hi, st)};
  }
  Value ends = cumsum(b, v, axis);
  return {b.sub(ends, v), ends};
}

Dims seq(int64_t lo, int64_t hi) { return iota_dims(lo, hi); }

// Membership mask [outer..., S, L].
Value seg_mask(Builder& b, Value starts, Value ends, int64_t axis, int64_t L) {
  Dims sd = b.dims(starts);
  Dims md = sd;
  md.push_back(L);
  Value pos = b.iota(md, axis + 1, kS64);
  Value s = b.broadcast_in_dim(starts, md, seq(0, axis + 1));
  Value e = b.broadcast_in_dim(ends, md, seq(0, axis + 1));
  return b.and_(b.compare(s, pos, Direction::kLe), b.compare(pos, e, Direction::kLt));
}

// `x` [outer..., L, inner...] broadcast to [outer..., S, L, inner...].
Value spread_data(Builder& b, Value x, int64_t axis, int64_t S) {
  Dims xd = b.dims(x), td;
  Dims map;
  for (int64_t i = 0; i < static_cast<int64_t>(xd.size()); ++i) {
    if (i == axis) td.push_back(S);
    td.push_back(xd[i]);
    map.push_back(i < axis ? i : i + 1);
  }
  return b.broadcast_in_dim(x, td, map);
}

// `y` [outer..., S, inner...] broadcast to [outer..., S, L, inner...].
Value spread_out(Builder& b, Value y, int64_t axis, int64_t L) {
  Dims yd = b.dims(y), td, map;
  for (int64_t i = 0; i < static_cast<int64_t>(yd.size()); ++i) {
    td.push_back(yd[i]);
    if (i == axis) td.push_back(L);
    map.push_back(i <= axis ? i : i + 1);
  }
  return b.broadcast_in_dim(y, td, map);
}

Value spread_mask(Builder& b, Value m, const Dims& full) {
  return b.broadcast_in_dim(m, full, seq(0, b.dims(m).size()));
}

at::Tensor segment_reduce(const at::Tensor& data, c10::string_view reduce, const std::optional<at::Tensor>& lengths,
                          const std::optional<at::Tensor>& indices, const std::optional<at::Tensor>& offsets,
                          int64_t axis, bool unsafe, const std::optional<c10::Scalar>& initial) {
  TORCH_CHECK(!(indices.has_value() && indices->defined()),
              "segment_reduce(): indices based reduction is not supported yet.");
  SegRed red = seg_reduction(reduce);
  TORCH_CHECK(c10::isFloatingType(data.scalar_type()), "\"_segment_reduce_cpu\" not implemented for '",
              c10::toString(data.scalar_type()), "'");
  SegArgs a = seg_args(data, lengths, offsets, axis, !unsafe);
  std::vector<int64_t> oshape(data.sizes().begin(), data.sizes().end());
  oshape[a.axis] = a.segments;
  at::Tensor out = empty_tpu(oshape, data.scalar_type(), data.device());
  if (out.numel() == 0) return out;
  int64_t L = data.size(a.axis), S = a.segments, ax = a.axis;
  bool off = a.offsets, has_init = initial.has_value();
  record::OpCall call("segment_reduce");
  call.attr(static_cast<int64_t>(red)).attr(ax).attr(off).attr(has_init);
  call.input(data);
  call.input(a.bounds);
  if (has_init) call.scalar(*initial, data.scalar_type());
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = b.elem(in[0]);
    auto [starts, ends] = seg_bounds(b, in[1], off, ax, S);
    Value m = seg_mask(b, starts, ends, ax, L);
    Value xs = spread_data(b, in[0], ax, S);
    Dims full = b.dims(xs);
    Value mb = spread_mask(b, m, full);
    Value ident = red == SegRed::kMax    ? lowest(b, e)
                  : red == SegRed::kMin  ? highest(b, e)
                  : red == SegRed::kProd ? one(b, e)
                                         : zero(b, e);
    BinaryOp comb = red == SegRed::kMax    ? BinaryOp::kMax
                    : red == SegRed::kMin  ? BinaryOp::kMin
                    : red == SegRed::kProd ? BinaryOp::kMul
                                           : BinaryOp::kAdd;
    Value r = b.reduce(b.select(mb, xs, b.broadcast_to(ident, full)), ident, {ax + 1}, comb);
    Dims od = b.dims(r);
    if (has_init) r = b.binary(comb, b.broadcast_to(in[2], od), r);
    if (red == SegRed::kMean) {
      Value len = b.convert(b.broadcast_in_dim(b.sub(ends, starts), od, seq(0, ax + 1)), e);
      Value pos = b.compare(len, zero(b, e, od), Direction::kGt);
      Value q = b.select(pos, b.div(r, len), r);
      // An empty segment without an initial value has no mean.
      if (!has_init) q = b.select(pos, q, b.constant(std::numeric_limits<double>::quiet_NaN(), e, od));
      r = q;
    }
    return Values{r};
  });
  return out;
}

at::Tensor segment_reduce_backward(const at::Tensor& grad, const at::Tensor& output, const at::Tensor& data,
                                   c10::string_view reduce, const std::optional<at::Tensor>& lengths,
                                   const std::optional<at::Tensor>& offsets, int64_t axis,
                                   const std::optional<c10::Scalar>& initial) {
  SegRed red = seg_reduction(reduce);
  SegArgs a = seg_args(data, lengths, offsets, axis, false);
  at::Tensor gi = empty_tpu(data.sizes(), grad.scalar_type(), data.device());
  int64_t L = data.size(a.axis), S = a.segments, ax = a.axis;
  bool off = a.offsets, has_init = initial.has_value();
  record::OpCall call("segment_reduce_backward");
  call.attr(static_cast<int64_t>(red)).attr(ax).attr(off).attr(has_init);
  call.input(grad);
  call.input(output);
  call.input(data);
  call.input(a.bounds);
  if (has_init && red == SegRed::kProd) call.scalar(*initial, data.scalar_type());
  call.output(gi);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[2], b.elem(in[0]));
    ElemType e = b.elem(x);
    Dims xd = b.dims(x);
    if (b.type(x).numel() == 0 || S == 0) return Values{zero(b, e, xd)};
    auto [starts, ends] = seg_bounds(b, in[3], off, ax, S);
    Value m = seg_mask(b, starts, ends, ax, L);
    Value xs = spread_data(b, x, ax, S);
    Dims full = b.dims(xs);
    Value mb = spread_mask(b, m, full);
    Value zf = zero(b, e, full);
    // Each position's value of a per-segment tensor [outer..., S, inner...].
    auto at_pos = [&](Value y) {
      return b.reduce(b.select(mb, spread_out(b, b.convert(y, e), ax, L), zf), zero(b, e), {ax}, BinaryOp::kAdd);
    };
    Value g = at_pos(in[0]);
    Value zx = zero(b, e, xd);
    if (red == SegRed::kSum) return Values{g};
    if (red == SegRed::kMean) {
      Value len = b.convert(b.sub(ends, starts), e);
      Dims ld = b.dims(len);
      Value lenp = at_pos(b.broadcast_in_dim(len, b.dims(in[0]), seq(0, ax + 1)));
      Value pos = b.compare(lenp, zx, Direction::kGt);
      return Values{b.select(pos, b.div(g, b.select(pos, lenp, one(b, e, xd))), zx)};
    }
    Value outs = spread_out(b, b.convert(in[1], e), ax, L);
    if (red == SegRed::kMax || red == SegRed::kMin) {
      Value hit = b.and_(mb, b.or_(b.compare(xs, xs, Direction::kNe), b.compare(xs, outs, Direction::kEq)));
      Value cnt = b.reduce(b.select(hit, one(b, e, full), zf), zero(b, e), {ax + 1}, BinaryOp::kAdd);
      Value cntp = at_pos(cnt);
      Value hitp = b.reduce(hit, b.constant(0, ElemType::kPred), {ax}, BinaryOp::kOr);
      Value gi = b.select(hitp, g, zx);
      // CPU averages only the positive gradients over tied extremes.
      Value split = b.and_(b.compare(cntp, b.constant(2, e, xd), Direction::kGe), b.compare(gi, zx, Direction::kGt));
      return Values{b.select(split, b.div(gi, b.select(split, cntp, one(b, e, xd))), gi)};
    }
    // prod: g * out / x, or for x == 0 / NaN the product of the other elements.
    Value outp = at_pos(in[1]);
    Value plain = b.div(b.mul(g, outp), x);
    Value sid_all = b.iota(b.dims(m), ax, kS64);
    Value sid = b.reduce(b.select(m, sid_all, b.constant(-1, kS64, b.dims(m))), b.constant(-1, kS64), {ax},
                         BinaryOp::kMax);  // [outer..., L]
    Dims pd = b.dims(sid);
    pd.push_back(L);  // [outer..., Lj, Lk]
    Value sj = b.broadcast_in_dim(sid, pd, seq(0, ax + 1));
    Dims kmap = seq(0, ax);
    kmap.push_back(ax + 1);
    Value sk = b.broadcast_in_dim(sid, pd, kmap);
    Value same = b.and_(b.compare(sj, sk, Direction::kEq),
                        b.compare(b.iota(pd, ax, kS64), b.iota(pd, ax + 1, kS64), Direction::kNe));
    Value xk = spread_data(b, x, ax, L);  // [outer..., Lj, Lk, inner...] with data on Lk
    Dims kd = b.dims(xk);
    Value sameb = spread_mask(b, same, kd);
    Value excl = b.reduce(b.select(sameb, xk, one(b, e, kd)), one(b, e), {ax + 1}, BinaryOp::kMul);
    if (has_init) excl = b.mul(excl, b.broadcast_to(b.convert(in[4], e), xd));
    Value special = b.or_(b.compare(x, x, Direction::kNe), b.compare(x, zx, Direction::kEq));
    Value inseg = b.reduce(mb, b.constant(0, ElemType::kPred), {ax}, BinaryOp::kOr);
    Value r = b.select(special, b.mul(g, excl), plain);
    return Values{b.select(inseg, r, zx)};
  });
  return gi;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("segment_reduce", segment_reduce);
  m.impl("_segment_reduce_backward", segment_reduce_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
