// hash_tensor (mode 0, the only one): XOR of the elements' bits over the
// reduced dims, with each element first widened to 64 bits as CPU does
// (floats to float64, integers and bool to int64), as a uint64 tensor.
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
using ir::Dims;

namespace {

at::Tensor& hash_tensor_out(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim, int64_t mode, at::Tensor& out) {
  TORCH_CHECK(mode == 0, "hash_tensor: only mode 0 (xor_sum) is supported, got ", mode);
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "hash_tensor: complex inputs are not supported");
  int64_t r = self.dim();
  std::vector<bool> red(std::max<int64_t>(r, 1), dim.empty());  // no dims: all of them
  for (int64_t x : dim) {
    int64_t d = wrap_dim(x, r);
    TORCH_CHECK(!red[d], "dim ", d, " appears multiple times in the list of dims");
    red[d] = true;
  }
  Dims rdims;
  std::vector<int64_t> oshape;
  for (int64_t i = 0; i < r; ++i) {
    if (red[i]) {
      rdims.push_back(i);
      if (keepdim) oshape.push_back(1);
    } else {
      oshape.push_back(self.size(i));
    }
  }
  prepare_out(out, oshape, c10::kUInt64, "hash_tensor");
  Dims os(oshape.begin(), oshape.end());
  bool is_float = c10::isFloatingType(self.scalar_type());
  record::OpCall call("hash_tensor");
  call.attr(c10::IntArrayRef(rdims)).attr(keepdim);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value wide = is_float ? b.bitcast_convert(b.convert(in[0], ElemType::kF64), ElemType::kU64)
                          : b.bitcast_convert(b.convert(in[0], ElemType::kS64), ElemType::kU64);
    Value h = b.reduce(wide, zero(b, ElemType::kU64), rdims, BinaryOp::kXor);
    return Values{b.reshape(h, os)};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // hash_tensor reaches this through the structured-kernel wrapper.
  m.impl("hash_tensor.out", hash_tensor_out);
}

}  // namespace
}  // namespace torch_tpu::ops
