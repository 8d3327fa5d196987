// isin (Tensor_Tensor, Tensor_Scalar, Scalar_Tensor; functional and out=):
// transformers' generate() calls it for its stopping criteria. Lowered as a
// broadcast equality of every element against every test element, OR-reduced
// over the test elements: O(numel * test_numel) work, which suits its usual
// use (a handful of special token ids). NaN is never "in" (EQ is false), as
// on CPU; assume_unique only lets CPU pick another algorithm and has no
// effect on the result.
#include <ATen/ops/result_type.h>
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

void check_isin_dtype(c10::ScalarType t) {
  TORCH_CHECK(t != c10::kBool && !c10::isComplexType(t), "Unsupported input type encountered for isin(): ", t);
}

void check_bool_out(const at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == c10::kBool, "Expected out tensor to have dtype bool, but got ", out.scalar_type(),
              " instead");
}

// out[i] = (elements[i] in test) != invert. `elements` / `test` are each a
// tensor or a Python number; `out` is already shaped like elements.
void isin_into(const Operand& elements, const Operand& test, bool invert, const at::Tensor& out) {
  c10::ScalarType ct;
  if (elements.t.defined() && test.t.defined())
    ct = at::result_type(elements.t, test.t);
  else if (elements.t.defined())
    ct = at::result_type(elements.t, *test.s);
  else
    ct = at::result_type(test.t, *elements.s);
  if (out.numel() == 0) return;
  int64_t m = test.t.defined() ? test.t.numel() : 1;
  if (m == 0) {
    out.fill_(invert);
    return;
  }
  int64_t n = out.numel();
  record::OpCall call("isin");
  call.attr(invert).attr(static_cast<int64_t>(ct)).attr(elements.t.defined()).attr(test.t.defined());
  if (elements.t.defined())
    call.input(elements.t);
  else
    call.scalar(*elements.s, ct);
  if (test.t.defined())
    call.input(test.t);
  else
    call.scalar(*test.s, ct);
  call.output(out);
  Dims out_dims(out.sizes().begin(), out.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.broadcast_to(b.reshape(b.convert(in[0], e), {n, 1}), {n, m});
    Value t = b.broadcast_to(b.reshape(b.convert(in[1], e), {1, m}), {n, m});
    Value hit = b.reduce(b.compare(x, t, Direction::kEq), b.constant(0, ElemType::kPred), {1}, BinaryOp::kOr);
    if (invert) hit = b.not_(hit);
    return Values{b.reshape(hit, out_dims)};
  });
}

at::Tensor& isin_tt_out(const at::Tensor& elements, const at::Tensor& test, bool /*assume_unique*/, bool invert,
                        at::Tensor& out) {
  check_isin_dtype(elements.scalar_type());
  check_isin_dtype(test.scalar_type());
  check_bool_out(out);
  at::native::resize_output(out, elements.sizes());
  isin_into(elements, test, invert, out);
  return out;
}

at::Tensor isin_tt(const at::Tensor& elements, const at::Tensor& test, bool assume_unique, bool invert) {
  at::Tensor out = empty_tpu(elements.sizes(), c10::kBool, elements.device());
  return isin_tt_out(elements, test, assume_unique, invert, out);
}

at::Tensor& isin_ts_out(const at::Tensor& elements, const c10::Scalar& test, bool /*assume_unique*/, bool invert,
                        at::Tensor& out) {
  check_isin_dtype(elements.scalar_type());
  check_isin_dtype(test.type());
  check_bool_out(out);
  at::native::resize_output(out, elements.sizes());
  isin_into(elements, test, invert, out);
  return out;
}

at::Tensor isin_ts(const at::Tensor& elements, const c10::Scalar& test, bool assume_unique, bool invert) {
  at::Tensor out = empty_tpu(elements.sizes(), c10::kBool, elements.device());
  return isin_ts_out(elements, test, assume_unique, invert, out);
}

at::Tensor& isin_st_out(const c10::Scalar& element, const at::Tensor& test, bool /*assume_unique*/, bool invert,
                        at::Tensor& out) {
  check_isin_dtype(element.type());
  check_isin_dtype(test.scalar_type());
  check_bool_out(out);
  at::native::resize_output(out, {});
  isin_into(element, test, invert, out);
  return out;
}

at::Tensor isin_st(const c10::Scalar& element, const at::Tensor& test, bool assume_unique, bool invert) {
  at::Tensor out = empty_tpu({}, c10::kBool, test.device());
  return isin_st_out(element, test, assume_unique, invert, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("isin.Tensor_Tensor", isin_tt);
  m.impl("isin.Tensor_Tensor_out", isin_tt_out);
  m.impl("isin.Tensor_Scalar", isin_ts);
  m.impl("isin.Tensor_Scalar_out", isin_ts_out);
  m.impl("isin.Scalar_Tensor", isin_st);
  m.impl("isin.Scalar_Tensor_out", isin_st_out);
}

}  // namespace torch_tpu::ops
