// Complex-number glue: view_as_real/view_as_complex (aliasing views of the
// same storage, as on CPU), conj_physical, complex, polar and angle.
// real/imag/conj/resolve_conj are CompositeImplicit/Explicit on top of these.
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

Value conj_of(Builder& b, Value x) {
  if (!ir::is_complex(b.elem(x))) return x;
  return b.complex(b.real(x), b.neg(b.imag(x)));
}

at::Tensor& tpu_conj_physical_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes(), self.scalar_type(), "conj_physical");
  pointwise("conj_physical", {self}, out, self.scalar_type(),
            [](Builder& b, const Values& x) { return conj_of(b, x[0]); });
  return out;
}

at::Tensor& tpu_conj_physical_(at::Tensor& self) {
  if (!self.is_complex()) return self;
  return tpu_conj_physical_out(self, self);
}

// complex(real, imag) and polar(abs, angle) take two same-dtype float tensors.
void check_parts(const at::Tensor& a, const at::Tensor& b, const char* what) {
  auto ta = a.scalar_type(), tb = b.scalar_type();
  TORCH_CHECK(ta == c10::kFloat || ta == c10::kDouble || ta == c10::kHalf,
              "Expected both inputs to be Half, Float or Double tensors but got ", ta, " and ", tb);
  TORCH_CHECK(ta == tb, "Expected object of scalar type ", ta, " but got scalar type ", tb, " for second argument");
  TORCH_CHECK_TYPE(ta != c10::kHalf, "tpu does not support complex32 (", what, " of Half tensors)");
}

template <bool kPolar>
at::Tensor& complex_like_out(const at::Tensor& a, const at::Tensor& c, at::Tensor& out) {
  check_parts(a, c, kPolar ? "polar" : "complex");
  ScalarType ct = c10::toComplexType(a.scalar_type());
  TORCH_CHECK(out.scalar_type() == ct, "Expected object of scalar type ", ct, " but got scalar type ",
              out.scalar_type(), " for argument 'out'");
  prepare_out(out, broadcast_shape({a, c}), ct, kPolar ? "polar" : "complex");
  pointwise(kPolar ? "polar" : "complex", {a, c}, out, a.scalar_type(), [](Builder& b, const Values& x) {
    if (!kPolar) return b.complex(x[0], x[1]);
    Value re = b.mul(x[0], b.cos(x[1]));
    Value im = b.mul(x[0], b.sin(x[1]));
    return b.complex(re, im);
  });
  return out;
}

// angle: atan2(imag, real) for complex; 0 or pi (NaN kept) for reals.
void angle_run(const at::Tensor& self, const at::Tensor& out) {
  ScalarType t = self.scalar_type();
  ScalarType compute = c10::isComplexType(t) ? t : opmath(float_result(t));
  pointwise("angle", {self}, out, compute, [](Builder& b, const Values& x) {
    Value v = x[0];
    if (ir::is_complex(b.elem(v))) return b.atan2(b.imag(v), b.real(v));
    ElemType e = b.elem(v);
    Value z = zero(b, e, b.dims(v));
    Value r = b.select(b.compare(v, z, Direction::kLt), b.constant(M_PI, e, b.dims(v)), z);
    return b.select(b.compare(v, v, Direction::kNe), v, r);
  });
}
ScalarType angle_type(ScalarType t) { return c10::isComplexType(t) ? c10::toRealValueType(t) : float_result(t); }
at::Tensor angle(const at::Tensor& self) {
  at::Tensor out = empty_tpu(self.sizes(), angle_type(self.scalar_type()), self.device());
  angle_run(self, out);
  return out;
}
at::Tensor& angle_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes(), angle_type(self.scalar_type()), "angle");
  angle_run(self, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  m.impl("conj_physical.out", tpu_conj_physical_out);
  m.impl("conj_physical_", tpu_conj_physical_);
  m.impl("complex.out", complex_like_out<false>);
  m.impl("polar.out", complex_like_out<true>);
  m.impl("angle", angle);
  m.impl("angle.out", angle_out);
}

}  // namespace torch_tpu::ops
