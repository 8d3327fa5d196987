// bincount and histc: each scatter-adds one count (or weight) per element
// into its bin. bincount syncs for the input's min/max (its length and
// CPU's negative check); histc's bins are fixed, so it needs no sync.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"
#include "record/driver.h"

namespace torch_tpu::ops {

const record::SyncSite kBincountSync{"bincount", record::SyncReason::kDataDependentShape};
namespace {

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
    kBincountSync();
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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("bincount", bincount);
  m.impl("histc", histc);
  m.impl("histc.out", histc_out);
}

}  // namespace
}  // namespace torch_tpu::ops
