// The one pointwise op declaration (PointwiseDef) that the table-driven
// elementwise ops of every pointwise file share: unary math (unary.cc),
// pow/atan2/bitwise/... (binary.cc), torch.special (special.cc), lgamma and
// digamma (gamma.cc) and the orthogonal polynomials (polynomials.cc). A def
// says how the result dtype follows from the input dtype, which input dtypes
// CPU accepts (with CPU's error for the rest) and how the op lowers;
// Pointwise<D> turns it into the variant mechanism's op (ops/variants.h).
// Ops compute in opmath: half types in f32, rounded once, as CPU does.
#pragma once
#include <ATen/core/Tensor.h>
#include <ATen/ops/result_type.h>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {

// Result dtype from the (promoted) input dtype t.
enum class Result {
  kSame,   // t
  kReal,   // t, complex gives its real type (abs)
  kFloat,  // ints/bool give the default float
  kBool,
};

// Input dtype classes an op accepts, as bit flags. A rejected one raises
// CPU's dispatch error "\"<name>_cpu\" not implemented for '<dtype>'".
struct Accepts {
  enum : int {
    kFloat = 1,  // float32/float64 (and every other floating type but the half ones)
    kHalf = 2,   // bfloat16/half
    kInt = 4,
    kBool = 8,
    kComplex = 16,
    kFloats = kFloat | kHalf,
    kReal = kFloats | kInt | kBool,
    kNoHalf = kFloat | kInt | kBool,
    // Complex input raises "\"<name>\" not implemented for complex tensors"
    // instead: ops CPU computes on complex and this backend does not (yet).
    kComplexLater = 32,
  };
};

// x: the inputs, already in the compute dtype. storage: the op's own result
// dtype, for the few lowerings that round there as CPU's kernels do.
using Lowering = Value (*)(Builder& b, const Values& x, ElemType storage);
// Adapters from the usual lowering shapes.
template <Value (*F)(Builder&, Value)>
Value lower1(Builder& b, const Values& x, ElemType) {
  return F(b, x[0]);
}
template <Value (*F)(Builder&, const Values&)>
Value lowerN(Builder& b, const Values& x, ElemType) {
  return F(b, x);
}

struct PointwiseDef {
  const char* name;  // CPU's kernel name (dtype errors), also the cache key
  Result result;
  int accepts;  // Accepts flags
  Lowering fn;
  void (*check)(c10::ScalarType) = nullptr;  // CPU's op-specific dtype errors, checked first
  bool divides = false;                      // the second operand divides (check_integer_divisor)
};

// An integer division by zero (floor_divide, div with a rounding mode, fmod,
// remainder) raises RuntimeError("ZeroDivisionError") on CPU, whose kernels
// check every divisor; XLA would give an unspecified value. A number divisor
// (a CPU scalar) is checked here, before any program is built. A tpu divisor
// is checked only under TORCH_TPU_DEBUG_CHECKS=1 (a host read), as CUDA
// leaves it unchecked. `t` is the computation dtype.
void check_integer_divisor(const at::Tensor& divisor, c10::ScalarType t);

inline void check_dtype(const PointwiseDef& d, c10::ScalarType t) {
  if (d.check) d.check(t);
  bool complex = c10::isComplexType(t);
  TORCH_CHECK_NOT_IMPLEMENTED(!complex || (d.accepts & Accepts::kComplex) || !(d.accepts & Accepts::kComplexLater),
                              "\"", d.name, "\" not implemented for complex tensors");
  int cls = complex                                  ? Accepts::kComplex
            : t == c10::kBool                        ? Accepts::kBool
            : !c10::isFloatingType(t)                ? Accepts::kInt
            : t == c10::kHalf || t == c10::kBFloat16 ? Accepts::kHalf
                                                     : Accepts::kFloat;
  TORCH_CHECK_NOT_IMPLEMENTED(d.accepts & cls, "\"", d.name, "_cpu\" not implemented for '", c10::toString(t), "'");
}

inline c10::ScalarType result_dtype(const PointwiseDef& d, c10::ScalarType t) {
  switch (d.result) {
    case Result::kReal:
      return c10::toRealValueType(t);
    case Result::kFloat:
      return float_result(t);
    case Result::kBool:
      return c10::kBool;
    default:
      return t;
  }
}

// Writes d's result for inputs of promoted dtype t into out (already shaped).
inline void run_pointwise(const PointwiseDef& d, const std::vector<Operand>& ins, c10::ScalarType t,
                          const at::Tensor& out) {
  // The kernel's own dtype (not out='s): CPU rounds there, then casts.
  c10::ScalarType storage = d.result == Result::kFloat ? float_result(t) : t;
  ElemType st = to_elem(storage);
  Lowering fn = d.fn;
  pointwise(
      d.name, ins, out, opmath(storage), [fn, st](Builder& b, const Values& x) { return fn(b, x, st); },
      static_cast<int64_t>(storage));
}

// The variant mechanism's op for D on self and `Other` further tensors
// (none: unary; one at::Tensor: binary, promoted as at::result_type).
template <const PointwiseDef& D, class... Other>
struct Pointwise {
  static constexpr const char* kName = D.name;
  static c10::ScalarType promoted(const at::Tensor& self, const Other&... o) {
    if constexpr (sizeof...(Other) == 0)
      return self.scalar_type();
    else
      return at::result_type(self, o...);
  }
  static OutMeta meta(const at::Tensor& self, const Other&... o) {
    c10::ScalarType t = promoted(self, o...);
    check_dtype(D, t);
    if (D.divides) (check_integer_divisor(o, t), ...);
    // A CPU scalar tensor operand leaves the result on the tpu operand's device.
    c10::Device device = self.device();
    ((device = device.is_cpu() ? o.device() : device), ...);
    OutMeta m{broadcast_shape({self, o...}), result_dtype(D, t), device};
    // ATen's unary_op family wants out in the input's dtype (abs of complex
    // may write any real out).
    if (sizeof...(Other) == 0 && (D.result == Result::kSame || (D.result == Result::kReal && !c10::isComplexType(t))))
      m.out_dtype = OutDtype::kSame;
    return m;
  }
  // Unary ops whose out= must have self's dtype check that before their
  // dtype dispatch, as CPU's TensorIterator does (after the op's own checks).
  static std::optional<c10::ScalarType> same_dtype_out(const at::Tensor& self, const Other&...) {
    c10::ScalarType t = self.scalar_type();
    if constexpr (sizeof...(Other) == 0) {
      if (D.check) D.check(t);
      if (D.result == Result::kSame || (D.result == Result::kReal && !c10::isComplexType(t))) return t;
    }
    return std::nullopt;
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const Other&... o) {
    run_pointwise(D, {self, o...}, promoted(self, o...), out);
  }
};
template <const PointwiseDef& D>
using Unary = Pointwise<D>;
template <const PointwiseDef& D>
using Binary = Pointwise<D, at::Tensor>;

// ATen's div_floor, the one lowering of floor_divide and of
// div(rounding_mode="floor") (binary.cc): x = {a, c} in the compute type.
Value floor_divide_lowering(Builder& b, const Values& x);

// sign bit of x (bool): -0.0 counts as negative. Also digamma's pole.
inline Value f_signbit(Builder& b, Value x) {
  if (b.elem(x) == ElemType::kPred) return b.constant(0, ElemType::kPred, b.dims(x));
  Value z = zero(b, b.elem(x), b.dims(x));
  Value neg = b.compare(x, z, Direction::kLt);
  if (!ir::is_float(b.elem(x))) return neg;
  // -0.0: 1/x is -inf.
  Value negzero = b.and_(b.compare(x, z, Direction::kEq), b.compare(b.div(full_like(b, 1.0, x), x), z, Direction::kLt));
  return b.or_(neg, negzero);
}

}  // namespace torch_tpu::ops
