// take and put_: both treat self as flattened in row-major order and
// compose onto advanced indexing of the flat tensor (index / index_put_),
// which gives negative-index wrapping and IndexError bounds checks.
#include <ATen/ops/index.h>
#include <ATen/ops/index_put.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

// --- take / put_ ------------------------------------------------------------------
// Both treat self as flattened in row-major order; advanced indexing on the
// flat tensor gives negative-index wrapping and IndexError bounds checks.

struct Take {
  static constexpr const char* kName = "take";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& index) {
    TORCH_CHECK(index.scalar_type() == c10::kLong, "take(): Expected a long tensor for index, but got ",
                index.scalar_type());
    TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "take(): tried to take from an empty tensor");
    return OutMeta{index.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kCastable, false};
  }
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const at::Tensor&) {
    TORCH_CHECK(out.scalar_type() == self.scalar_type(),
                "take(): self and out expected to have the same dtype, but got self.dtype = ", self.scalar_type(),
                " and out.dtype = ", out.scalar_type());
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const at::Tensor& index) {
    c10::List<std::optional<at::Tensor>> idx;
    idx.push_back(index.reshape({-1}));
    if (out.is_contiguous()) {
      at::Tensor flat = out.view({-1});
      at::index_out(flat, self.reshape({-1}), idx);
      return;
    }
    out.copy_(at::index(self.reshape({-1}), idx).view(index.sizes()));  // a strided out=
  }
};

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
  register_variants<Take>(m, {"take", "", "take.out"});
  m.impl("put_", put_);
}

}  // namespace
}  // namespace torch_tpu::ops
