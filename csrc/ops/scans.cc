// cumsum / cumprod: functional, in-place and out=. Lowered as an inclusive
// prefix scan with reduce_window (a window spanning the whole dim, padded
// on the low side with the identity), which is exact for integers and is
// the form XLA's TPU backend recognises as a scan.
#include <ATen/native/Resize.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

// ATen's result dtype: the dtype argument, else integers and bool widen to int64.
c10::ScalarType scan_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? c10::kLong : self.scalar_type();
}

void scan_into(const at::Tensor& self, int64_t dim, bool prod, const at::Tensor& out) {
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

template <bool kProd>
at::Tensor scan(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  int64_t d = wrap_dim(dim, self.dim());
  at::Tensor out = empty_tpu(self.sizes(), scan_dtype(self, dtype), self.device());
  scan_into(self, d, kProd, out);
  return out;
}

template <bool kProd>
at::Tensor& scan_out(const at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype, at::Tensor& out) {
  int64_t d = wrap_dim(dim, self.dim());
  if (dtype)
    TORCH_CHECK(out.scalar_type() == *dtype, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(*dtype),
                ", but got ", out.dtype(), " instead");
  at::native::resize_output(out, self.sizes());
  scan_into(self, d, kProd, out);
  return out;
}

template <bool kProd>
at::Tensor& scan_(at::Tensor& self, int64_t dim, std::optional<c10::ScalarType> dtype) {
  int64_t d = wrap_dim(dim, self.dim());
  if (dtype)
    TORCH_CHECK(self.scalar_type() == *dtype, "Bad in-place call: input tensor dtype ", self.dtype(),
                " and output tensor dtype ", c10::scalarTypeToTypeMeta(*dtype), " should match");
  scan_into(self, d, kProd, self);
  return self;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("cumsum", scan<false>);
  m.impl("cumsum.out", scan_out<false>);
  m.impl("cumsum_", scan_<false>);
  m.impl("cumprod", scan<true>);
  m.impl("cumprod.out", scan_out<true>);
  m.impl("cumprod_", scan_<true>);
}

}  // namespace
}  // namespace torch_tpu::ops
