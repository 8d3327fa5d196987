// Binary elementwise math (pow, atan2, maximum/minimum, fmax/fmin, fmod,
// remainder, floor_divide, bitwise and/or/xor, logical and/or/xor, hypot,
// copysign, xlogy, lerp, addcmul, addcdiv, logaddexp/logaddexp2, heaviside):
// functional, in-place and out=.
// Scalar overloads that ATen defines compositely (wrapping the number) are
// left to ATen. Type promotion is at::result_type's; half types compute in
// f32 and round once, like PyTorch's CPU kernels.
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"
#include "ops/index/checks.h"
#include "ops/pointwise/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

Value nan_like(Builder& b, Value x) { return full_like(b, NAN, x); }
bool flt(Builder& b, Value x) { return ir::is_float(b.elem(x)); }

// --- lowerings (x = {a, c}, already in the compute type) ----------------------

// XLA's integer power reads only the exponent's low 6 bits (x^64 gives 1),
// so a non-negative integer exponent is taken in 6-bit digits:
// x^e = prod_k (x^(64^k))^digit_k, each x^(64^k) by six wrapping squarings.
// Wrapping as ATen's does, exactly, for every int64 exponent.
Value int_pow(Builder& b, Value x, Value e) {
  ElemType et = b.elem(e);
  // The sign bit never counts for e >= 0.
  int bits = ir::byte_size(et) * 8 - (ir::is_signed_int(et) ? 1 : 0);
  Value z = zero(b, et, b.dims(e));
  Value e_pos = b.select(b.compare(e, z, Direction::kLt), z, e);
  Value mask = b.constant(63, et, b.dims(e));
  Value result = one(b, b.elem(x), b.dims(x));
  Value base = x;
  for (int shift = 0; shift < bits; shift += 6) {
    Value digit = b.and_(b.shr_logical(e_pos, b.constant(shift, et, b.dims(e))), mask);
    result = b.mul(result, b.pow(base, b.convert(digit, b.elem(x))));
    if (shift + 6 < bits)
      for (int i = 0; i < 6; ++i) base = b.mul(base, base);
  }
  // Negative exponents keep XLA's power (0 for |x| > 1, as ATen).
  return b.select(b.compare(e, z, Direction::kLt), b.pow(x, b.convert(e, b.elem(x))), result);
}
Value f_pow(Builder& b, const Values& x) {
  ElemType t = b.elem(x[0]);
  if (ir::is_float(t) || ir::is_complex(t) || t == ElemType::kPred) return b.pow(x[0], x[1]);
  return int_pow(b, x[0], x[1]);
}
Value f_atan2(Builder& b, const Values& x) { return b.atan2(x[0], x[1]); }

template <bool kMax>
Value f_maxmin(Builder& b, const Values& x) {
  if (b.elem(x[0]) == ElemType::kPred) return kMax ? b.or_(x[0], x[1]) : b.and_(x[0], x[1]);
  Value r = b.binary(kMax ? BinaryOp::kMax : BinaryOp::kMin, x[0], x[1]);
  if (!flt(b, x[0])) return r;
  // NaN in either operand propagates.
  Value n = b.or_(is_nan(b, x[0]), is_nan(b, x[1]));
  return b.select(n, b.add(x[0], x[1]), r);
}
template <bool kMax>
Value f_fmaxmin(Builder& b, const Values& x) {
  if (b.elem(x[0]) == ElemType::kPred) return kMax ? b.or_(x[0], x[1]) : b.and_(x[0], x[1]);
  Value r = b.binary(kMax ? BinaryOp::kMax : BinaryOp::kMin, x[0], x[1]);
  if (!flt(b, x[0])) return r;
  // NaN is ignored unless both are NaN.
  r = b.select(is_nan(b, x[0]), x[1], r);
  return b.select(is_nan(b, x[1]), x[0], r);
}
Value f_fmod(Builder& b, const Values& x) { return b.rem(x[0], x[1]); }
Value f_remainder(Builder& b, const Values& x) {
  // Result takes the divisor's sign (Python's %).
  Value r = b.rem(x[0], x[1]);
  Value z = zero(b, b.elem(r), b.dims(r));
  Value fix = b.and_(b.compare(r, z, Direction::kNe),
                     b.compare(b.compare(r, z, Direction::kLt), b.compare(x[1], z, Direction::kLt), Direction::kNe));
  return b.select(fix, b.add(r, x[1]), r);
}
}  // namespace

void check_integer_divisor(const at::Tensor& divisor, c10::ScalarType t) {
  if (!c10::isIntegralType(t, /*includeBool=*/true) || divisor.numel() == 0) return;
  if (divisor.is_cpu() && divisor.dim() == 0) {  // a number: read it, no ATen op
    TORCH_CHECK(!divisor.item().equal(0), "ZeroDivisionError");
    return;
  }
  if (!debug_checks()) return;
  at::Tensor h = divisor.to(c10::kCPU);
  TORCH_CHECK(!h.eq(0).any().item<bool>(), "ZeroDivisionError");
}

Value floor_divide_lowering(Builder& b, const Values& x) {
  Value a = x[0], c = x[1];
  Value z = zero(b, b.elem(a), b.dims(a));
  if (!flt(b, a)) {
    Value q = b.div(a, c);
    Value r = b.rem(a, c);
    Value adj = b.and_(b.compare(r, z, Direction::kNe),
                       b.compare(b.compare(r, z, Direction::kLt), b.compare(c, z, Direction::kLt), Direction::kNe));
    return b.select(adj, b.sub(q, one(b, b.elem(a), b.dims(a))), q);
  }
  // ATen's div_floor for floats: derive the quotient from fmod so that it is
  // consistent with remainder, then round to the nearest integer.
  Value mod = b.rem(a, c);
  Value d = b.div(b.sub(a, mod), c);
  Value adj = b.and_(b.compare(mod, z, Direction::kNe),
                     b.compare(b.compare(c, z, Direction::kLt), b.compare(mod, z, Direction::kLt), Direction::kNe));
  d = b.select(adj, b.sub(d, full_like(b, 1.0, d)), d);
  Value fd = b.floor(d);
  fd = b.select(b.compare(b.sub(d, fd), full_like(b, 0.5, d), Direction::kGt), b.add(fd, full_like(b, 1.0, d)), fd);
  Value d0 = b.select(b.compare(d, z, Direction::kEq), b.mul(z, b.div(a, c)), fd);  // keeps the sign of zero
  // Division by zero: a / 0 (inf or nan), as ATen.
  return b.select(b.compare(c, z, Direction::kEq), b.div(a, c), d0);
}

namespace {
Value f_and(Builder& b, const Values& x) { return b.and_(x[0], x[1]); }
Value f_or(Builder& b, const Values& x) { return b.or_(x[0], x[1]); }
Value f_xor(Builder& b, const Values& x) { return b.xor_(x[0], x[1]); }
Value f_hypot(Builder& b, const Values& x) { return b.sqrt(b.add(b.mul(x[0], x[0]), b.mul(x[1], x[1]))); }
Value signbit(Builder& b, Value v) {
  // Sign bit, so that -0.0 and -nan count as negative (like std::signbit).
  ElemType it = b.elem(v) == ElemType::kF64 ? ElemType::kS64 : ElemType::kS32;
  Value bits = b.bitcast_convert(v, it);
  return b.compare(bits, zero(b, it, b.dims(v)), Direction::kLt);
}
Value f_copysign(Builder& b, const Values& x) {
  Value a = b.abs(x[0]);
  return b.select(signbit(b, x[1]), b.neg(a), a);
}
Value f_xlogy(Builder& b, const Values& x) {
  Value z = zero(b, b.elem(x[0]), b.dims(x[0]));
  Value r = b.mul(x[0], b.log(x[1]));
  r = b.select(b.compare(x[0], z, Direction::kEq), z, r);
  return b.select(is_nan(b, x[1]), x[1], r);
}
Value truthy(Builder& b, Value v) { return b.compare(v, zero(b, b.elem(v), b.dims(v)), Direction::kNe); }
Value f_logical_and(Builder& b, const Values& x) { return b.and_(truthy(b, x[0]), truthy(b, x[1])); }
Value f_logical_or(Builder& b, const Values& x) { return b.or_(truthy(b, x[0]), truthy(b, x[1])); }
Value f_logical_xor(Builder& b, const Values& x) { return b.compare(truthy(b, x[0]), truthy(b, x[1]), Direction::kNe); }

// --- table-driven ops (pointwise/common.h) -----------------------------------------

// CPU's own error for complex maximum/minimum (a RuntimeError).
template <bool kMax>
void no_complex(ScalarType t) {
  TORCH_CHECK(!c10::isComplexType(t), kMax ? "maximum" : "minimum", " not implemented for complex tensors.");
}

using A = Accepts;
// Float-valued ops reject complex; the others pass it to the lowering.
constexpr int kInts = A::kFloats | A::kInt | A::kComplex;
constexpr int kAll = A::kReal | A::kComplex;
constexpr int kBits = A::kInt | A::kBool | A::kComplex;  // bitwise: floats get CPU's error
// CPU's pow has no bool kernel and names itself without "_cpu".
void pow_bool(ScalarType t) { TORCH_CHECK_NOT_IMPLEMENTED(t != c10::kBool, "\"pow\" not implemented for 'Bool'"); }
constexpr PointwiseDef d_pow{"pow", Result::kSame, kInts, lowerN<f_pow>, pow_bool};
constexpr PointwiseDef d_atan2{"atan2", Result::kFloat, A::kReal, lowerN<f_atan2>};
constexpr PointwiseDef d_maximum{"maximum", Result::kSame, kAll, lowerN<f_maxmin<true>>, no_complex<true>};
constexpr PointwiseDef d_minimum{"minimum", Result::kSame, kAll, lowerN<f_maxmin<false>>, no_complex<false>};
constexpr PointwiseDef d_fmax{"fmax", Result::kSame, kAll, lowerN<f_fmaxmin<true>>};
constexpr PointwiseDef d_fmin{"fmin", Result::kSame, kAll, lowerN<f_fmaxmin<false>>};
constexpr PointwiseDef d_fmod{"fmod", Result::kSame, kInts, lowerN<f_fmod>, nullptr, true};
constexpr PointwiseDef d_remainder{"remainder", Result::kSame, kInts, lowerN<f_remainder>, nullptr, true};
constexpr PointwiseDef d_floor_divide{"div_floor", Result::kSame, kInts, lowerN<floor_divide_lowering>, nullptr, true};
constexpr PointwiseDef d_bitwise_and{"bitwise_and", Result::kSame, kBits, lowerN<f_and>};
constexpr PointwiseDef d_bitwise_or{"bitwise_or", Result::kSame, kBits, lowerN<f_or>};
constexpr PointwiseDef d_bitwise_xor{"bitwise_xor", Result::kSame, kBits, lowerN<f_xor>};
constexpr PointwiseDef d_hypot{"hypot", Result::kSame, A::kFloats, lowerN<f_hypot>};
constexpr PointwiseDef d_copysign{"copysign", Result::kFloat, A::kReal, lowerN<f_copysign>};
constexpr PointwiseDef d_xlogy{"xlogy", Result::kFloat, A::kReal, lowerN<f_xlogy>};

// --- pow scalar overloads ------------------------------------------------------------

ScalarType check_pow(const at::Tensor& self, const c10::Scalar& e) {
  auto t = at::result_type(self, e);
  // CPU's pow(Tensor, Scalar) fills for exponent 0 and copies for 1 before
  // dispatching on dtype, so bool works there.
  bool trivial = e.isIntegral(true) && (e.toLong() == 0 || e.toLong() == 1);
  if (!(t == c10::kBool && trivial)) check_dtype(d_pow, t);
  TORCH_CHECK(!(c10::isIntegralType(t, true) && e.isIntegral(true) && e.toLong() < 0),
              "Integers to negative integer powers are not allowed.");
  return t;
}
// pow(Tensor, Scalar): the number exponent takes part in type promotion.
struct PowTensorScalar {
  static constexpr const char* kName = "pow";
  static OutMeta meta(const at::Tensor& self, const c10::Scalar& e) {
    return {self.sizes().vec(), check_pow(self, e), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const c10::Scalar& e) {
    if (m.dtype == c10::kBool) {  // exponent 0 or 1 (check_pow): CPU fills or copies
      if (e.toBool())
        out.copy_(self);
      else
        out.fill_(true);
      return;
    }
    run_pointwise(d_pow, {self, e}, m.dtype, out);
  }
};
// op(Scalar, Tensor) overloads (pow.Scalar, remainder.Scalar_Tensor): the
// number takes part in type promotion as a wrapped scalar.
template <const PointwiseDef& D>
struct ScalarTensor {
  static constexpr const char* kName = D.name;
  static OutMeta meta(const c10::Scalar& s, const at::Tensor& e) {
    auto t = at::result_type(s, e);
    check_dtype(D, t);
    if (D.divides) check_integer_divisor(e, t);
    return OutMeta{e.sizes().vec(), t, e.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const c10::Scalar& s, const at::Tensor& e) {
    run_pointwise(D, {s, e}, m.dtype, out);
  }
};

// --- logical and/or/xor (bool result) -------------------------------------------

template <int kOp>  // 0 and, 1 or, 2 xor
struct Logical {
  static constexpr const char* kName = kOp == 0 ? "logical_and" : kOp == 1 ? "logical_or" : "logical_xor";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& other) {
    return OutMeta{broadcast_shape({self, other}), c10::kBool, self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const at::Tensor& other) {
    pointwise(kName, {self, other}, out, at::result_type(self, other),
              kOp == 0   ? f_logical_and
              : kOp == 1 ? f_logical_or
                         : f_logical_xor);
  }
};

// --- lerp ------------------------------------------------------------------------------

Value f_lerp(Builder& b, const Values& x) {
  // Two forms, as ATen, so that weight 1 gives exactly `end`.
  Value diff = b.sub(x[1], x[0]);
  Value small = b.compare(b.abs(x[2]), full_like(b, 0.5, x[2]), Direction::kLt);
  Value lo = b.add(x[0], b.mul(x[2], diff));
  Value hi = b.sub(x[1], b.mul(diff, b.sub(full_like(b, 1.0, x[2]), x[2])));
  return b.select(small, lo, hi);
}
void check_lerp(const at::Tensor& self, const at::Tensor& end, const at::Tensor* w) {
  TORCH_CHECK(self.scalar_type() == end.scalar_type(), "expected dtype ", self.scalar_type(),
              " for `end` but got dtype ", end.scalar_type());
  if (w)
    TORCH_CHECK(self.scalar_type() == w->scalar_type(), "expected dtype ", self.scalar_type(),
                " for `weight` but got dtype ", w->scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"lerp_kernel_scalar\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}
std::vector<int64_t> lerp_shape(const at::Tensor& s, const at::Tensor& e, const at::Tensor* w) {
  return w ? broadcast_shape({s, e, *w}) : broadcast_shape({s, e});
}
// lerp with a Scalar or Tensor weight, declared for the variant mechanism.
template <class Weight>
struct Lerp {
  static constexpr const char* kName = "lerp";
  static OutMeta meta(const at::Tensor& s, const at::Tensor& e, const Weight& w) {
    const at::Tensor* wt = nullptr;
    if constexpr (std::is_same_v<Weight, at::Tensor>) wt = &w;
    check_lerp(s, e, wt);
    return {lerp_shape(s, e, wt), s.scalar_type(), s.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, const at::Tensor& e, const Weight& w) {
    pointwise("lerp", {s, e, w}, out, opmath(s.scalar_type()), f_lerp);
  }
};

// --- addcmul / addcdiv -------------------------------------------------------------------

template <bool kDiv>
ScalarType addc_dtype(const at::Tensor& s, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& v) {
  if (kDiv)
    TORCH_CHECK(!(c10::isIntegralType(t1.scalar_type(), true) && c10::isIntegralType(t2.scalar_type(), true)),
                "Integer division with addcdiv is no longer supported, and in a future  release addcdiv will "
                "perform a true division of tensor1 and tensor2. The historic addcdiv behavior can be implemented "
                "as (input + value * torch.trunc(tensor1 / tensor2)).to(input.dtype) for integer inputs and as "
                "(input + value * tensor1 / tensor2) for float inputs. The future addcdiv behavior is just the "
                "latter implementation: (input + value * tensor1 / tensor2), for all dtypes.");
  ScalarType t = at::native::result_type({s, t1, t2});
  TORCH_CHECK(c10::isFloatingType(t) || !v.isFloatingPoint(),
              "For integral input tensors, argument value must not be a floating point number.");
  return t;
}
// addcmul / addcdiv: self + value * (tensor1 op tensor2), declared for the
// variant mechanism.
template <bool kDiv>
struct AddC {
  static constexpr const char* kName = kDiv ? "addcdiv" : "addcmul";
  static OutMeta meta(const at::Tensor& s, const at::Tensor& t1, const at::Tensor& t2, const c10::Scalar& v) {
    return {broadcast_shape({s, t1, t2}), addc_dtype<kDiv>(s, t1, t2, v), s.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& s, const at::Tensor& t1,
                   const at::Tensor& t2, const c10::Scalar& v) {
    pointwise(kName, {s, t1, t2, v}, out, opmath(m.dtype), [](Builder& b, const Values& x) {
      Value p = kDiv ? b.div(x[1], x[2]) : b.mul(x[1], x[2]);
      return b.add(x[0], b.mul(x[3], p));
    });
  }
};

// --- logaddexp / logaddexp2 / heaviside ----------------------------------------------

// Equal infinities return themselves (inf - inf would be NaN).
template <bool kBase2>
Value f_logaddexp(Builder& b, const Values& in) {
  Value x = in[0], y = in[1];
  Value m = b.max(x, y);
  Value d = b.neg(b.abs(b.sub(x, y)));
  Value r;
  if (kBase2) {
    Value p = b.pow(full_like(b, 2.0, d), d);
    r = b.add(m, b.div(b.log1p(p), full_like(b, M_LN2, p)));
  } else {
    r = b.add(m, b.log1p(b.exp(d)));
  }
  Value inf_eq =
      b.and_(b.compare(x, y, Direction::kEq), b.compare(b.abs(x), full_like(b, INFINITY, x), Direction::kEq));
  return b.select(inf_eq, x, r);
}

constexpr PointwiseDef d_logaddexp{"logaddexp", Result::kSame, Accepts::kFloats, lowerN<f_logaddexp<false>>};
constexpr PointwiseDef d_logaddexp2{"logaddexp2", Result::kSame, Accepts::kFloats, lowerN<f_logaddexp<true>>};

struct Heaviside {
  static constexpr const char* kName = "heaviside";
  static OutMeta meta(const at::Tensor& a, const at::Tensor& v) {
    TORCH_CHECK(a.scalar_type() == v.scalar_type(),
                "heaviside is not yet implemented for tensors with different dtypes");
    TORCH_CHECK(!c10::isComplexType(a.scalar_type()), "heaviside is not yet implemented for complex tensors.");
    return {broadcast_shape({a, v}), a.scalar_type(), a.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& a, const at::Tensor& v) {
    pointwise(kName, {a, v}, out, m.dtype, [](Builder& b, const Values& x) {
      Value z = zero(b, b.elem(x[0]), b.dims(x[0]));
      Value pos = b.convert(b.compare(x[0], z, Direction::kGt), b.elem(x[0]));
      return b.select(b.compare(x[0], z, Direction::kEq), x[1], pos);
    });
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Binary<d_pow>>(m, {"pow.Tensor_Tensor", "pow_.Tensor", "pow.Tensor_Tensor_out"});
  register_variants<PowTensorScalar>(m, {"pow.Tensor_Scalar", "pow_.Scalar", "pow.Tensor_Scalar_out"});
  register_variants<ScalarTensor<d_pow>>(m, {"pow.Scalar", "", "pow.Scalar_out"});
  register_variants<ScalarTensor<d_remainder>>(m, {"remainder.Scalar_Tensor", "", "remainder.Scalar_Tensor_out"});
  register_variants<Binary<d_atan2>>(m, "atan2");
  register_variants<Binary<d_maximum>>(m, {"maximum", "", "maximum.out"});
  register_variants<Binary<d_minimum>>(m, {"minimum", "", "minimum.out"});
  register_variants<Binary<d_fmax>>(m, {"fmax", "", "fmax.out"});
  register_variants<Binary<d_fmin>>(m, {"fmin", "", "fmin.out"});
  register_variants<Binary<d_fmod>>(m, {"fmod.Tensor", "fmod_.Tensor", "fmod.Tensor_out"});
  register_variants<Binary<d_remainder>>(m, {"remainder.Tensor", "remainder_.Tensor", "remainder.Tensor_out"});
  register_variants<Binary<d_floor_divide>>(m, {"floor_divide", "floor_divide_.Tensor", "floor_divide.out"});
  register_variants<Binary<d_bitwise_and>>(m, {"bitwise_and.Tensor", "bitwise_and_.Tensor", "bitwise_and.Tensor_out"});
  register_variants<Binary<d_bitwise_or>>(m, {"bitwise_or.Tensor", "bitwise_or_.Tensor", "bitwise_or.Tensor_out"});
  register_variants<Binary<d_bitwise_xor>>(m, {"bitwise_xor.Tensor", "bitwise_xor_.Tensor", "bitwise_xor.Tensor_out"});
  register_variants<Logical<0>>(m, "logical_and");
  register_variants<Logical<1>>(m, "logical_or");
  register_variants<Logical<2>>(m, "logical_xor");
  register_variants<Binary<d_hypot>>(m, "hypot");
  register_variants<Binary<d_copysign>>(m, {"copysign.Tensor", "copysign_.Tensor", "copysign.out"});
  register_variants<Binary<d_xlogy>>(m, {"xlogy.Tensor", "xlogy_.Tensor", "xlogy.OutTensor"});
  register_variants<Lerp<c10::Scalar>>(m, {"lerp.Scalar", "lerp_.Scalar", "lerp.Scalar_out"});
  register_variants<Lerp<at::Tensor>>(m, {"lerp.Tensor", "lerp_.Tensor", "lerp.Tensor_out"});
  register_variants<AddC<false>>(m, "addcmul");
  register_variants<AddC<true>>(m, "addcdiv");
  register_variants<Binary<d_logaddexp>>(m, {"logaddexp", "", "logaddexp.out"});
  register_variants<Binary<d_logaddexp2>>(m, {"logaddexp2", "", "logaddexp2.out"});
  register_variants<Heaviside>(m, "heaviside");
}

}  // namespace
}  // namespace torch_tpu::ops
