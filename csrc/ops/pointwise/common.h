// Shared by the pointwise files: the float-unary kernel table (UDef) behind
// sinc and signbit (unary.cc), i0 (special.cc) and lgamma/digamma/polygamma
// (gamma.cc), and the signbit lowering that digamma's pole also needs. A
// UDef op lowers directly, computing in opmath (half types in f32, rounded
// once); ints and bool give the default float (or bool for signbit).
#pragma once
#include <ATen/core/Tensor.h>

#include "ops/common.h"

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
template <const UDef& D>
at::Tensor u_fn(const at::Tensor& self) {
  at::Tensor out = empty_tpu(self.sizes(), u_result(D, self.scalar_type()), self.device());
  u_run(D, self, out);
  return out;
}
template <const UDef& D>
at::Tensor& u_inplace(at::Tensor& self) {
  check_inplace(self, self.sizes(), u_result(D, self.scalar_type()));
  u_run(D, self, self);
  return self;
}
template <const UDef& D>
at::Tensor& u_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes(), u_result(D, self.scalar_type()), D.name);
  u_run(D, self, out);
  return out;
}

}  // namespace torch_tpu::ops::udef
