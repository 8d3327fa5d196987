// max_unpool2d / max_unpool3d: scatter each input value into a zero output
// at the flat spatial index max_pool recorded. Their gradient in autograd is
// a gather (max_pool_double_backward), which needs no kernel here.
// Out-of-range indices are dropped (CPU raises; checking would need a sync).
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

void unpool_into(const at::Tensor& self, const at::Tensor& indices, c10::IntArrayRef osize, at::Tensor& out) {
  int64_t nsp = static_cast<int64_t>(osize.size());
  std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - nsp);
  int64_t lin = 1, lout = 1;
  for (int64_t i = 0; i < nsp; ++i) lin *= self.size(self.dim() - nsp + i);
  for (int64_t s : osize) {
    shape.push_back(s);
    lout *= s;
  }
  prepare_out(out, shape, self.scalar_type(), "max_unpool");
  if (out.numel() == 0) return;
  int64_t rows = lin == 0 ? 0 : self.numel() / lin;
  record::OpCall call("max_unpool");
  call.attr(rows).attr(lin).attr(lout);
  call.input(self);
  call.input(indices);
  call.output(out);
  Dims od(shape.begin(), shape.end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = b.elem(in[0]);
    Value base = zero(b, e, {rows, lout});
    if (rows * lin == 0) return Values{b.reshape(base, od)};
    int64_t n = rows * lin;
    Value vals = b.reshape(in[0], {n});
    Value col = b.reshape(b.convert(in[1], ElemType::kS64), {n, 1});
    Value row = b.reshape(b.iota({rows, lin}, 0, ElemType::kS64), {n, 1});
    Value idx = b.concatenate({row, col}, 1);
    Value r = b.scatter(base, idx, vals, {}, {0, 1}, {0, 1}, 1, std::nullopt);
    return Values{b.reshape(r, od)};
  });
}

void check_common(const at::Tensor& self, const at::Tensor& indices, const char* fn, int64_t nsp) {
  TORCH_CHECK(indices.scalar_type() == at::ScalarType::Long,
              "elements in indices should be type int64 but got: ", indices.scalar_type());
  TORCH_CHECK(self.sizes() == indices.sizes(), "Expected shape of indices to be same as that of the input tensor (",
              self.sizes(), ") but got indices tensor with shape: ", indices.sizes());
  for (int64_t i = 1; i < self.dim(); ++i) {
    TORCH_CHECK(self.size(i) > 0, fn, "(): ", "Expected input to have non-zero size for non-batch dimensions, ",
                "but got ", self.sizes(), " with dimension ", i, " being empty.");
  }
  (void)nsp;
}

at::Tensor& max_unpool2d_out(const at::Tensor& self, const at::Tensor& indices, c10::IntArrayRef output_size,
                             at::Tensor& out) {
  TORCH_CHECK(output_size.size() == 2, "There should be exactly two elements (height, width) in output_size, but got ",
              output_size.size(), " elements.");
  TORCH_CHECK(self.dim() == 3 || self.dim() == 4,
              "Input to max_unpooling2d should be a 3d or 4d Tensor, but got a tensor with ", self.dim(),
              " dimensions.");
  check_common(self, indices, "max_unpooling2d_forward_out_cpu", 2);
  unpool_into(self, indices, output_size, out);
  return out;
}
at::Tensor max_unpool2d(const at::Tensor& self, const at::Tensor& indices, c10::IntArrayRef output_size) {
  at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device());
  return max_unpool2d_out(self, indices, output_size, out);
}

at::Tensor& max_unpool3d_out(const at::Tensor& self, const at::Tensor& indices, c10::IntArrayRef output_size,
                             c10::IntArrayRef stride, c10::IntArrayRef padding, at::Tensor& out) {
  TORCH_CHECK(self.dim() == 4 || self.dim() == 5,
              "Input to max_unpooling3d should be a 4d or 5d Tensor, but got a tensor with ", self.dim(),
              " dimensions.");
  TORCH_CHECK(output_size.size() == 3,
              "There should be exactly three elements (depth, height, width) in output_size, but got: ",
              output_size.size(), " elements.");
  TORCH_CHECK(stride.size() == 3,
              "There should be exactly three elements (depth, height, width) in stride, but got: ", stride.size(),
              " elements.");
  TORCH_CHECK(padding.size() == 3,
              "There should be exactly three elements (depth, height, width) in padding, but got: ", padding.size(),
              " elements.");
  TORCH_CHECK(stride[0] > 0 && stride[1] > 0 && stride[2] > 0,
              "strides should be greater than zero, but got stride: ", stride);
  check_common(self, indices, "max_unpooling3d_forward_out_cpu", 3);
  unpool_into(self, indices, output_size, out);
  return out;
}
at::Tensor max_unpool3d(const at::Tensor& self, const at::Tensor& indices, c10::IntArrayRef output_size,
                        c10::IntArrayRef stride, c10::IntArrayRef padding) {
  at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device());
  return max_unpool3d_out(self, indices, output_size, stride, padding, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("max_unpool2d", max_unpool2d);
  m.impl("max_unpool2d.out", max_unpool2d_out);
  m.impl("max_unpool3d", max_unpool3d);
  m.impl("max_unpool3d.out", max_unpool3d_out);
}

}  // namespace
}  // namespace torch_tpu::ops
