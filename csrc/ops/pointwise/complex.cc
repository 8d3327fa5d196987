// Complex-number glue: view_as_real/view_as_complex (aliasing views of the
// same storage, as on CPU), conj_physical, complex, polar and angle.
// real/imag/conj/resolve_conj are CompositeImplicit/Explicit on top of these.
#include <ATen/ops/view_as_complex_native.h>
#include <ATen/ops/view_as_real_native.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

Value conj_of(Builder& b, Value x) {
  if (!ir::is_complex(b.elem(x))) return x;
  return b.complex(b.real(x), b.neg(b.imag(x)));
}

// conj_physical: a copy of a real tensor, the conjugate of a complex one;
// in place on a real tensor it does nothing.
struct ConjPhysical {
  static constexpr const char* kName = "conj_physical";
  static OutMeta meta(const at::Tensor& self) { return OutMeta{self.sizes().vec(), self.scalar_type(), self.device()}; }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self) {
    if (out.is_same(self) && !self.is_complex()) return;
    pointwise("conj_physical", {self}, out, self.scalar_type(),
              [](Builder& b, const Values& x) { return conj_of(b, x[0]); });
  }
};

// complex(real, imag) and polar(abs, angle) take two same-dtype float tensors.
void check_parts(const at::Tensor& a, const at::Tensor& b, const char* what) {
  auto ta = a.scalar_type(), tb = b.scalar_type();
  TORCH_CHECK(ta == c10::kFloat || ta == c10::kDouble || ta == c10::kHalf,
              "Expected both inputs to be Half, Float or Double tensors but got ", ta, " and ", tb);
  TORCH_CHECK(ta == tb, "Expected object of scalar type ", ta, " but got scalar type ", tb, " for second argument");
  TORCH_CHECK_TYPE(ta != c10::kHalf, "tpu does not support complex32 (", what, " of Half tensors)");
}

template <bool kPolar>
struct ComplexLike {
  static constexpr const char* kName = kPolar ? "polar" : "complex";
  static OutMeta meta(const at::Tensor& a, const at::Tensor& c) {
    check_parts(a, c, kName);
    return OutMeta{broadcast_shape({a, c}), c10::toComplexType(a.scalar_type()), a.device()};
  }
  static void check_out(const at::Tensor& out, const OutMeta& m, const at::Tensor&, const at::Tensor&) {
    TORCH_CHECK(out.scalar_type() == m.dtype, "Expected object of scalar type ", m.dtype, " but got scalar type ",
                out.scalar_type(), " for argument 'out'");
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& a, const at::Tensor& c) {
    pointwise(kName, {a, c}, out, a.scalar_type(), [](Builder& b, const Values& x) {
      if (!kPolar) return b.complex(x[0], x[1]);
      Value re = b.mul(x[0], b.cos(x[1]));
      Value im = b.mul(x[0], b.sin(x[1]));
      return b.complex(re, im);
    });
  }
};

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
struct Angle {
  static constexpr const char* kName = "angle";
  static OutMeta meta(const at::Tensor& self) {
    ScalarType t = self.scalar_type();
    return OutMeta{self.sizes().vec(), c10::isComplexType(t) ? c10::toRealValueType(t) : float_result(t),
                   self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self) { angle_run(self, out); }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("view_as_real", at::native::view_as_real);
  m.impl("view_as_complex", at::native::view_as_complex);
  // conj_physical, complex and polar are composite in ATen over these forms.
  register_variants<ConjPhysical>(m, {"", "conj_physical_", "conj_physical.out"});
  register_variants<ComplexLike<false>>(m, {"", "", "complex.out"});
  register_variants<ComplexLike<true>>(m, {"", "", "polar.out"});
  register_variants<Angle>(m, {"angle", "", "angle.out"});
}

}  // namespace torch_tpu::ops
