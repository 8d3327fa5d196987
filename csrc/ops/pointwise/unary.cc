// Unary elementwise math: functional, in-place and out= forms, plus the
// backward kernels autograd needs for them (sigmoid/tanh/threshold), and
// sinc and signbit; the table-driven ones are PointwiseDefs
// (pointwise/common.h).
// Float-valued ops on integer/bool inputs compute in the default float
// dtype (PyTorch's int-to-float promotion); half types compute in f32 and
// round once, as PyTorch's CPU kernels do.
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"
#include "ops/variants.h"
#include "ops/pointwise/common.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

Value f_neg(Builder& b, Value x) { return b.neg(x); }
Value f_abs(Builder& b, Value x) { return b.abs(x); }
Value f_sign(Builder& b, Value x) {
  if (b.elem(x) == ElemType::kPred) return x;
  if (ir::is_complex(b.elem(x))) return b.sign(x);  // x/|x|, 0 at 0
  // (0 < x) - (x < 0), as ATen: NaN and -0.0 give +0.
  Value z = zero(b, b.elem(x), b.dims(x));
  Value r = b.select(b.compare(x, z, Direction::kGt), one(b, b.elem(x), b.dims(x)), z);
  return b.select(b.compare(x, z, Direction::kLt), full_like(b, -1.0, x), r);
}
Value f_exp(Builder& b, Value x) { return b.exp(x); }
Value f_exp2(Builder& b, Value x) { return b.pow(full_like(b, 2.0, x), x); }
Value f_expm1(Builder& b, Value x) { return b.expm1(x); }
Value f_log(Builder& b, Value x) { return b.log(x); }
Value f_log2(Builder& b, Value x) { return b.div(f_log(b, x), full_like(b, M_LN2, x)); }
Value f_log10(Builder& b, Value x) { return b.div(f_log(b, x), full_like(b, M_LN10, x)); }
Value f_log1p(Builder& b, Value x) { return b.log1p(x); }
Value f_sqrt(Builder& b, Value x) { return b.sqrt(x); }
Value f_rsqrt(Builder& b, Value x) { return b.rsqrt(x); }
Value f_reciprocal(Builder& b, Value x) { return b.div(full_like(b, 1.0, x), x); }
Value f_sin(Builder& b, Value x) { return b.sin(x); }
Value f_cos(Builder& b, Value x) { return b.cos(x); }
Value f_tan(Builder& b, Value x) { return b.tan(x); }
Value f_asin(Builder& b, Value x) { return b.asin(x); }
Value f_acos(Builder& b, Value x) { return b.acos(x); }
Value f_atan(Builder& b, Value x) { return b.atan(x); }
Value f_sinh(Builder& b, Value x) { return b.sinh(x); }
Value f_cosh(Builder& b, Value x) { return b.cosh(x); }
Value f_tanh(Builder& b, Value x) { return b.tanh(x); }
Value f_asinh(Builder& b, Value x) { return b.asinh(x); }
Value f_acosh(Builder& b, Value x) { return b.acosh(x); }
Value f_atanh(Builder& b, Value x) { return b.atanh(x); }
Value f_sigmoid(Builder& b, Value x) { return b.logistic(x); }
Value f_erf(Builder& b, Value x) { return b.erf(x); }
Value f_erfc(Builder& b, Value x) { return b.erfc(x); }
Value f_erfinv(Builder& b, Value x) { return b.erf_inv(x); }
Value f_floor(Builder& b, Value x) { return ir::is_float(b.elem(x)) ? b.floor(x) : x; }
Value f_ceil(Builder& b, Value x) { return ir::is_float(b.elem(x)) ? b.ceil(x) : x; }
Value f_round(Builder& b, Value x) { return ir::is_float(b.elem(x)) ? b.round_even(x) : x; }
Value f_trunc(Builder& b, Value x) {
  if (!ir::is_float(b.elem(x))) return x;
  Value neg = b.compare(x, full_like(b, 0.0, x), Direction::kLt);
  return b.select(neg, b.ceil(x), b.floor(x));
}
Value f_frac(Builder& b, Value x) { return b.sub(x, f_trunc(b, x)); }
Value f_isnan(Builder& b, Value x) {
  if (!ir::is_float(b.elem(x))) return b.constant(0, ElemType::kPred, b.dims(x));
  return b.compare(x, x, Direction::kNe);
}
Value f_bitwise_not(Builder& b, Value x) { return b.not_(x); }
Value f_relu(Builder& b, Value x) {
  // CPU relu propagates NaN.
  Value z = zero(b, b.elem(x), b.dims(x));
  Value keep = b.or_(b.compare(x, z, Direction::kGt), b.compare(x, x, Direction::kNe));
  return b.select(keep, x, z);
}

// Unary ops accept complex where StableHLO has the op (what FFT gradients
// and basic complex math need); the rest report it as not implemented yet.
constexpr int kFloatOnly = Accepts::kFloats | Accepts::kComplexLater;
constexpr int kInts = kFloatOnly | Accepts::kInt;
constexpr int kAll = kInts | Accepts::kBool;
constexpr int kC = Accepts::kComplex;

// NotImplementedError for bool, as CPU raises since torch 2.14.
void neg_bool(ScalarType t) {
  TORCH_CHECK_NOT_IMPLEMENTED(t != c10::kBool,
                              "Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
                              "invert a mask, use the `~` or `logical_not()` operator instead.");
}
void relu_bool(ScalarType t) { TORCH_CHECK_NOT_IMPLEMENTED(t != c10::kBool, "Boolean inputs not supported for relu"); }

constexpr PointwiseDef d_neg{"neg", Result::kSame, kInts | kC, lower1<f_neg>, neg_bool};
constexpr PointwiseDef d_abs{"abs", Result::kReal, kInts | kC, lower1<f_abs>};
constexpr PointwiseDef d_sign{"sign", Result::kSame, kAll, lower1<f_sign>};
constexpr PointwiseDef d_sgn{"sgn", Result::kSame, kAll | kC, lower1<f_sign>};
constexpr PointwiseDef d_exp{"exp", Result::kFloat, kAll | kC, lower1<f_exp>};
constexpr PointwiseDef d_exp2{"exp2", Result::kFloat, kAll, lower1<f_exp2>};
constexpr PointwiseDef d_expm1{"expm1", Result::kFloat, kAll, lower1<f_expm1>};
constexpr PointwiseDef d_log{"log", Result::kFloat, kAll | kC, lower1<f_log>};
constexpr PointwiseDef d_log2{"log2", Result::kFloat, kAll, lower1<f_log2>};
constexpr PointwiseDef d_log10{"log10", Result::kFloat, kAll, lower1<f_log10>};
constexpr PointwiseDef d_log1p{"log1p", Result::kFloat, kAll, lower1<f_log1p>};
constexpr PointwiseDef d_sqrt{"sqrt", Result::kFloat, kAll | kC, lower1<f_sqrt>};
constexpr PointwiseDef d_rsqrt{"rsqrt", Result::kFloat, kAll | kC, lower1<f_rsqrt>};
constexpr PointwiseDef d_reciprocal{"reciprocal", Result::kFloat, kAll | kC, lower1<f_reciprocal>};
constexpr PointwiseDef d_sin{"sin", Result::kFloat, kAll | kC, lower1<f_sin>};
constexpr PointwiseDef d_cos{"cos", Result::kFloat, kAll | kC, lower1<f_cos>};
constexpr PointwiseDef d_tan{"tan", Result::kFloat, kAll, lower1<f_tan>};
constexpr PointwiseDef d_asin{"asin", Result::kFloat, kAll, lower1<f_asin>};
constexpr PointwiseDef d_acos{"acos", Result::kFloat, kAll, lower1<f_acos>};
constexpr PointwiseDef d_atan{"atan", Result::kFloat, kAll, lower1<f_atan>};
constexpr PointwiseDef d_sinh{"sinh", Result::kFloat, kAll, lower1<f_sinh>};
constexpr PointwiseDef d_cosh{"cosh", Result::kFloat, kAll, lower1<f_cosh>};
constexpr PointwiseDef d_tanh{"tanh", Result::kFloat, kAll | kC, lower1<f_tanh>};
constexpr PointwiseDef d_asinh{"asinh", Result::kFloat, kAll, lower1<f_asinh>};
constexpr PointwiseDef d_acosh{"acosh", Result::kFloat, kAll, lower1<f_acosh>};
constexpr PointwiseDef d_atanh{"atanh", Result::kFloat, kAll, lower1<f_atanh>};
constexpr PointwiseDef d_sigmoid{"sigmoid", Result::kFloat, kAll, lower1<f_sigmoid>};
constexpr PointwiseDef d_erf{"erf", Result::kFloat, kAll, lower1<f_erf>};
constexpr PointwiseDef d_erfc{"erfc", Result::kFloat, kAll, lower1<f_erfc>};
constexpr PointwiseDef d_erfinv{"erfinv", Result::kFloat, kAll, lower1<f_erfinv>};
constexpr PointwiseDef d_floor{"floor", Result::kSame, kInts, lower1<f_floor>};
constexpr PointwiseDef d_ceil{"ceil", Result::kSame, kInts, lower1<f_ceil>};
constexpr PointwiseDef d_round{"round", Result::kSame, kInts, lower1<f_round>};
constexpr PointwiseDef d_trunc{"trunc", Result::kSame, kInts, lower1<f_trunc>};
constexpr PointwiseDef d_frac{"frac", Result::kSame, kFloatOnly, lower1<f_frac>};
constexpr PointwiseDef d_isnan{"isnan", Result::kBool, kAll, lower1<f_isnan>};
constexpr PointwiseDef d_relu{"relu", Result::kSame, kInts, lower1<f_relu>, relu_bool};
// Integers and bool only: floats get CPU's dispatch error.
constexpr PointwiseDef d_bitwise_not{"bitwise_not", Result::kSame, Accepts::kInt | Accepts::kBool | kC,
                                     lower1<f_bitwise_not>};

// --- round(decimals) ----------------------------------------------------------

// round(decimals): float types only.
struct RoundDecimals {
  static constexpr const char* kName = "round";
  // A unary TensorIterator op: out= in self's dtype, checked first.
  static std::optional<ScalarType> same_dtype_out(const at::Tensor& self, int64_t) { return self.scalar_type(); }
  static OutMeta meta(const at::Tensor& self, int64_t) {
    ScalarType t = self.scalar_type();
    TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t), "\"round_cpu\" not implemented for '", c10::toString(t), "'");
    return {self.sizes().vec(), t, self.device(), OutDtype::kSame};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, int64_t decimals) {
    ScalarType t = m.dtype;
    if (decimals == 0) {
      run_pointwise(d_round, {self}, t, out);
      return;
    }
    // Like ATen: scale by 10^|d|, round half-to-even, scale back.
    bool neg = decimals < 0;
    double ten_pow = std::pow(10.0, static_cast<double>(neg ? -decimals : decimals));
    pointwise(
        "round_decimals", {self, c10::Scalar(ten_pow)}, out, opmath(t),
        [neg](Builder& b, const Values& x) {
          Value s = neg ? b.div(x[0], x[1]) : b.mul(x[0], x[1]);
          Value r = b.round_even(s);
          return neg ? b.mul(r, x[1]) : b.div(r, x[1]);
        },
        neg ? 1 : 2);
  }
};

// --- logical_not, isnan.out is composite; nan_to_num ---------------------------

// A bool result; out= and in-place of any dtype take the 0/1 values, as on CPU.
struct LogicalNot {
  static constexpr const char* kName = "logical_not";
  static OutMeta meta(const at::Tensor& self) {
    return {self.sizes().vec(), c10::kBool, self.device(), OutDtype::kOwn};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self) {
    pointwise("logical_not", {self}, out, self.scalar_type(), [](Builder& b, const Values& x) {
      return b.compare(x[0], zero(b, b.elem(x[0]), b.dims(x[0])), Direction::kEq);
    });
  }
};

void nan_to_num_run(const at::Tensor& self, std::optional<double> nan, std::optional<double> posinf,
                    std::optional<double> neginf, const at::Tensor& out) {
  ScalarType t = self.scalar_type();
  if (!c10::isFloatingType(t)) {  // nothing to replace
    pointwise("copy", {self}, out, t, [](Builder&, const Values& x) { return x[0]; });
    return;
  }
  // Defaults are the dtype's finite extremes, which depend on the output type.
  double hi, lo;
  switch (t) {
    case c10::kBFloat16:
      hi = static_cast<double>(std::numeric_limits<c10::BFloat16>::max());
      break;
    case c10::kHalf:
      hi = static_cast<double>(std::numeric_limits<c10::Half>::max());
      break;
    case c10::kDouble:
      hi = std::numeric_limits<double>::max();
      break;
    default:
      hi = std::numeric_limits<float>::max();
  }
  lo = -hi;
  pointwise("nan_to_num",
            {self, c10::Scalar(nan.value_or(0.0)), c10::Scalar(posinf.value_or(hi)), c10::Scalar(neginf.value_or(lo))},
            out, t, [](Builder& b, const Values& x) {
              Value v = x[0];
              Value inf = b.constant(INFINITY, b.elem(v), b.dims(v));
              Value r = b.select(b.compare(v, v, Direction::kNe), x[1], v);
              r = b.select(b.compare(v, inf, Direction::kEq), x[2], r);
              return b.select(b.compare(v, b.neg(inf), Direction::kEq), x[3], r);
            });
}
struct NanToNum {
  static constexpr const char* kName = "nan_to_num";
  static OutMeta meta(const at::Tensor& self, std::optional<double>, std::optional<double>, std::optional<double>) {
    return {self.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kOwn};
  }
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor& self, std::optional<double>,
                        std::optional<double>, std::optional<double>) {
    TORCH_CHECK(out.scalar_type() == self.scalar_type(), "nan_to_num: dtype of out: ", out.scalar_type(),
                " should be same as input: ", self.scalar_type());
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, std::optional<double> nan,
                   std::optional<double> posinf, std::optional<double> neginf) {
    nan_to_num_run(self, nan, posinf, neginf, out);
  }
};

// --- backward kernels ------------------------------------------------------------

// Result dtype and shape as a binary op's (grad and the forward tensor).
OutMeta backward_meta(const at::Tensor& grad, const at::Tensor& y) {
  return {broadcast_shape({grad, y}), at::result_type(grad, y), grad.device()};
}
// sigmoid/tanh backward from the forward result y.
template <bool kTanh>
struct ActBackward {
  static constexpr const char* kName = kTanh ? "tanh_backward" : "sigmoid_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& y) { return backward_meta(grad, y); }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& grad, const at::Tensor& y) {
    pointwise(kName, {grad, y}, out, opmath(m.dtype), [](Builder& b, const Values& x) {
      Value o = one(b, b.elem(x[1]), b.dims(x[1]));
      if (!kTanh) return b.mul(x[0], b.mul(b.sub(o, x[1]), x[1]));
      return b.mul(x[0], b.sub(o, b.mul(x[1], x[1])));
    });
  }
};
struct ThresholdBackward {
  static constexpr const char* kName = "threshold_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, const c10::Scalar&) {
    return backward_meta(grad, self);
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& grad, const at::Tensor& self,
                   const c10::Scalar& th) {
    pointwise(kName, {grad, self, th}, out, m.dtype, [](Builder& b, const Values& x) {
      return b.select(b.compare(x[1], x[2], Direction::kLe), zero(b, b.elem(x[0]), b.dims(x[0])), x[0]);
    });
  }
};

// --- sinc / signbit --------------------------------------------------------------

Value f_sinc(Builder& b, Value x) {
  Value px = b.mul(x, full_like(b, M_PI, x));
  Value r = b.div(b.sin(px), px);
  return b.select(b.compare(x, full_like(b, 0.0, x), Direction::kEq), full_like(b, 1.0, x), r);
}

constexpr PointwiseDef d_sinc{"sinc", Result::kFloat, kAll, lower1<f_sinc>};
constexpr PointwiseDef d_signbit{"signbit", Result::kBool, kAll, lower1<f_signbit>};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Unary<d_neg>>(m, "neg");
  register_variants<Unary<d_abs>>(m, "abs");
  register_variants<Unary<d_sign>>(m, "sign");
  register_variants<Unary<d_sgn>>(m, "sgn");
  register_variants<Unary<d_exp>>(m, "exp");
  register_variants<Unary<d_exp2>>(m, "exp2");
  register_variants<Unary<d_expm1>>(m, "expm1");
  register_variants<Unary<d_log>>(m, "log");
  register_variants<Unary<d_log2>>(m, "log2");
  register_variants<Unary<d_log10>>(m, "log10");
  register_variants<Unary<d_log1p>>(m, "log1p");
  register_variants<Unary<d_sqrt>>(m, "sqrt");
  register_variants<Unary<d_rsqrt>>(m, "rsqrt");
  register_variants<Unary<d_reciprocal>>(m, "reciprocal");
  register_variants<Unary<d_sin>>(m, "sin");
  register_variants<Unary<d_cos>>(m, "cos");
  register_variants<Unary<d_tan>>(m, "tan");
  register_variants<Unary<d_asin>>(m, "asin");
  register_variants<Unary<d_acos>>(m, "acos");
  register_variants<Unary<d_atan>>(m, "atan");
  register_variants<Unary<d_sinh>>(m, "sinh");
  register_variants<Unary<d_cosh>>(m, "cosh");
  register_variants<Unary<d_tanh>>(m, "tanh");
  register_variants<Unary<d_asinh>>(m, "asinh");
  register_variants<Unary<d_acosh>>(m, "acosh");
  register_variants<Unary<d_atanh>>(m, "atanh");
  register_variants<Unary<d_sigmoid>>(m, "sigmoid");
  register_variants<Unary<d_erf>>(m, "erf");
  register_variants<Unary<d_erfc>>(m, "erfc");
  register_variants<Unary<d_erfinv>>(m, "erfinv");
  register_variants<Unary<d_floor>>(m, "floor");
  register_variants<Unary<d_ceil>>(m, "ceil");
  register_variants<Unary<d_round>>(m, "round");
  register_variants<Unary<d_trunc>>(m, "trunc");
  register_variants<Unary<d_frac>>(m, "frac");
  register_variants<Unary<d_bitwise_not>>(m, "bitwise_not");
  register_variants<Unary<d_relu>>(m, {"relu", "relu_", ""});
  register_variants<Unary<d_isnan>>(m, {"isnan", "", ""});
  register_variants<RoundDecimals>(m, {"round.decimals", "round_.decimals", "round.decimals_out"});
  register_variants<LogicalNot>(m, "logical_not");
  register_variants<NanToNum>(m, "nan_to_num");
  register_variants<ActBackward<false>>(m, {"sigmoid_backward", "", "sigmoid_backward.grad_input"});
  register_variants<ActBackward<true>>(m, {"tanh_backward", "", "tanh_backward.grad_input"});
  register_variants<ThresholdBackward>(m, {"threshold_backward", "", "threshold_backward.grad_input"});
  register_variants<Unary<d_sinc>>(m, "sinc");
  register_variants<Unary<d_signbit>>(m, {"signbit", "", "signbit.out"});
}

}  // namespace
}  // namespace torch_tpu::ops
