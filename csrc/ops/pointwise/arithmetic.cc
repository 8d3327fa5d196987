// add, sub, mul, div (with rounding modes): functional, in-place and out=;
// and rsub (other - alpha * self), composed on sub.
// PyTorch's type promotion (at::result_type) and broadcasting rules; Python
// numbers and `alpha` are runtime scalars, not constants.
#include <ATen/ops/result_type.h>
#include <ATen/ops/sub.h>
#include <torch/library.h>

#include "ops/common.h"

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

// Integer division rounding toward -inf (floor_divide semantics).
Value floor_div_int(Builder& b, Value a, Value c) {
  Value q = b.div(a, c);
  Value r = b.rem(a, c);
  Value z = zero(b, b.elem(a), b.dims(a));
  Value r_nz = b.compare(r, z, Direction::kNe);
  Value signs_differ = b.compare(b.compare(r, z, Direction::kLt), b.compare(c, z, Direction::kLt), Direction::kNe);
  Value adjust = b.and_(r_nz, signs_differ);
  return b.select(adjust, b.sub(q, one(b, b.elem(a), b.dims(a))), q);
}

Value div_fn(Builder& b, const Values& x, int64_t mode) {  // 0 true, 1 trunc, 2 floor
  Value q = b.div(x[0], x[1]);
  if (!ir::is_float(b.elem(x[0]))) {
    if (mode == 2) return floor_div_int(b, x[0], x[1]);
    return q;  // integer divide truncates
  }
  if (mode == 1) {
    Value f = b.floor(b.abs(q));
    return b.mul(b.sign(q), f);
  }
  if (mode == 2) return b.floor(q);
  return q;
}

void check_alpha(c10::ScalarType t, const c10::Scalar& alpha) {
  TORCH_CHECK(!alpha.isBoolean() || t == c10::kBool, "Boolean alpha only supported for Boolean results.");
  TORCH_CHECK(c10::isFloatingType(t) || alpha.isIntegral(true),
              "For integral input tensors, argument alpha must not be a floating point number.");
}

void check_sub(const at::Tensor& self, const at::Tensor& other) {
  TORCH_CHECK(self.scalar_type() != c10::kBool || other.scalar_type() != c10::kBool,
              "Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
              "`logical_xor()` operator instead.");
  TORCH_CHECK(self.scalar_type() != c10::kBool && other.scalar_type() != c10::kBool,
              "Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying to "
              "invert a mask, use the `~` or `logical_not()` operator instead.");
}

// --- add / sub ---------------------------------------------------------------

template <bool kSub>
at::Tensor& addsub_out(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha, at::Tensor& out) {
  if (kSub) check_sub(self, other);
  auto dtype = at::result_type(self, other);
  check_alpha(dtype, alpha);
  prepare_out(out, broadcast_shape({self, other}), dtype, kSub ? "sub" : "add");
  pointwise(kSub ? "sub" : "add", {self, other, alpha}, out, dtype, kSub ? sub_fn : add_fn);
  return out;
}

template <bool kSub>
at::Tensor addsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  if (kSub) check_sub(self, other);
  auto dtype = at::result_type(self, other);
  check_alpha(dtype, alpha);
  at::Tensor out = empty_tpu(broadcast_shape({self, other}), dtype, self.is_cpu() ? other.device() : self.device());
  pointwise(kSub ? "sub" : "add", {self, other, alpha}, out, dtype, kSub ? sub_fn : add_fn);
  return out;
}

template <bool kSub>
at::Tensor& addsub_(at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  if (kSub) check_sub(self, other);
  auto dtype = at::result_type(self, other);
  check_alpha(dtype, alpha);
  check_inplace(self, broadcast_shape({self, other}), dtype);
  pointwise(kSub ? "sub" : "add", {self, other, alpha}, self, dtype, kSub ? sub_fn : add_fn);
  return self;
}

// --- mul ---------------------------------------------------------------------

at::Tensor& mul_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  auto dtype = at::result_type(self, other);
  prepare_out(out, broadcast_shape({self, other}), dtype, "mul");
  pointwise("mul", {self, other}, out, dtype, mul_fn);
  return out;
}
at::Tensor mul(const at::Tensor& self, const at::Tensor& other) {
  auto dtype = at::result_type(self, other);
  at::Tensor out = empty_tpu(broadcast_shape({self, other}), dtype, self.is_cpu() ? other.device() : self.device());
  pointwise("mul", {self, other}, out, dtype, mul_fn);
  return out;
}
at::Tensor& mul_(at::Tensor& self, const at::Tensor& other) {
  auto dtype = at::result_type(self, other);
  check_inplace(self, broadcast_shape({self, other}), dtype);
  pointwise("mul", {self, other}, self, dtype, mul_fn);
  return self;
}

// --- div ---------------------------------------------------------------------

int64_t rounding(std::optional<std::string_view> mode) {
  if (!mode.has_value()) return 0;
  if (*mode == "trunc") return 1;
  if (*mode == "floor") return 2;
  TORCH_CHECK(false, "div expected rounding_mode to be one of None, 'trunc', or 'floor' but found '", *mode, "'");
}

c10::ScalarType div_dtype(const at::Tensor& a, const at::Tensor& b, int64_t mode) {
  auto t = at::result_type(a, b);
  return mode == 0 ? float_result(t) : t;
}

at::Tensor& div_out_mode(const at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> m,
                         at::Tensor& out) {
  int64_t mode = rounding(m);
  auto dtype = div_dtype(self, other, mode);
  prepare_out(out, broadcast_shape({self, other}), dtype, "div");
  pointwise("div", {self, other}, out, dtype, [mode](Builder& b, const Values& x) { return div_fn(b, x, mode); }, mode);
  return out;
}
at::Tensor div_mode(const at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> m) {
  int64_t mode = rounding(m);
  auto dtype = div_dtype(self, other, mode);
  at::Tensor out = empty_tpu(broadcast_shape({self, other}), dtype, self.is_cpu() ? other.device() : self.device());
  pointwise("div", {self, other}, out, dtype, [mode](Builder& b, const Values& x) { return div_fn(b, x, mode); }, mode);
  return out;
}
at::Tensor& div_mode_(at::Tensor& self, const at::Tensor& other, std::optional<std::string_view> m) {
  int64_t mode = rounding(m);
  auto dtype = div_dtype(self, other, mode);
  check_inplace(self, broadcast_shape({self, other}), dtype);
  pointwise(
      "div", {self, other}, self, dtype, [mode](Builder& b, const Values& x) { return div_fn(b, x, mode); }, mode);
  return self;
}
at::Tensor& div_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  return div_out_mode(self, other, std::nullopt, out);
}
at::Tensor div(const at::Tensor& self, const at::Tensor& other) { return div_mode(self, other, std::nullopt); }
at::Tensor& div_(at::Tensor& self, const at::Tensor& other) { return div_mode_(self, other, std::nullopt); }

// --- rsub --------------------------------------------------------------------------

// other - alpha * self; sub carries the dtype/bool/alpha checks.
at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("add.Tensor", addsub<false>);
  m.impl("add_.Tensor", addsub_<false>);
  m.impl("add.out", addsub_out<false>);
  m.impl("sub.Tensor", addsub<true>);
  m.impl("sub_.Tensor", addsub_<true>);
  m.impl("sub.out", addsub_out<true>);
  m.impl("mul.Tensor", mul);
  m.impl("mul_.Tensor", mul_);
  m.impl("mul.out", mul_out);
  m.impl("div.Tensor", div);
  m.impl("div_.Tensor", div_);
  m.impl("div.out", div_out);
  m.impl("div.Tensor_mode", div_mode);
  m.impl("div_.Tensor_mode", div_mode_);
  m.impl("div.out_mode", div_out_mode);
  m.impl("rsub.Tensor", rsub);
}

}  // namespace
}  // namespace torch_tpu::ops
