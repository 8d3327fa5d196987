// repeat_interleave of a repeats tensor (repeat_interleave.Tensor, which
// the self_Tensor / self_int overloads reach): out[j] is the segment that
// position j falls in. The output size depends on the data, so unless
// output_size is given it costs one host sync, as on CPU.
#include <torch/library.h>

#include "ops/common.h"
#include "record/driver.h"

namespace torch_tpu::ops {

const record::SyncSite kRepeatInterleaveSync{"repeat_interleave", record::SyncReason::kDataDependentShape};
namespace {

// --- repeat_interleave ------------------------------------------------------

at::Tensor repeat_interleave_tensor(const at::Tensor& repeats, std::optional<c10::SymInt> output_size) {
  TORCH_CHECK(repeats.dim() == 1, "repeat_interleave only accept 1D vector as repeat");
  TORCH_CHECK(repeats.scalar_type() == c10::kLong || repeats.scalar_type() == c10::kInt,
              "repeats has to be Long or Int tensor");
  int64_t n = repeats.size(0);
  int64_t total;
  if (output_size.has_value()) {
    total = output_size->expect_int();
  } else {
    // The output size depends on the data: one host sync, as on CPU.
    kRepeatInterleaveSync();
    at::Tensor host = repeats.to(c10::kCPU).to(c10::kLong);
    const int64_t* p = host.const_data_ptr<int64_t>();
    total = 0;
    for (int64_t i = 0; i < n; ++i) {
      TORCH_CHECK(p[i] >= 0, "repeats can not be negative");
      total += p[i];
    }
  }
  at::Tensor out = empty_tpu({total}, repeats.scalar_type(), repeats.device());
  if (total == 0 || n == 0) return out;
  record::OpCall call("repeat_interleave");
  call.attr(total);
  call.input(repeats);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    // out[j] = number of segment ends <= j: a 1 at each end, then a prefix sum.
    Value ends = cumsum(b, b.convert(in[0], kS64), 0);
    Value marks =
        b.scatter(zero(b, kS64, {total}), b.reshape(ends, {n, 1}), one(b, kS64, {n}), {}, {0}, {0}, 1, BinaryOp::kAdd);
    return Values{cumsum(b, marks, 0)};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("repeat_interleave.Tensor", repeat_interleave_tensor); }

}  // namespace
}  // namespace torch_tpu::ops
