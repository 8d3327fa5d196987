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
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

void check_isin_dtype(c10::ScalarType t) {
  TORCH_CHECK(t != c10::kBool && !c10::isComplexType(t), "Unsupported input type encountered for isin(): ", t);
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

c10::ScalarType type_of(const at::Tensor& t) { return t.scalar_type(); }
c10::ScalarType type_of(const c10::Scalar& s) { return s.type(); }

// One declaration for the three overloads: elements and test elements are
// each a tensor or a number (not both numbers). The result has the
// elements' shape and is bool; out= must be bool, as on CPU.
template <class E, class T>
struct Isin {
  static constexpr const char* kName = "isin";
  static OutMeta meta(E elements, T test, bool /*assume_unique*/, bool) {
    check_isin_dtype(type_of(elements));
    check_isin_dtype(type_of(test));
    if constexpr (std::is_same_v<E, const at::Tensor&>)
      return OutMeta{elements.sizes().vec(), c10::kBool, elements.device(), OutDtype::kExact, false};
    else
      return OutMeta{{}, c10::kBool, test.device(), OutDtype::kExact, false};
  }
  static void impl(const at::Tensor& out, const OutMeta&, E elements, T test, bool, bool invert) {
    isin_into(elements, test, invert, out);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  using T = const at::Tensor&;
  using S = const c10::Scalar&;
  register_variants<Isin<T, T>>(m, {"isin.Tensor_Tensor", "", "isin.Tensor_Tensor_out"});
  register_variants<Isin<T, S>>(m, {"isin.Tensor_Scalar", "", "isin.Tensor_Scalar_out"});
  register_variants<Isin<S, T>>(m, {"isin.Scalar_Tensor", "", "isin.Scalar_Tensor_out"});
}

}  // namespace torch_tpu::ops
