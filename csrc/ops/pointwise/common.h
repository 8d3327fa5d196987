// Shared by the pointwise files: the float-unary kernel table (UDef) behind
// sinc and signbit (unary.cc), i0 (special.cc) and lgamma/digamma/polygamma
// (gamma.cc), and the signbit lowering that digamma's pole also needs. A
// UDef op lowers directly, computing in opmath (half types in f32, rounded
// once); ints and bool give the default float (or bool for signbit).
#pragma once
#include <ATen/core/Tensor.h>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops::udef {

inline Value f_signbit(Builder& b, Value x) {
  if (b.elem(x) == ElemType::kPred) return b.constant(0, ElemType::kPred, b.dims(x));
  Value z = zero(b, b.elem(x), b.dims(x));
  Value neg = b.compare(x, z, Direction::kLt);
  if (!ir::is_float(b.elem(x))) return neg;
  // -0.0: 1/x is -inf.
  Value negzero = b.and_(b.compare(x, z, Direction::kEq), b.compare(b.div(full_like(b, 1.0, x), x), z, Direction::kLt));
  return b.or_(neg, negzero);
}

struct UDef {
  const char* name;
  bool float_result;  // ints/bool -> default float; otherwise bool result
  bool ints_ok;
  Value (*fn)(Builder&, Value);
};

inline c10::ScalarType u_result(const UDef& d, c10::ScalarType t) {
  return d.float_result ? float_result(t) : c10::kBool;
}
inline void u_run(const UDef& d, const at::Tensor& self, const at::Tensor& out) {
  c10::ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(t), "\"", d.name, "\" not implemented for complex tensors");
  c10::ScalarType compute = d.float_result ? opmath(float_result(t)) : t;
  auto fn = d.fn;
  pointwise(d.name, {self}, out, compute, [fn](Builder& b, const Values& x) { return fn(b, x[0]); });
}
// The op declaration the variant mechanism (ops/variants.h) registers
// functional, in-place and out= forms from.
template <const UDef& D>
struct FloatUnary {
  static constexpr const char* kName = D.name;
  static OutMeta meta(const at::Tensor& self) {
    return {self.sizes().vec(), u_result(D, self.scalar_type()), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self) { u_run(D, self, out); }
};

}  // namespace torch_tpu::ops::udef
