// Integer-only ops: bitwise shifts (bitwise_*_shift and the __lshift__
// family) and gcd/lcm (Euclid in a device-side while loop).
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <type_traits>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

// A wrapped CPU scalar (e.g. from the Scalar_Tensor overloads) may come first.
c10::Device dev(const at::Tensor& a, const Operand& c) {
  return a.is_cpu() && c.t.defined() ? c.t.device() : a.device();
}

// --- shifts ------------------------------------------------------------------------

// CPU rejects bool and non-integers (with its kernel's name in the message).
void check_shift(ScalarType t, bool left) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isIntegralType(t, /*includeBool=*/false), "\"", left ? "lshift" : "rshift",
                              "_cpu\" not implemented for '", c10::toString(t), "'");
}

// Counts outside [0, width) follow CPU: a left shift gives 0, a right shift
// fills with the sign bit (0 for unsigned types). StableHLO already does
// this for counts >= width, but negative counts must be caught explicitly.
template <bool kLeft>
void shift_run(const Operand& a, const Operand& c, ScalarType t, const at::Tensor& out) {
  int64_t width = static_cast<int64_t>(c10::elementSize(t)) * 8;
  bool sgn = c10::isSignedType(t);
  pointwise(
      kLeft ? "lshift" : "rshift", {a, c}, out, t,
      [width, sgn](Builder& b, const Values& x) {
        Value v = x[0], s = x[1];
        Value oob = b.or_(b.compare(s, full_like(b, 0, s), Direction::kLt),
                          b.compare(s, full_like(b, static_cast<double>(width), s), Direction::kGe));
        if (kLeft) return b.select(oob, full_like(b, 0, v), b.shl(v, s));
        if (!sgn) return b.select(oob, full_like(b, 0, v), b.shr_logical(v, s));
        Value fill = b.shr_arith(v, full_like(b, static_cast<double>(width - 1), v));
        return b.select(oob, fill, b.shr_arith(v, s));
      },
      sgn ? 1 : 0);
}

// A shift by a tensor or by a Python number: its functional, in-place and
// (tensor form) out= kernels.
template <bool kLeft, class Other>
struct Shift {
  static constexpr const char* kName = kLeft ? "bitwise_left_shift" : "bitwise_right_shift";
  static OutMeta meta(const at::Tensor& s, Other o) {
    ScalarType t = at::result_type(s, o);
    check_shift(t, kLeft);
    if constexpr (std::is_same_v<Other, const at::Tensor&>)
      return {broadcast_shape({s, o}), t, dev(s, o)};
    else
      return {s.sizes().vec(), t, s.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& s, Other o) {
    shift_run<kLeft>(s, o, m.dtype, out);
  }
};
template <bool kLeft>
using ShiftT = Shift<kLeft, const at::Tensor&>;
template <bool kLeft>
using ShiftS = Shift<kLeft, const c10::Scalar&>;

// --- gcd / lcm ---------------------------------------------------------------------

Value any_true(Builder& c, Value p) {
  if (c.dims(p).empty()) return p;
  std::vector<int64_t> all(c.dims(p).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return c.reduce(p, c.constant(0, ElemType::kPred), all, BinaryOp::kOr);
}

// CPU's Euclid on |a|, |b| with C remainder: abs wraps at the minimum
// integer, so e.g. gcd(INT64_MIN, 0) is INT64_MIN, as on CPU. The loop runs
// until every element's divisor is 0 (tested on device).
Value gcd_value(Builder& b, Value x, Value y) {
  Values init{b.abs(x), b.abs(y)};
  auto cond = b.loop_region(init);
  {
    Builder c(*cond);
    Value a{cond->params()[0], 0};
    cond->set_outputs({any_true(c, c.compare(a, full_like(c, 0, a), Direction::kNe))});
  }
  auto body = b.loop_region(init);
  {
    Builder c(*body);
    Value a{body->params()[0], 0}, bb{body->params()[1], 0};
    Value live = c.compare(a, full_like(c, 0, a), Direction::kNe);
    // Finished elements divide by 1 so no remainder by zero is computed.
    Value r = c.rem(bb, c.select(live, a, full_like(c, 1, a)));
    body->set_outputs({c.select(live, r, a), c.select(live, a, bb)});
  }
  return b.while_loop(init, cond, body)[1];
}

// CPU: g == 0 ? 0 : |a / g * b| (wrapping).
Value lcm_value(Builder& b, Value x, Value y) {
  Value g = gcd_value(b, x, y);
  Value gz = b.compare(g, full_like(b, 0, g), Direction::kEq);
  Value q = b.div(x, b.select(gz, full_like(b, 1, g), g));
  return b.select(gz, full_like(b, 0, g), b.abs(b.mul(q, y)));
}

template <bool kLcm>
ScalarType gcd_dtype(const at::Tensor& s, const at::Tensor& o) {
  ScalarType t = at::result_type(s, o);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isIntegralType(t, /*includeBool=*/false), "\"", kLcm ? "lcm" : "gcd",
                              "_cpu\" not implemented for '", c10::toString(t), "'");
  return t;
}
template <bool kLcm>
void gcd_run(const at::Tensor& s, const at::Tensor& o, ScalarType t, const at::Tensor& out) {
  pointwise(kLcm ? "lcm" : "gcd", {s, o}, out, t,
            [](Builder& b, const Values& x) { return kLcm ? lcm_value(b, x[0], x[1]) : gcd_value(b, x[0], x[1]); });
}
template <bool kLcm>
struct Gcd {
  static constexpr const char* kName = kLcm ? "lcm" : "gcd";
  static OutMeta meta(const at::Tensor& s, const at::Tensor& o) {
    return {broadcast_shape({s, o}), gcd_dtype<kLcm>(s, o), dev(s, o)};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& s, const at::Tensor& o) {
    gcd_run<kLcm>(s, o, m.dtype, out);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<ShiftT<true>>(
      m, {"bitwise_left_shift.Tensor", "bitwise_left_shift_.Tensor", "bitwise_left_shift.Tensor_out"});
  register_variants<ShiftT<false>>(
      m, {"bitwise_right_shift.Tensor", "bitwise_right_shift_.Tensor", "bitwise_right_shift.Tensor_out"});
  register_variants<ShiftT<true>>(m, {"__lshift__.Tensor", "__ilshift__.Tensor", ""});
  register_variants<ShiftS<true>>(m, {"__lshift__.Scalar", "__ilshift__.Scalar", ""});
  register_variants<ShiftT<false>>(m, {"__rshift__.Tensor", "__irshift__.Tensor", ""});
  register_variants<ShiftS<false>>(m, {"__rshift__.Scalar", "__irshift__.Scalar", ""});
  register_variants<Gcd<false>>(m, "gcd");
  register_variants<Gcd<true>>(m, "lcm");
}

}  // namespace
}  // namespace torch_tpu::ops
