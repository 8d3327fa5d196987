// take and put_: both treat self as flattened in row-major order and
// compose onto advanced indexing of the flat tensor (index / index_put_),
// which gives negative-index wrapping and IndexError bounds checks.
#include <ATen/ops/index.h>
#include <ATen/ops/index_put.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

// --- take / put_ ------------------------------------------------------------------
// Both treat self as flattened in row-major order; advanced indexing on the
// flat tensor gives negative-index wrapping and IndexError bounds checks.

at::Tensor take_fn(const at::Tensor& self, const at::Tensor& index) {
  TORCH_CHECK(index.scalar_type() == c10::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "take(): tried to take from an empty tensor");
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(index.reshape({-1}));
  return at::index(self.reshape({-1}), idx).view(index.sizes());
}
at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  at::Tensor r = take_fn(self, index);
  prepare_out(out, r.sizes(), self.scalar_type(), "take");
  out.copy_(r);
  return out;
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  TORCH_CHECK(index.scalar_type() == c10::kLong, "put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "put_(): self and source expected to have the same "
              "dtype, but got self.dtype = ",
              self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK_INDEX(index.numel() == source.numel(),
                    "put_(): Expected source and index to have the same number of "
                    "elements, but got source.numel() = ",
                    source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "put_(): Tried to put elements into an empty tensor");
  if (index.numel() == 0) return self;
  at::Tensor flat = self.reshape({-1}).clone();
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(index.reshape({-1}));
  flat.index_put_(idx, source.reshape({-1}), accumulate);
  self.copy_(flat.view(self.sizes()));
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("take", take_fn);
  m.impl("take.out", take_out);
  m.impl("put_", put_);
}

}  // namespace
}  // namespace torch_tpu::ops
