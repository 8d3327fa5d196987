// searchsorted / bucketize, bincount, histc, unique (_unique, _unique2,
// unique_consecutive) and multinomial.
//
// searchsorted is an unrolled binary search (ceil(log2(M + 1)) gather
// steps), with ATen's comparisons so NaNs land at the end. unique runs on
// device (sort, adjacent difference, prefix sum); the only host sync is a
// scalar - the number of unique values - that fixes the output size.
// bincount syncs for the input's min/max (its length and CPU's negative
// check). multinomial draws from the tpu generator: inverse-CDF sampling
// with replacement, Gumbel top-k without. Its CPU data checks (negative,
// non-finite or all-zero rows) would need a sync per call and are not done.
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <mutex>

#include "aten/generator.h"
#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

constexpr ElemType kS64 = ElemType::kS64;

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

// --- bincount ----------------------------------------------------------------------------

at::Tensor bincount(const at::Tensor& self, const std::optional<at::Tensor>& weights_opt, int64_t minlength) {
  at::Tensor weights = weights_opt.value_or(at::Tensor());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isIntegralType(self.scalar_type(), /*includeBool=*/false),
                              "\"_bincount_cpu\" not implemented for '", c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(minlength >= 0, "minlength should be >= 0");
  TORCH_CHECK(self.dim() == 1, "bincount only supports 1-d non-negative integral inputs.");
  TORCH_CHECK(!weights.defined() || (weights.dim() == 1 && weights.size(0) == self.size(0)),
              "weights should be 1-d and have the same length as input");
  auto odt = !weights.defined() ? c10::kLong : weights.scalar_type() == c10::kFloat ? c10::kFloat : c10::kDouble;
  int64_t n = self.numel();
  int64_t len = minlength;
  if (n > 0) {
    // One small sync: the min (CPU's negative check) and max (the length).
    at::Tensor mm = empty_tpu({2}, c10::kLong, self.device());
    record::OpCall call("bincount_minmax");
    call.input(self);
    call.output(mm);
    call.run([&](Builder& b, const Values& in) {
      Value x = b.convert(in[0], kS64);
      Value lo = b.reduce(x, highest(b, kS64), {0}, BinaryOp::kMin);
      Value hi = b.reduce(x, lowest(b, kS64), {0}, BinaryOp::kMax);
      return Values{b.concatenate({b.reshape(lo, {1}), b.reshape(hi, {1})}, 0)};
    });
    at::Tensor h = mm.cpu();
    TORCH_CHECK(h[0].item<int64_t>() >= 0, "bincount only supports 1-d non-negative integral inputs.");
    len = std::max(len, h[1].item<int64_t>() + 1);
  }
  at::Tensor out = empty_tpu({len}, odt, self.device());
  record::OpCall call("bincount");
  call.attr(len).attr(weights.defined()).attr(static_cast<int64_t>(odt));
  call.input(self);
  if (weights.defined()) call.input(weights);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(odt);
    Value acc = zero(b, e, {len});
    if (n == 0) return Values{acc};
    Value w = weights.defined() ? b.convert(in[1], e) : one(b, e, {n});
    return Values{scatter_rows(b, acc, in[0], w, BinaryOp::kAdd)};
  });
  return out;
}

// --- histc -------------------------------------------------------------------------------

at::Tensor& histc_out(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max,
                      at::Tensor& out) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"histogram_cpu\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  TORCH_CHECK(bins > 0, "torch.histc(): bins must be > 0, but got ", bins, " for dimension 0");
  double lo_v = min.toDouble(), hi_v = max.toDouble();
  TORCH_CHECK(std::isfinite(lo_v) && std::isfinite(hi_v), "torch.histc(): range of [", lo_v, ", ", hi_v,
              "] is not finite");
  TORCH_CHECK(lo_v <= hi_v, "torch.histc(): max must be larger than min");
  TORCH_CHECK(out.scalar_type() == self.scalar_type(),
              "torch.histc: input tensor and hist tensor should have the same "
              "dtype, but got input ",
              self.scalar_type(), " and hist ", out.scalar_type());
  at::native::resize_output(out, {bins});
  auto ct = opmath(self.scalar_type());
  int64_t n = self.numel();
  record::OpCall call("histc");
  call.attr(bins).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.scalar(min, ct);
  call.scalar(max, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value acc = zero(b, e, {bins});
    if (n == 0) return Values{acc};
    Value x = b.reshape(b.convert(in[0], e), {n});
    Value lo = in[1], hi = in[2];
    // min == max: the data's range; still equal: widen by one each side.
    Value same = b.compare(lo, hi, Direction::kEq);
    lo = b.select(same, b.reduce(x, highest(b, e), {0}, BinaryOp::kMin), lo);
    hi = b.select(same, b.reduce(x, lowest(b, e), {0}, BinaryOp::kMax), hi);
    Value same2 = b.compare(lo, hi, Direction::kEq);
    lo = b.select(same2, b.sub(lo, one(b, e)), lo);
    hi = b.select(same2, b.add(hi, one(b, e)), hi);
    Value lob = b.broadcast_to(lo, {n}), hib = b.broadcast_to(hi, {n});
    Value nb = b.constant(static_cast<double>(bins), e, {n});
    Value pos_f = b.div(b.mul(b.sub(x, lob), nb), b.sub(hib, lob));
    Value pos = b.clamp(zero(b, kS64), b.convert(b.floor(pos_f), kS64), b.constant(bins, kS64));
    // Correct against the edges linspace(lo, hi, bins + 1) computes, as ATen does.
    Value step = b.div(b.sub(hi, lo), b.constant(static_cast<double>(bins), e));
    auto edge = [&](Value i) {
      Value fi = b.convert(i, e);
      Value stepb = b.broadcast_to(step, {n});
      Value from_lo = b.add(lob, b.mul(fi, stepb));
      Value from_hi = b.sub(hib, b.mul(b.sub(nb, fi), stepb));
      return b.select(b.compare(i, b.constant((bins + 1) / 2, kS64, {n}), Direction::kLt), from_lo, from_hi);
    };
    Value onei = one(b, kS64, {n});
    pos = b.select(b.compare(x, edge(pos), Direction::kLt), b.sub(pos, onei), pos);
    Value nxt = b.add(pos, onei);
    pos = b.select(
        b.and_(b.compare(nxt, b.constant(bins, kS64, {n}), Direction::kLt), b.compare(x, edge(nxt), Direction::kGe)),
        nxt, pos);
    pos = b.clamp(zero(b, kS64), pos, b.constant(bins - 1, kS64));
    Value inside = b.and_(b.compare(x, lob, Direction::kGe), b.compare(x, hib, Direction::kLe));
    Value w = b.select(inside, one(b, e, {n}), zero(b, e, {n}));
    return Values{scatter_rows(b, acc, pos, w, BinaryOp::kAdd)};
  });
  return out;
}
at::Tensor histc(const at::Tensor& self, int64_t bins, const c10::Scalar& min, const c10::Scalar& max) {
  at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device());
  return histc_out(self, bins, min, max, out);
}

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

// --- multinomial -------------------------------------------------------------------------

at::Tensor& multinomial_out(const at::Tensor& self, int64_t num_samples, bool replacement,
                            std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()),
              "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
  TORCH_CHECK(num_samples > 0, "cannot sample n_sample <= 0 samples");
  int64_t cats = self.size(-1);
  TORCH_CHECK(replacement || num_samples <= cats,
              "cannot sample n_sample > prob_dist.size(-1) samples without "
              "replacement");
  TORCH_CHECK(cats <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
  TORCH_CHECK(out.scalar_type() == c10::kLong, "multinomial expects Long tensor out, got: ", out.scalar_type());
  std::vector<int64_t> oshape =
      self.dim() == 1 ? std::vector<int64_t>{num_samples} : std::vector<int64_t>{self.size(0), num_samples};
  at::native::resize_output(out, oshape);
  int64_t rows = self.dim() == 1 ? 1 : self.size(0);
  if (out.numel() == 0) return out;
  int64_t words = replacement ? rows * num_samples : rows * cats;
  TpuGeneratorImpl* g = get_generator(gen, self.device().index());
  uint64_t seed, offset;
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    seed = g->current_seed();
    offset = g->advance((words + 3) / 4 * 4);
  }
  record::OpCall call("multinomial");
  call.attr(num_samples).attr(replacement);
  call.scalar(c10::Scalar(static_cast<int64_t>(seed)), c10::kLong);
  call.scalar(c10::Scalar(static_cast<int64_t>(offset)), c10::kLong);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = self.scalar_type() == c10::kDouble ? ElemType::kF64 : ElemType::kF32;
    Value p = b.reshape(b.convert(in[2], e), {rows, cats});
    Dims ud = replacement ? Dims{rows, num_samples} : Dims{rows, cats};
    Value st = b.concatenate({b.reshape(b.bitcast_convert(in[0], ElemType::kU64), {1}),
                              b.reshape(b.bitcast_convert(in[1], ElemType::kU64), {1})},
                             0);
    Value bits = b.rng_bit_generator(st, ud, ElemType::kU32)[1];
    Value top = b.shr_logical(bits, b.constant(9, ElemType::kU32, ud));
    // Uniform in (0, 1): (k + 0.5) / 2^23, exact in f32.
    Value u = b.mul(b.add(b.convert(top, e), b.constant(0.5, e, ud)), b.constant(std::ldexp(1.0, -23), e, ud));
    Value res;
    if (replacement) {
      // Category = number of CDF entries <= u * total; zero-probability
      // categories have an empty interval and are never picked.
      Value cdf = cumsum(b, p, 1);
      Value total = b.slice(cdf, {0, cats - 1}, {rows, cats}, {1, 1});
      Value ut = b.mul(u, b.broadcast_in_dim(b.reshape(total, {rows}), ud, {0}));
      Dims d3{rows, num_samples, cats};
      Value le = b.compare(b.broadcast_in_dim(cdf, d3, {0, 2}), b.broadcast_in_dim(ut, d3, {0, 1}), Direction::kLe);
      Value cnt = b.reduce(b.convert(le, kS64), zero(b, kS64), {2}, BinaryOp::kAdd);
      // Rounding can put u * total at the very top: take the last positive category.
      Value pos = b.compare(p, zero(b, e, {rows, cats}), Direction::kGt);
      Value last = b.reduce(b.select(pos, b.iota({rows, cats}, 1, kS64), b.constant(-1, kS64, {rows, cats})),
                            lowest(b, kS64), {1}, BinaryOp::kMax);
      res = b.min(cnt, b.broadcast_in_dim(last, ud, {0}));
    } else {
      // Gumbel top-k: log p - log(-log u); zero-probability keys are -inf.
      Value gumbel = b.neg(b.log(b.neg(b.log(u))));
      Value key = b.add(b.log(p), gumbel);
      Values s = b.sort({key, b.iota(ud, 1, kS64)}, 1, true);
      res = b.slice(s[1], {0, 0}, {rows, num_samples}, {1, 1});
    }
    return Values{b.reshape(res, Dims(oshape.begin(), oshape.end()))};
  });
  return out;
}
at::Tensor multinomial(const at::Tensor& self, int64_t num_samples, bool replacement,
                       std::optional<at::Generator> gen) {
  at::Tensor out = empty_tpu({0}, c10::kLong, self.device());
  return multinomial_out(self, num_samples, replacement, gen, out);
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
  m.impl("bincount", bincount);
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
  m.impl("_unique2", unique2);
  m.impl("_unique", unique1);
  m.impl("unique_consecutive", unique_consecutive);
  m.impl("multinomial", multinomial);
  m.impl("multinomial.out", multinomial_out);
}

}  // namespace
}  // namespace torch_tpu::ops
