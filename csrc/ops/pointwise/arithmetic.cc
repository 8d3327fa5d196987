// add, sub, mul, div (with rounding modes): functional, in-place and out=;
// and rsub (other - alpha * self), composed on sub.
// PyTorch's type promotion (at::result_type) and broadcasting rules; Python
// numbers and `alpha` are runtime scalars, not constants.
#include <ATen/ops/result_type.h>
#include <ATen/ops/sub.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/pointwise/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

Value add_fn(Builder& b, const Values& x) {
  // x = {self, other, alpha}
  return b.add(x[0], b.mul(x[1], x[2]));
}
Value sub_fn(Builder& b, const Values& x) { return b.sub(x[0], b.mul(x[1], x[2])); }
Value mul_fn(Builder& b, const Values& x) {
  if (b.elem(x[0]) == ElemType::kPred) return b.and_(x[0], x[1]);
  return b.mul(x[0], x[1]);
}

Value div_fn(Builder& b, const Values& x, int64_t mode) {  // 0 true, 1 trunc, 2 floor
  // Floor: ATen's div_floor, shared with floor_divide (its quotient comes
  // from fmod, so x / inf floors to -1 or 0 and inf / x is nan, as CPU).
  if (mode == 2) return floor_divide_lowering(b, x);
  Value q = b.div(x[0], x[1]);
  if (!ir::is_float(b.elem(x[0]))) return q;  // integer divide truncates
  if (mode == 1) {
    Value f = b.floor(b.abs(q));
    return b.mul(b.sign(q), f);
  }
  return q;
}

void check_alpha(c10::ScalarType t, const c10::Scalar& alpha) {
  TORCH_CHECK(!alpha.isBoolean() || t == c10::kBool, "Boolean alpha only supported for Boolean results.");
  TORCH_CHECK(c10::isFloatingType(t) || alpha.isIntegral(true),
              "For integral input tensors, argument alpha must not be a floating point number.");
}

void check_sub(const at::Tensor& self, const at::Tensor& other) {
  // NotImplementedError, as CPU's sub_check (TORCH_CHECK_NOT_IMPLEMENTED).
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != c10::kBool || other.scalar_type() != c10::kBool,
                              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` "
                              "or `logical_xor()` operator instead.");
  TORCH_CHECK_NOT_IMPLEMENTED(self.scalar_type() != c10::kBool && other.scalar_type() != c10::kBool,
                              "Subtraction, the `-` operator, with a bool tensor is not supported. If you are "
                              "trying to invert a mask, use the `~` or `logical_not()` operator instead.");
}

// --- add / sub / mul / div ---------------------------------------------------------
// Each declared once for the variant mechanism (ops/variants.h), which
// registers the functional, in-place and out= forms.

c10::Device device_of(const at::Tensor& self, const at::Tensor& other) {
  return self.is_cpu() ? other.device() : self.device();
}

template <bool kSub>
struct AddSub {
  static constexpr const char* kName = kSub ? "sub" : "add";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
    if (kSub) check_sub(self, other);
    auto dtype = at::result_type(self, other);
    check_alpha(dtype, alpha);
    return {broadcast_shape({self, other}), dtype, device_of(self, other)};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& other,
                   const c10::Scalar& alpha) {
    pointwise(kName, {self, other, alpha}, out, m.dtype, kSub ? sub_fn : add_fn);
  }
};

struct Mul {
  static constexpr const char* kName = "mul";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& other) {
    return {broadcast_shape({self, other}), at::result_type(self, other), device_of(self, other)};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& other) {
    pointwise(kName, {self, other}, out, m.dtype, mul_fn);
  }
};

int64_t rounding(std::optional<std::string_view> mode) {
  if (!mode.has_value()) return 0;
  if (*mode == "trunc") return 1;
  if (*mode == "floor") return 2;
  TORCH_CHECK(false, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
}

// True division gives a float; trunc and floor keep the promoted type.
OutMeta div_meta(const at::Tensor& self, const at::Tensor& other, int64_t mode) {
  auto t = at::result_type(self, other);
  // As CPU, whose floor/trunc division kernels have no bool instantiation
  // (and StableHLO's divide takes no i1).
  TORCH_CHECK_NOT_IMPLEMENTED(mode == 0 || t != c10::kBool, "\"", mode == 1 ? "div_trunc" : "div_floor",
                              "_tpu\" not implemented for 'Bool'");
  if (mode != 0) check_integer_divisor(other, t);
  return {broadcast_shape({self, other}), mode == 0 ? float_result(t) : t, device_of(self, other)};
}
void div_impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& other, int64_t mode) {
  pointwise(
      "div", {self, other}, out, m.dtype, [mode](Builder& b, const Values& x) { return div_fn(b, x, mode); }, mode);
}
struct Div {
  static constexpr const char* kName = "div";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& other) { return div_meta(self, other, 0); }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& other) {
    div_impl(out, m, self, other, 0);
  }
};
struct DivMode {
  static constexpr const char* kName = "div";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> mode) {
    return div_meta(self, other, rounding(mode));
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& other,
                   std::optional<std::string_view> mode) {
    div_impl(out, m, self, other, rounding(mode));
  }
};

// --- rsub --------------------------------------------------------------------------

// other - alpha * self; sub carries the dtype/bool/alpha checks.
at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<AddSub<false>>(m, {"add.Tensor", "add_.Tensor", "add.out"});
  register_variants<AddSub<true>>(m, {"sub.Tensor", "sub_.Tensor", "sub.out"});
  register_variants<Mul>(m, {"mul.Tensor", "mul_.Tensor", "mul.out"});
  register_variants<Div>(m, {"div.Tensor", "div_.Tensor", "div.out"});
  register_variants<DivMode>(m, {"div.Tensor_mode", "div_.Tensor_mode", "div.out_mode"});
  m.impl("rsub.Tensor", rsub);
}

}  // namespace
}  // namespace torch_tpu::ops
