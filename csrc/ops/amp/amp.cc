// GradScaler's kernels: _amp_foreach_non_finite_check_and_unscale_ and
// _amp_update_scale_. Each is one program on device, so GradScaler never
// syncs with the host until optimizer.step() reads found_inf.
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

// Half-precision values are scaled in f32, like ATen's opmath.
ElemType compute_elem(c10::ScalarType t) {
  return (t == c10::kHalf || t == c10::kBFloat16) ? ElemType::kF32 : to_elem(t);
}

// True iff any element of x is inf or NaN (x - x is NaN exactly then).
Value any_non_finite(Builder& b, Value x) {
  Value d = b.sub(x, x);
  Value bad = b.compare(d, d, Direction::kNe);
  std::vector<int64_t> all(b.dims(x).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  if (all.empty()) return bad;
  return b.reduce(bad, b.constant(0, ElemType::kPred), all, BinaryOp::kOr);
}

void check_scale_tensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, what, " must be a tpu tensor.");
  TORCH_CHECK(t.numel() == 1, what, " must be a 1-element tensor.");
  TORCH_CHECK(t.scalar_type() == c10::kFloat, what, " must be a float tensor.");
}

void non_finite_check_and_unscale_(at::TensorList self, at::Tensor& found_inf, const at::Tensor& inv_scale) {
  if (self.empty()) return;
  check_scale_tensor(inv_scale, "inv_scale");
  check_scale_tensor(found_inf, "found_inf");
  std::vector<at::Tensor> ts;
  for (const at::Tensor& t : self) {
    TORCH_CHECK(t.device() == inv_scale.device(), "scaled_grads must be on the same device as inv_scale");
    TORCH_CHECK(t.layout() == c10::kStrided, "one of scaled_grads was not a strided tensor.");
    TORCH_CHECK(c10::isFloatingType(t.scalar_type()),
                "_amp_foreach_non_finite_check_and_unscale_: ", "expected floating point tensors, got ",
                t.scalar_type());
    if (t.numel() > 0) ts.push_back(t);
  }
  if (ts.empty()) return;
  record::OpCall call("amp_unscale");
  call.attr(static_cast<int64_t>(ts.size()));
  for (const at::Tensor& t : ts) call.input(t);
  call.input(found_inf);
  call.input(inv_scale);
  for (const at::Tensor& t : ts) call.output(t);
  call.output(found_inf);
  size_t n = ts.size();
  call.run([&](Builder& b, const Values& in) {
    Value found = b.reshape(in[n], {});
    Value inv = b.reshape(in[n + 1], {});
    Value any_bad = b.constant(0, ElemType::kPred);
    Values outs;
    for (size_t i = 0; i < n; ++i) {
      ElemType ce = compute_elem(ts[i].scalar_type());
      Value x = b.convert(in[i], ce);
      any_bad = b.or_(any_bad, any_non_finite(b, x));
      outs.push_back(b.mul(x, b.broadcast_to(b.convert(inv, ce), b.dims(x))));
    }
    outs.push_back(b.select(any_bad, b.constant(1.0, ElemType::kF32), found));
    return outs;
  });
}

// scale *= backoff on overflow (tracker reset); after `interval` clean
// steps in a row, scale *= growth (only if that stays finite).
at::Tensor& update_scale_(at::Tensor& self, at::Tensor& growth_tracker, const at::Tensor& found_inf,
                          double growth_factor, double backoff_factor, int64_t growth_interval) {
  check_scale_tensor(self, "current_scale");
  check_scale_tensor(found_inf, "found_inf");
  TORCH_CHECK(growth_tracker.device() == self.device(), "growth_tracker must be on the same device as current_scale");
  TORCH_CHECK(growth_tracker.numel() == 1, "growth_tracker must be a 1-element tensor.");
  TORCH_CHECK(growth_tracker.scalar_type() == c10::kInt, "growth_tracker must be an int tensor.");
  record::OpCall call("amp_update_scale");
  call.input(self);
  call.input(growth_tracker);
  call.input(found_inf);
  call.scalar(growth_factor, c10::kFloat);
  call.scalar(backoff_factor, c10::kFloat);
  call.scalar(growth_interval, c10::kInt);
  call.output(self);
  call.output(growth_tracker);
  call.run([&](Builder& b, const Values& in) {
    Value scale = b.reshape(in[0], {});
    Value tracker = b.reshape(in[1], {});
    Value found = b.compare(b.reshape(in[2], {}), b.constant(0.0, ElemType::kF32), Direction::kNe);
    Value zero_i = b.constant(0, ElemType::kS32);
    Value succ = b.add(tracker, b.constant(1, ElemType::kS32));
    Value grow_now = b.compare(succ, in[5], Direction::kEq);
    Value grown = b.mul(scale, in[3]);
    Value gd = b.sub(grown, grown);
    Value grown_finite = b.compare(gd, gd, Direction::kEq);
    Value clean_scale = b.select(b.and_(grow_now, grown_finite), grown, scale);
    Value clean_tracker = b.select(grow_now, zero_i, succ);
    Value new_scale = b.select(found, b.mul(scale, in[4]), clean_scale);
    Value new_tracker = b.select(found, zero_i, clean_tracker);
    return Values{new_scale, new_tracker};
  });
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_amp_foreach_non_finite_check_and_unscale_", non_finite_check_and_unscale_);
  m.impl("_amp_update_scale_", update_scale_);
}

}  // namespace
}  // namespace torch_tpu::ops
