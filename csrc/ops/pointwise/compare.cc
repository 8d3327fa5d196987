// Comparisons (eq/ne/lt/le/gt/ge, Tensor and Scalar overloads), where and
// clamp/clamp_min/clamp_max. Comparisons compute in the promoted type and
// give bool (in-place forms keep self's dtype); NaN compares like IEEE.
// Also equal (a host-synced Python bool) and isneginf/isposinf, which
// scaled_dot_product_attention's composite math path reaches through
// _safe_softmax (for fully masked rows).
#include <ATen/native/Resize.h>
#include <ATen/native/TypeProperties.h>
#include <ATen/ops/all.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"
#include "record/driver.h"

namespace torch_tpu::ops {

const record::SyncSite kEqualSync{"equal", record::SyncReason::kHostRead};
namespace {

using c10::ScalarType;

// --- comparisons -------------------------------------------------------------------

enum Cmp { kEq, kNe, kLt, kLe, kGt, kGe };
constexpr Direction kDir[] = {Direction::kEq, Direction::kNe, Direction::kLt,
                              Direction::kLe, Direction::kGt, Direction::kGe};
constexpr const char* kCmpName[] = {"eq", "ne", "lt", "le", "gt", "ge"};

template <int C>
Value cmp_fn(Builder& b, const Values& x) {
  return b.compare(x[0], x[1], kDir[C]);
}

template <int C>
void cmp_run(const Operand& a, const Operand& c, ScalarType t, const at::Tensor& out) {
  // Complex numbers are unordered; eq/ne compare them like CPU does.
  TORCH_CHECK_NOT_IMPLEMENTED(C <= kNe || !c10::isComplexType(t), "\"", kCmpName[C], "_cpu\" not implemented for '",
                              c10::toString(t), "'");
  pointwise(kCmpName[C], {a, c}, out, t, cmp_fn<C>);
}

// eq/ne/lt/le/gt/ge against a Tensor or a Scalar (`Other`), declared once
// for the variant mechanism (ops/variants.h): the result is bool, broadcast.
template <int C, class Other>
struct Compare {
  static constexpr const char* kName = kCmpName[C];
  static OutMeta meta(const at::Tensor& s, Other o) {
    Operand other(o);
    c10::Device d = s.is_cpu() && other.t.defined() ? other.t.device() : s.device();
    return {broadcast_shape({s, other}), c10::kBool, d};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, Other o) {
    cmp_run<C>(s, o, at::result_type(s, o), out);
  }
};
template <int C>
void register_compare(torch::Library& m, const std::string& n) {
  register_variants<Compare<C, const at::Tensor&>>(m, {n + ".Tensor", n + "_.Tensor", n + ".Tensor_out"});
  register_variants<Compare<C, const c10::Scalar&>>(m, {n + ".Scalar", n + "_.Scalar", n + ".Scalar_out"});
}

// --- where -----------------------------------------------------------------------------

void where_run(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& c, const at::Tensor& out) {
  // uint8 conditions still work on CPU, with a deprecation warning.
  TORCH_CHECK(cond.scalar_type() == c10::kBool || cond.scalar_type() == c10::kByte,
              "where expected condition to be a boolean tensor, but got a tensor with dtype ", cond.scalar_type());
  if (cond.scalar_type() == c10::kByte)
    TORCH_WARN_ONCE(
        "where received a uint8 condition tensor. This behavior is deprecated and will be removed in a "
        "future version of PyTorch. Use a boolean condition instead.");
  ScalarType t = out.scalar_type();
  std::vector<int64_t> shape(out.sizes().begin(), out.sizes().end());
  record::OpCall call("where");
  call.attr(static_cast<int64_t>(t));
  call.input(cond);
  call.input(a);
  call.input(c);
  call.output(out);
  ElemType e = to_elem(t);
  call.run([&](Builder& b, const Values& in) {
    Value p = b.broadcast_to(b.convert(in[0], ElemType::kPred), shape);
    Value x = b.broadcast_to(b.convert(in[1], e), shape);
    Value y = b.broadcast_to(b.convert(in[2], e), shape);
    return Values{b.select(p, x, y)};
  });
}
// where(cond, a, c): the result has a and c's promoted dtype, which out=
// must have exactly.
struct WhereSelf {
  static constexpr const char* kName = "where";
  static OutMeta meta(const at::Tensor& cond, const at::Tensor& a, const at::Tensor& c) {
    c10::Device d = !a.is_cpu() ? a.device() : !c.is_cpu() ? c.device() : cond.device();
    OutMeta m{broadcast_shape({cond, a, c}), at::result_type(a, c), d, OutDtype::kOwn};
    m.operand_layout = false;
    return m;
  }
  static void check_out(const at::Tensor& out, const OutMeta& m, const at::Tensor&, const at::Tensor&,
                        const at::Tensor&) {
    TORCH_CHECK(out.scalar_type() == m.dtype, "Expected out type to be ", m.dtype, " but got ", out.scalar_type());
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& cond, const at::Tensor& a,
                   const at::Tensor& c) {
    where_run(cond, a, c, out);
  }
};

// --- clamp ----------------------------------------------------------------------------

// x = {self, lo?, hi?}; NaN in self propagates (std::min/max order as ATen).
Value clamp_fn(Builder& b, const Values& x, bool has_lo, bool has_hi) {
  Value v = x[0];
  bool flt = ir::is_float(b.elem(v));
  size_t i = 1;
  auto nan_or = [&](Value bound, Value r) {
    if (!flt) return r;
    // ATen: max(min) with NaN in either operand gives NaN.
    Value n = b.or_(b.compare(v, v, Direction::kNe), b.compare(bound, bound, Direction::kNe));
    return b.select(n, b.add(v, bound), r);
  };
  Value r = v;
  if (has_lo) {
    Value lo = x[i++];
    Value m = b.elem(v) == ElemType::kPred ? b.or_(r, lo) : b.max(r, lo);
    r = nan_or(lo, m);
  }
  if (has_hi) {
    Value hi = x[i++];
    Value m = b.elem(v) == ElemType::kPred ? b.and_(r, hi) : b.min(r, hi);
    // NaN already in r propagates through nan check on r.
    if (flt) {
      Value n = b.or_(b.compare(r, r, Direction::kNe), b.compare(hi, hi, Direction::kNe));
      m = b.select(n, b.add(r, hi), m);
    }
    r = m;
  }
  return r;
}

// The meta of every clamp overload: the result plus the operands to lower.
struct ClampArgs : OutMeta {
  std::vector<Operand> ops;
  bool lo = false, hi = false;
  bool scalar = false;  // Scalar-bound overload (CPU's *_scalar_cpu kernels)
};

ClampArgs clamp_args_s(const at::Tensor& self, const std::optional<c10::Scalar>& lo,
                       const std::optional<c10::Scalar>& hi) {
  TORCH_CHECK(lo.has_value() || hi.has_value(), "torch.clamp: At least one of 'min' or 'max' must not be None");
  ClampArgs a;
  a.scalar = true;
  a.ops.push_back(self);
  ScalarType t = self.scalar_type();
  // Like ATen's clamp: promote with each bound as a wrapped number.
  at::native::ResultTypeState st;
  st = at::native::update_result_type_state(self, st);
  if (lo) {
    a.lo = true;
    a.ops.push_back(*lo);
    st = at::native::update_result_type_state(*lo, st);
  }
  if (hi) {
    a.hi = true;
    a.ops.push_back(*hi);
    st = at::native::update_result_type_state(*hi, st);
  }
  t = at::native::result_type(st);
  a.dtype = t;
  a.sizes = self.sizes().vec();
  a.device = self.device();
  a.out_dtype = OutDtype::kSame;  // ATen builds Scalar-bound clamp as a unary op
  return a;
}
ClampArgs clamp_args_t(const at::Tensor& self, const std::optional<at::Tensor>& lo,
                       const std::optional<at::Tensor>& hi) {
  bool has_lo = lo.has_value() && lo->defined(), has_hi = hi.has_value() && hi->defined();
  TORCH_CHECK(has_lo || has_hi, "torch.clamp: At least one of 'min' or 'max' must not be None");
  ClampArgs a;
  a.ops.push_back(self);
  std::vector<at::Tensor> ts{self};
  if (has_lo) {
    a.lo = true;
    a.ops.push_back(*lo);
    ts.push_back(*lo);
  }
  if (has_hi) {
    a.hi = true;
    a.ops.push_back(*hi);
    ts.push_back(*hi);
  }
  a.dtype = at::native::result_type(ts);
  a.sizes = broadcast_shape(a.ops);
  a.device = self.device();
  return a;
}

void clamp_run(const char* name, const ClampArgs& a, const at::Tensor& out) {
  // CPU: bool works with a single Tensor bound only (or/and below).
  const char* kern = a.scalar ? (a.lo && a.hi ? "clamp_scalar_cpu"
                                 : a.lo       ? "clamp_min_scalar_cpu"
                                              : "clamp_max_scalar_cpu")
                              : "clamp_cpu";
  TORCH_CHECK_NOT_IMPLEMENTED(a.dtype != c10::kBool || (!a.scalar && a.lo != a.hi), "\"", kern,
                              "\" not implemented for 'Bool'");
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(a.dtype), "clamp is not supported for complex types");
  bool lo = a.lo, hi = a.hi;
  pointwise(
      name, a.ops, out, opmath(a.dtype), [lo, hi](Builder& b, const Values& x) { return clamp_fn(b, x, lo, hi); },
      (lo ? 1 : 0) + (hi ? 2 : 0));
}

// clamp with optional Scalar or Tensor bounds, and clamp_min / clamp_max
// (one bound), declared for the variant mechanism (ops/variants.h).
template <class Bound>
ClampArgs clamp_args(const at::Tensor& s, const std::optional<Bound>& lo, const std::optional<Bound>& hi) {
  if constexpr (std::is_same_v<Bound, c10::Scalar>)
    return clamp_args_s(s, lo, hi);
  else
    return clamp_args_t(s, lo, hi);
}
template <class Bound>
struct Clamp {
  static constexpr const char* kName = "clamp";
  static ClampArgs meta(const at::Tensor& s, const std::optional<Bound>& lo, const std::optional<Bound>& hi) {
    return clamp_args<Bound>(s, lo, hi);
  }
  static void impl(const at::Tensor& out, const ClampArgs& a, const at::Tensor&, const std::optional<Bound>&,
                   const std::optional<Bound>&) {
    clamp_run("clamp", a, out);
  }
};
template <bool kMin, class Bound>
struct ClampOne {
  static constexpr const char* kName = "clamp";
  static ClampArgs meta(const at::Tensor& s, const Bound& v) {
    return kMin ? clamp_args<Bound>(s, v, std::nullopt) : clamp_args<Bound>(s, std::nullopt, v);
  }
  static void impl(const at::Tensor& out, const ClampArgs& a, const at::Tensor&, const Bound&) {
    clamp_run("clamp", a, out);
  }
};

// --- equal -----------------------------------------------------------------------

// Host sync: equal returns a Python bool. NaN != NaN, as on CPU.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  kEqualSync();
  return at::eq(self, other).all().item<bool>();
}

// --- isneginf / isposinf ------------------------------------------------------------

// isneginf / isposinf: a bool result, which out= must be.
template <bool kNeg>
struct IsInfSign {
  static constexpr const char* kName = kNeg ? "isneginf" : "isposinf";
  static OutMeta meta(const at::Tensor& self) {
    TORCH_CHECK(!self.is_complex(), kName, " does not support complex inputs.");
    OutMeta m{self.sizes().vec(), c10::kBool, self.device(), OutDtype::kOwn};
    m.operand_layout = false;
    return m;
  }
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor&) {
    TORCH_CHECK(out.scalar_type() == c10::kBool, kName, " does not support non-boolean outputs.");
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self) {
    if (!c10::isFloatingType(self.scalar_type())) {
      // Integers and bools are never infinite.
      pointwise(
          kName, {self}, out, c10::kBool,
          [](Builder& b, const Values& x) { return zero(b, ElemType::kPred, b.dims(x[0])); }, 1);
      return;
    }
    pointwise(kName, {self}, out, self.scalar_type(), [](Builder& b, const Values& x) {
      Value inf = b.broadcast_to(kNeg ? lowest(b, b.elem(x[0])) : highest(b, b.elem(x[0])), b.dims(x[0]));
      return b.compare(x[0], inf, Direction::kEq);
    });
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_compare<kEq>(m, "eq");
  register_compare<kNe>(m, "ne");
  register_compare<kLt>(m, "lt");
  register_compare<kLe>(m, "le");
  register_compare<kGt>(m, "gt");
  register_compare<kGe>(m, "ge");
  register_variants<WhereSelf>(m, {"where.self", "", "where.self_out"});
  register_variants<Clamp<c10::Scalar>>(m, "clamp");
  register_variants<Clamp<at::Tensor>>(m, {"clamp.Tensor", "clamp_.Tensor", "clamp.Tensor_out"});
  register_variants<ClampOne<true, c10::Scalar>>(m, "clamp_min");
  register_variants<ClampOne<false, c10::Scalar>>(m, "clamp_max");
  register_variants<ClampOne<true, at::Tensor>>(m, {"clamp_min.Tensor", "clamp_min_.Tensor", "clamp_min.Tensor_out"});
  register_variants<ClampOne<false, at::Tensor>>(m, {"clamp_max.Tensor", "clamp_max_.Tensor", "clamp_max.Tensor_out"});
  m.impl("equal", equal);
  register_variants<IsInfSign<true>>(m, {"isneginf", "", "isneginf.out"});
  register_variants<IsInfSign<false>>(m, {"isposinf", "", "isposinf.out"});
}

}  // namespace
}  // namespace torch_tpu::ops
