// The elementwise StableHLO/CHLO operations lowerings may use, as enums, so
// that a lowering never spells an op name: a typo is a compile error, and
// reduce/scatter combiners are checked to be binary ops. Each list gives the
// Builder method name, the enum name and the MLIR op name.
#pragma once
#include <cstdint>

namespace torch_tpu::ir {

// clang-format off
#define TT_IR_UNARY_OPS(X)                                                  \
  X(abs, Abs, "stablehlo.abs")                                              \
  X(ceil, Ceil, "stablehlo.ceil")                                           \
  X(clz, CountLeadingZeros, "stablehlo.count_leading_zeros")                \
  X(cos, Cos, "stablehlo.cosine")                                           \
  X(exp, Exp, "stablehlo.exponential")                                      \
  X(expm1, Expm1, "stablehlo.exponential_minus_one")                        \
  X(floor, Floor, "stablehlo.floor")                                        \
  X(imag, Imag, "stablehlo.imag")                                           \
  X(log, Log, "stablehlo.log")                                              \
  X(log1p, Log1p, "stablehlo.log_plus_one")                                 \
  X(logistic, Logistic, "stablehlo.logistic")                               \
  X(neg, Neg, "stablehlo.negate")                                           \
  X(not_, Not, "stablehlo.not")                                             \
  X(real, Real, "stablehlo.real")                                           \
  X(round_even, RoundNearestEven, "stablehlo.round_nearest_even")           \
  X(rsqrt, Rsqrt, "stablehlo.rsqrt")                                        \
  X(sign, Sign, "stablehlo.sign")                                           \
  X(sin, Sin, "stablehlo.sine")                                             \
  X(sqrt, Sqrt, "stablehlo.sqrt")                                           \
  X(tanh, Tanh, "stablehlo.tanh")                                           \
  X(acos, Acos, "chlo.acos")                                                \
  X(acosh, Acosh, "chlo.acosh")                                             \
  X(asin, Asin, "chlo.asin")                                                \
  X(asinh, Asinh, "chlo.asinh")                                             \
  X(atan, Atan, "chlo.atan")                                                \
  X(atanh, Atanh, "chlo.atanh")                                             \
  X(cosh, Cosh, "chlo.cosh")                                                \
  X(digamma, Digamma, "chlo.digamma")                                       \
  X(erf, Erf, "chlo.erf")                                                   \
  X(erfc, Erfc, "chlo.erfc")                                                \
  X(erf_inv, ErfInv, "chlo.erf_inv")                                        \
  X(lgamma, Lgamma, "chlo.lgamma")                                          \
  X(sinh, Sinh, "chlo.sinh")                                                \
  X(tan, Tan, "chlo.tan")

#define TT_IR_BINARY_OPS(X)                                                 \
  X(add, Add, "stablehlo.add")                                              \
  X(sub, Sub, "stablehlo.subtract")                                         \
  X(mul, Mul, "stablehlo.multiply")                                         \
  X(div, Div, "stablehlo.divide")                                           \
  X(rem, Rem, "stablehlo.remainder")                                        \
  X(pow, Pow, "stablehlo.power")                                            \
  X(max, Max, "stablehlo.maximum")                                          \
  X(min, Min, "stablehlo.minimum")                                          \
  X(and_, And, "stablehlo.and")                                             \
  X(or_, Or, "stablehlo.or")                                                \
  X(xor_, Xor, "stablehlo.xor")                                             \
  X(shl, ShiftLeft, "stablehlo.shift_left")                                 \
  X(shr_arith, ShiftRightArithmetic, "stablehlo.shift_right_arithmetic")    \
  X(shr_logical, ShiftRightLogical, "stablehlo.shift_right_logical")        \
  X(atan2, Atan2, "stablehlo.atan2")                                        \
  X(next_after, NextAfter, "chlo.next_after")                               \
  X(polygamma, Polygamma, "chlo.polygamma")                                 \
  X(zeta, Zeta, "chlo.zeta")
// clang-format on

#define TT_IR_ENUM_ENTRY(fn, E, name) k##E,
enum class UnaryOp : uint8_t { TT_IR_UNARY_OPS(TT_IR_ENUM_ENTRY) };
enum class BinaryOp : uint8_t { TT_IR_BINARY_OPS(TT_IR_ENUM_ENTRY) };
#undef TT_IR_ENUM_ENTRY

// stablehlo.compare's comparison_direction.
enum class Direction : uint8_t { kEq, kNe, kLt, kLe, kGt, kGe };

const char* mlir_name(UnaryOp op);
const char* mlir_name(BinaryOp op);
const char* mlir_name(Direction d);  // "EQ", "NE", ...

}  // namespace torch_tpu::ir
