// Reductions: sum, mean, prod, amax/amin, max/min (full and with indices),
// argmax/argmin, var/std (and *_mean), linalg_vector_norm / norm, any/all,
// logsumexp, count_nonzero over dims, and nansum and aminmax (composed of
// the tpu ops: NaNs zeroed then sum; amin and amax). Dims are wrapped and
// checked, and reductions that ATen rejects (empty max, duplicated dims, bad
// dtypes) are rejected here with ATen's exception type and message, before
// anything reaches XLA.
#include <ATen/native/Resize.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <c10/core/ScalarType.h>
#include <torch/library.h>

#include <algorithm>
#include <tuple>
#include <utility>
#include <cmath>
#include <limits>
#include <sstream>
#include <tuple>

#include "ops/common.h"
#include "ops/shape/append.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using Dims = std::vector<int64_t>;

// --- planning ----------------------------------------------------------------

struct Plan {
  Dims dims;          // reduced input dims, ascending (empty for a 0-d input)
  Dims out_shape;     // result shape honouring keepdim
  int64_t count = 1;  // input elements folded into each result element
  bool all = false;   // no dims were named: everything is reduced
};

// `dim` nullopt (or empty, when `empty_is_all`) reduces every dim.
Plan plan(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, bool empty_is_all = true) {
  int64_t r = self.dim();
  Plan p;
  std::vector<bool> seen(std::max<int64_t>(r, 1), false);
  p.all = !dim.has_value() || (dim->empty() && empty_is_all);
  if (p.all) {
    std::fill(seen.begin(), seen.end(), true);
  } else {
    for (int64_t d : *dim) {
      int64_t w = wrap_dim(d, r);
      TORCH_CHECK(!seen[w], "dim ", w, " appears multiple times in the list of dims");
      seen[w] = true;
    }
  }
  for (int64_t i = 0; i < r; ++i) {
    if (seen[i]) {
      p.dims.push_back(i);
      p.count *= self.size(i);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.out_shape.push_back(self.size(i));
    }
  }
  return p;
}

// ATen's checks for reductions without an identity (max, amax, argmax...).
void check_nonempty(const at::Tensor& self, const Plan& p, const char* op, bool index_error_when_all = false) {
  // Every caller orders values (max/min/amax/amin/argmax...): complex
  // numbers are unordered, and CPU refuses them too.
  TORCH_CHECK(!self.is_complex(), op, "(): does not support complex input");
  if (self.numel() != 0) return;
  if (p.all) {
    if (index_error_when_all)
      TORCH_CHECK_INDEX(false, op, "(): Expected reduction dim to be specified for input.numel() == 0.");
    TORCH_CHECK(false, op,
                "(): Expected reduction dim to be specified for input.numel() == 0. Specify the "
                "reduction dim with the 'dim' argument.");
  }
  for (int64_t d : p.dims)
    TORCH_CHECK_INDEX(self.size(d) != 0, op, "(): Expected reduction dim ", d, " to have non-zero size.");
}

// Integers and bool reduce to int64 (sum, prod), as in ATen.
c10::ScalarType widened(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  if (dtype) return *dtype;
  return c10::isIntegralType(self.scalar_type(), /*includeBool=*/true) ? c10::kLong : self.scalar_type();
}

// Half-precision floats accumulate in f32, then convert back.
ElemType acc_of(c10::ScalarType t) {
  if (t == c10::kBFloat16 || t == c10::kHalf) return ElemType::kF32;
  return to_elem(t);
}
c10::ScalarType acc_scalar(c10::ScalarType t) { return (t == c10::kBFloat16 || t == c10::kHalf) ? c10::kFloat : t; }

// --- lowering helpers --------------------------------------------------------

Value fold(Builder& b, Value x, const Dims& dims, BinaryOp kind, Value init) {
  if (dims.empty()) return x;
  return b.reduce(x, init, dims, kind);
}

// Broadcasts a reduced value back over the input's shape.
Value expand_back(Builder& b, Value r, const Dims& in_shape, const Dims& dims) {
  Dims mapping;
  for (int64_t i = 0; i < (int64_t)in_shape.size(); ++i)
    if (std::find(dims.begin(), dims.end(), i) == dims.end()) mapping.push_back(i);
  return b.broadcast_in_dim(r, in_shape, mapping);
}

Value scalar_like(Builder& b, double v, Value x) { return b.constant(v, b.elem(x), b.dims(x)); }

// max/min over floats where NaN wins. stablehlo.maximum alone is not
// enough: XLA:CPU may lower it with fast min/max, which drops NaNs.
std::shared_ptr<ir::Graph> nan_extreme_region(ElemType t, bool is_max) {
  auto g = std::make_shared<ir::Graph>();
  Value a = g->param({t, {}});
  Value c = g->param({t, {}});
  Builder rb(*g);
  Value r = rb.binary(is_max ? BinaryOp::kMax : BinaryOp::kMin, a, c);
  r = rb.select(rb.compare(c, c, Direction::kNe), c, r);
  r = rb.select(rb.compare(a, a, Direction::kNe), a, r);
  g->set_outputs({r});
  return g;
}

Value extreme_of(Builder& b, Value x, const Dims& dims, bool is_max) {
  ElemType e = b.elem(x);
  if (dims.empty()) return x;
  if (e == ElemType::kPred)
    return b.reduce(x, b.constant(is_max ? 0 : 1, e), dims, is_max ? BinaryOp::kOr : BinaryOp::kAnd);
  Value init = is_max ? lowest(b, e) : highest(b, e);
  if (!ir::is_float(e)) return b.reduce(x, init, dims, is_max ? BinaryOp::kMax : BinaryOp::kMin);
  return b.reduce_multi({x}, {init}, dims, nan_extreme_region(e, is_max))[0];
}

Value sum_of(Builder& b, Value x, const Dims& dims) {
  if (b.elem(x) == ElemType::kPred) return fold(b, x, dims, BinaryOp::kOr, b.constant(0, ElemType::kPred));
  return fold(b, x, dims, BinaryOp::kAdd, zero(b, b.elem(x)));
}

// --- the reductions' declarations (ops/variants.h) ------------------------------

// A reduction's result, with its plan for impl.
struct ReduceMeta : OutMeta {
  Plan p;
};
ReduceMeta reduce_meta(Plan p, c10::ScalarType dtype, const at::Tensor& self, OutDtype out_dtype) {
  ReduceMeta m;
  m.sizes = p.out_shape;
  m.dtype = dtype;
  m.device = self.device();
  m.out_dtype = out_dtype;
  m.operand_layout = false;
  m.p = std::move(p);
  return m;
}

// --- sum / prod / mean -------------------------------------------------------

// Reduces `self` (cast to `dtype`, accumulated in acc_of(dtype)) into `out`.
void sum_prod(const at::Tensor& self, const Plan& p, c10::ScalarType dtype, const at::Tensor& out, bool prod) {
  record::OpCall call(prod ? "prod" : "sum");
  call.input(self);
  call.attr(p.dims).attr(static_cast<int64_t>(dtype));
  call.output(out);
  ElemType de = to_elem(dtype), acc = acc_of(dtype);
  const Dims& dims = p.dims;
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(b.convert(in[0], de), acc);
    if (!prod) return Values{sum_of(b, x, dims)};
    if (acc == ElemType::kPred) return Values{fold(b, x, dims, BinaryOp::kAnd, b.constant(1, acc))};
    return Values{fold(b, x, dims, BinaryOp::kMul, one(b, acc))};
  });
}

// sum and prod: out= decides the dtype they accumulate in, except that a
// dtype= argument must be out's.
template <bool kProd, class Dim>
struct SumProd {
  static constexpr const char* kName = kProd ? "prod" : "sum";
  static ReduceMeta meta(const at::Tensor& self, Dim dim, bool keepdim, std::optional<c10::ScalarType> dtype) {
    Plan p;
    if constexpr (kProd)
      p = plan(self, c10::IntArrayRef{dim}, keepdim);
    else
      p = plan(self, dim, keepdim);
    return reduce_meta(std::move(p), widened(self, dtype), self, OutDtype::kOwn);
  }
  static void check_out(const at::Tensor& out, const ReduceMeta&, const at::Tensor&, Dim, bool,
                        std::optional<c10::ScalarType> dtype) {
    if (dtype) check_structured_out(out, *dtype);
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, Dim, bool,
                   std::optional<c10::ScalarType>) {
    sum_prod(self, m.p, out.scalar_type(), out, kProd);
  }
};
using Sum = SumProd<false, at::OptionalIntArrayRef>;
using Prod = SumProd<true, int64_t>;

at::Tensor prod_all(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  Plan p = plan(self, std::nullopt, false);
  auto dt = widened(self, dtype);
  at::Tensor out = empty_tpu({}, dt, self.device());
  sum_prod(self, p, dt, out, true);
  return out;
}

c10::ScalarType mean_dtype(const at::Tensor& self, std::optional<c10::ScalarType> dtype) {
  auto t = dtype.value_or(self.scalar_type());
  TORCH_CHECK(c10::isFloatingType(t), "mean(): could not infer output dtype. ", dtype ? "Optional" : "Input",
              " dtype must be either a floating point or complex dtype. Got: ", t);
  return t;
}

void mean_into(const at::Tensor& self, const Plan& p, c10::ScalarType dtype, const at::Tensor& out) {
  record::OpCall call("mean");
  call.input(self);
  call.attr(p.dims).attr(static_cast<int64_t>(dtype)).attr(p.count);
  call.output(out);
  ElemType de = to_elem(dtype), acc = acc_of(dtype);
  int64_t n = p.count;
  const Dims& dims = p.dims;
  call.run([&](Builder& b, const Values& in) {
    Value s = sum_of(b, b.convert(b.convert(in[0], de), acc), dims);
    return Values{b.div(s, scalar_like(b, static_cast<double>(n), s))};
  });
}

struct Mean {
  static constexpr const char* kName = "mean";
  static ReduceMeta meta(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<c10::ScalarType> dtype) {
    auto dt = mean_dtype(self, dtype);
    return reduce_meta(plan(self, dim, keepdim), dt, self, OutDtype::kCastable);
  }
  static void check_out(const at::Tensor& out, const ReduceMeta&, const at::Tensor&, at::OptionalIntArrayRef, bool,
                        std::optional<c10::ScalarType> dtype) {
    if (dtype) check_structured_out(out, *dtype);
    // Without dtype=, CPU sums into out's dtype and then divides in place:
    // an integral out gets true division's error.
    if (!dtype && !c10::isFloatingType(out.scalar_type()) && !c10::isComplexType(out.scalar_type()))
      TORCH_CHECK(false, "result type ", default_float(), " can't be cast to the desired output type ",
                  out.scalar_type());
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, at::OptionalIntArrayRef, bool,
                   std::optional<c10::ScalarType>) {
    mean_into(self, m.p, out.scalar_type(), out);
  }
};

// --- amax / amin / max() / min() ---------------------------------------------

void extreme_into(const char* name, const at::Tensor& self, const Plan& p, bool is_max, const at::Tensor& out) {
  record::OpCall call(name);
  call.input(self);
  call.attr(p.dims).attr(is_max);
  call.output(out);
  const Dims& dims = p.dims;
  call.run([&](Builder& b, const Values& in) { return Values{extreme_of(b, in[0], dims, is_max)}; });
}

// amax/amin over dims: out= must have self's dtype.
template <bool kMax>
struct Amax {
  static constexpr const char* kName = kMax ? "amax" : "amin";
  static ReduceMeta meta(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
    TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", kMax ? "max_values_cpu" : "min_values_cpu",
                                "\" not implemented for '", c10::toString(self.scalar_type()), "'");
    Plan p = plan(self, dim, keepdim);
    check_nonempty(self, p, kName);
    return reduce_meta(std::move(p), self.scalar_type(), self, OutDtype::kOwn);
  }
  static void check_out(const at::Tensor& out, const ReduceMeta&, const at::Tensor& self, c10::IntArrayRef, bool) {
    TORCH_CHECK(self.scalar_type() == out.scalar_type(), "Expected the dtype for input and out to match, but got ",
                self.scalar_type(), " for input's dtype and ", out.scalar_type(), " for out's dtype.");
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, c10::IntArrayRef, bool) {
    extreme_into(kName, self, m.p, kMax, out);
  }
};

// max()/min() of everything: out= takes any dtype self casts to.
template <bool kMax>
struct MaxAll {
  static constexpr const char* kName = kMax ? "max" : "min";
  static ReduceMeta meta(const at::Tensor& self) {
    TORCH_CHECK_NOT_IMPLEMENTED(!self.is_complex(), "\"", kMax ? "max_all" : "min_all", "\" not implemented for '",
                                c10::toString(self.scalar_type()), "'");
    Plan p = plan(self, std::nullopt, false);
    check_nonempty(self, p, kName);
    return reduce_meta(std::move(p), self.scalar_type(), self, OutDtype::kOwn);
  }
  static void check_out(const at::Tensor& out, const ReduceMeta&, const at::Tensor& self) {
    TORCH_CHECK(c10::canCast(self.scalar_type(), out.scalar_type()),
                "Expected canCast(self.dtype, out.dtype) to be "
                "true, but got false.");
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self) {
    extreme_into(kName, self, m.p, kMax, out);
  }
};

// --- max.dim / min.dim / argmax / argmin --------------------------------------

// Combiner over (value, index) pairs: the larger (smaller) value wins, NaN
// beats everything, and ties go to the lower index. That is a total order,
// so the result does not depend on XLA's reduction order.
std::shared_ptr<ir::Graph> arg_region(ElemType v, bool is_max) {
  auto g = std::make_shared<ir::Graph>();
  Value av = g->param({v, {}});
  Value ai = g->param({ElemType::kS64, {}});
  Value bv = g->param({v, {}});
  Value bi = g->param({ElemType::kS64, {}});
  Builder rb(*g);
  Value better = rb.compare(av, bv, is_max ? Direction::kGt : Direction::kLt);
  Value same = rb.compare(av, bv, Direction::kEq);
  if (ir::is_float(v)) {
    Value a_nan = rb.compare(av, av, Direction::kNe);
    Value b_nan = rb.compare(bv, bv, Direction::kNe);
    better = rb.or_(better, rb.and_(a_nan, rb.not_(b_nan)));
    same = rb.or_(same, rb.and_(a_nan, b_nan));
  }
  Value take_a = rb.or_(better, rb.and_(same, rb.compare(ai, bi, Direction::kLt)));
  g->set_outputs({rb.select(take_a, av, bv), rb.select(take_a, ai, bi)});
  return g;
}

// {values, indices} of the max (min) of `x` over `dim` (one dim).
Values arg_reduce(Builder& b, Value x, int64_t dim, bool is_max) {
  if (b.elem(x) == ElemType::kPred) x = b.convert(x, ElemType::kS8);
  ElemType e = b.elem(x);
  Value idx = b.iota(b.dims(x), dim, ElemType::kS64);
  Value init_v = is_max ? lowest(b, e) : highest(b, e);
  Value init_i = b.constant_bits(static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), ElemType::kS64);
  return b.reduce_multi({x, idx}, {init_v, init_i}, {dim}, arg_region(e, is_max));
}

void max_dim_into(const char* name, const at::Tensor& self, int64_t dim, bool is_max, const at::Tensor& values,
                  const at::Tensor& indices) {
  record::OpCall call(name);
  call.input(self);
  call.attr(dim).attr(is_max);
  call.output(values);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) {
    if (b.type(in[0]).rank() == 0) return Values{in[0], zero(b, ElemType::kS64)};
    return arg_reduce(b, in[0], dim, is_max);
  });
}

struct DimMeta : PairMeta {
  int64_t dim = 0;
};

// max.dim / min.dim: values and their indices over one dim.
template <bool kMax>
struct MaxDim {
  static constexpr const char* kName = kMax ? "max" : "min";
  static DimMeta meta(const at::Tensor& self, int64_t dim, bool keepdim) {
    Plan p = plan(self, c10::IntArrayRef{dim}, keepdim);
    check_nonempty(self, p, kName);
    DimMeta m;
    static_cast<PairMeta&>(m) = values_and_indices(self, p.out_shape);
    m.dim = wrap_dim(dim, self.dim());
    return m;
  }
  static void impl(const at::Tensor& values, const at::Tensor& indices, const DimMeta& m, const at::Tensor& self,
                   int64_t, bool) {
    max_dim_into(kName, self, m.dim, kMax, values, indices);
  }
};

template <bool kMax>
struct Argmax {
  static constexpr const char* kName = kMax ? "argmax" : "argmin";
  static ReduceMeta meta(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    TORCH_CHECK(self.scalar_type() != c10::kBool, kName, "(): does not support bool input");
    Plan p = dim ? plan(self, c10::IntArrayRef{*dim}, keepdim) : plan(self, std::nullopt, keepdim);
    check_nonempty(self, p, kName, /*index_error_when_all=*/true);
    return reduce_meta(std::move(p), c10::kLong, self, OutDtype::kExact);
  }
  static void impl(const at::Tensor& out, const ReduceMeta&, const at::Tensor& self, std::optional<int64_t> dim, bool) {
    int64_t d = dim ? wrap_dim(*dim, self.dim()) : -1;  // -1: over the flattened tensor
    record::OpCall call(kName);
    call.input(self);
    call.attr(d);
    call.output(out);
    call.run([&](Builder& b, const Values& in) {
      Value x = in[0];
      if (b.type(x).rank() == 0) return Values{zero(b, ElemType::kS64)};
      int64_t rd = d;
      if (rd < 0) {
        x = b.reshape(x, {b.type(x).numel()});
        rd = 0;
      }
      return Values{arg_reduce(b, x, rd, kMax)[1]};
    });
  }
};

// --- var / std ---------------------------------------------------------------

// {up, down} over `dims` of float x (f32 or f64): up is a power of two near
// max|x| and down is 1/up, both exact (normal numbers); 1 where max|x| is 0,
// subnormal, inf or nan.
std::pair<Value, Value> pow2_scale(Builder& b, Value x, const Dims& dims) {
  ElemType e = b.elem(x);
  bool f64 = e == ElemType::kF64;
  ElemType ie = f64 ? ElemType::kS64 : ElemType::kS32;
  int64_t mant = f64 ? 52 : 23;
  int64_t max_biased = f64 ? 2046 : 254;  // largest biased exponent of a finite number
  Value m = fold(b, b.abs(x), dims, BinaryOp::kMax, zero(b, e));
  const Dims& d = b.dims(m);
  Value biased = b.shr_logical(b.bitcast_convert(m, ie), b.constant(mant, ie, d));
  Value ok = b.and_(b.compare(biased, b.constant(1, ie, d), Direction::kGe),
                    b.compare(biased, b.constant(max_biased, ie, d), Direction::kLe));
  // up = 2^(biased - bias), down = 2^(bias - biased): both stay normal.
  biased = b.clamp(b.constant(1, ie, d), biased, b.constant(max_biased - 1, ie, d));
  Value shift = b.constant(mant, ie, d);
  Value up = b.bitcast_convert(b.shl(biased, shift), e);
  Value down = b.bitcast_convert(b.shl(b.sub(b.constant(max_biased, ie, d), biased), shift), e);
  Value one = b.constant(1.0, e, d);
  return {b.select(ok, up, one), b.select(ok, down, one)};
}

// Writes var (or std) and, when `mean_out` is defined, the mean.
void var_into(const char* name, const at::Tensor& self, const Plan& p, const std::optional<c10::Scalar>& correction,
              bool take_sqrt, const at::Tensor& out, const at::Tensor& mean_out) {
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()), "std and var only support floating point and complex dtypes");
  double c = correction ? correction->toDouble() : 1.0;
  double divisor = std::max(0.0, static_cast<double>(p.count) - c);
  if (divisor <= 0)
    TORCH_WARN(name,
               "(): degrees of freedom is <= 0. Correction should be strictly less than the reduction factor "
               "(input numel divided by output numel).");
  c10::ScalarType compute = out.scalar_type();
  TORCH_CHECK(c10::isFloatingType(compute), "result type ", self.scalar_type(),
              " can't be cast to the desired output "
              "type ",
              compute);
  ElemType acc = acc_of(compute);
  record::OpCall call(name);
  call.input(self);
  call.scalar(divisor, acc_scalar(compute));
  call.attr(p.dims).attr(take_sqrt).attr(static_cast<int64_t>(compute));
  call.output(out);
  if (mean_out.defined()) call.output(mean_out);
  const Dims& dims = p.dims;
  bool with_mean = mean_out.defined();
  int64_t n = p.count;
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], acc);
    // CPU accumulates in double, so float32 inputs whose squares (or sum)
    // overflow float32 still get a finite std. Work on x scaled by a power
    // of two near max|x| (exact), and scale the results back. (float64
    // overflows where CPU's double Welford sums overflow too.)
    Value up, down;
    if (acc == ElemType::kF32) {
      std::tie(up, down) = pow2_scale(b, x, dims);
      x = b.mul(x, expand_back(b, down, b.dims(x), dims));
    }
    Value mean = sum_of(b, x, dims);
    mean = b.div(mean, scalar_like(b, static_cast<double>(n), mean));
    Value centred = b.sub(x, expand_back(b, mean, b.dims(x), dims));
    Value ss = sum_of(b, b.mul(centred, centred), dims);
    Value div = b.broadcast_to(in[1], b.dims(ss));
    Value v = b.div(ss, div);
    // var = v * up^2, multiplied in two steps: up^2 alone may overflow.
    if (take_sqrt) v = b.sqrt(v);
    if (acc == ElemType::kF32) {
      v = take_sqrt ? b.mul(v, up) : b.mul(b.mul(v, up), up);
      mean = b.mul(mean, up);
    }
    Values r{v};
    if (with_mean) r.push_back(mean);
    return r;
  });
}

template <bool kStd>
struct Var {
  static constexpr const char* kName = kStd ? "std" : "var";
  static ReduceMeta meta(const at::Tensor& self, at::OptionalIntArrayRef dim, const std::optional<c10::Scalar>&,
                         bool keepdim) {
    Plan p = plan(self, dim, keepdim);
    TORCH_CHECK(c10::isFloatingType(self.scalar_type()), "std and var only support floating point and complex dtypes");
    return reduce_meta(std::move(p), self.scalar_type(), self, OutDtype::kCastable);
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, at::OptionalIntArrayRef,
                   const std::optional<c10::Scalar>& correction, bool) {
    var_into(kName, self, m.p, correction, kStd, out, at::Tensor());
  }
};
// var_mean / std_mean: one program gives both.
struct VarMeanMeta : PairMeta {
  Plan p;
};
template <bool kStd>
struct VarMean {
  static constexpr const char* kName = kStd ? "std_mean" : "var_mean";
  static VarMeanMeta meta(const at::Tensor& self, at::OptionalIntArrayRef dim,
                          const std::optional<c10::Scalar>& correction, bool keepdim) {
    ReduceMeta r = Var<kStd>::meta(self, dim, correction, keepdim);
    VarMeanMeta m;
    m.results[0] = r;
    m.results[1] = r;
    m.p = std::move(r.p);
    return m;
  }
  static void impl(const at::Tensor& out, const at::Tensor& mean, const VarMeanMeta& m, const at::Tensor& self,
                   at::OptionalIntArrayRef, const std::optional<c10::Scalar>& correction, bool) {
    var_into(kName, self, m.p, correction, kStd, out, mean);
  }
};

// --- linalg_vector_norm / norm ------------------------------------------------

std::string ord_text(double ord) {
  if (std::isinf(ord)) return ord > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os << ord;
  return os.str();
}

// Checks and result dtype of linalg.vector_norm.
c10::ScalarType norm_dtype(const at::Tensor& self, double ord, const Plan& p, std::optional<c10::ScalarType> dtype) {
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()),
              "linalg.vector_norm: Expected a floating point or complex tensor as input. Got ", self.scalar_type());
  if (dtype) {
    TORCH_CHECK(c10::isFloatingType(*dtype), "linalg.vector_norm: dtype should be floating point or complex, but got ",
                *dtype);
    TORCH_CHECK(c10::promoteTypes(self.scalar_type(), *dtype) == *dtype, "linalg.vector_norm: the dtype of the input (",
                self.scalar_type(), ") should be convertible without narrowing to the specified dtype (", *dtype, ")");
  }
  if (self.numel() == 0 && (ord < 0 || std::isinf(ord))) {
    TORCH_CHECK(!p.all, "linalg.vector_norm cannot compute the ", ord_text(ord),
                " norm on an empty tensor because the operation does not have an identity");
    for (int64_t d : p.dims)
      TORCH_CHECK(self.size(d) != 0, "linalg.vector_norm cannot compute the ", ord_text(ord), " norm on the dimension ",
                  d, "because this dimension is empty and the operation does not have an identity");
  }
  return dtype.value_or(self.scalar_type());
}

void norm_into(const at::Tensor& self, const Plan& p, double ord, c10::ScalarType dtype, const at::Tensor& out) {
  // Special orders change the program; any other p is a runtime scalar.
  int64_t kind = ord == 0 ? 0 : ord == 1 ? 1 : ord == 2 ? 2 : std::isinf(ord) ? (ord > 0 ? 3 : 4) : 5;
  ElemType de = to_elem(dtype), acc = acc_of(dtype);
  record::OpCall call("linalg_vector_norm");
  call.input(self);
  if (kind == 5) {
    call.scalar(ord, acc_scalar(dtype));
    call.scalar(1.0 / ord, acc_scalar(dtype));
  }
  call.attr(p.dims).attr(kind).attr(static_cast<int64_t>(dtype));
  call.output(out);
  const Dims& dims = p.dims;
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(b.convert(in[0], de), acc);
    Value a = b.abs(x);
    switch (kind) {
      case 0:
        return Values{sum_of(b, b.convert(b.compare(x, zero(b, acc, b.dims(x)), Direction::kNe), acc), dims)};
      case 1:
        return Values{sum_of(b, a, dims)};
      case 2:
        return Values{b.sqrt(sum_of(b, b.mul(x, x), dims))};
      case 3:
        return Values{extreme_of(b, a, dims, true)};
      case 4:
        return Values{extreme_of(b, a, dims, false)};
      default: {
        Value pw = b.pow(a, b.broadcast_to(in[1], b.dims(a)));
        Value s = sum_of(b, pw, dims);
        return Values{b.pow(s, b.broadcast_to(in[2], b.dims(s)))};
      }
    }
  });
}

struct VectorNorm {
  static constexpr const char* kName = "linalg_vector_norm";
  static ReduceMeta meta(const at::Tensor& self, const c10::Scalar& ord, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<c10::ScalarType> dtype) {
    Plan p = plan(self, dim, keepdim);
    auto dt = norm_dtype(self, ord.toDouble(), p, dtype);
    return reduce_meta(std::move(p), dt, self, OutDtype::kExact);
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, const c10::Scalar& ord,
                   at::OptionalIntArrayRef, bool, std::optional<c10::ScalarType>) {
    norm_into(self, m.p, ord.toDouble(), m.dtype, out);
  }
};
// norm(self, p, dim, keepdim[, dtype]): linalg_vector_norm, p 2 when None.
struct NormDtype {
  static constexpr const char* kName = "norm";
  static ReduceMeta meta(const at::Tensor& self, const std::optional<c10::Scalar>& p, c10::IntArrayRef dim,
                         bool keepdim, c10::ScalarType dtype) {
    return VectorNorm::meta(self, p.value_or(2.0), dim, keepdim, dtype);
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self,
                   const std::optional<c10::Scalar>& p, c10::IntArrayRef dim, bool keepdim, c10::ScalarType dtype) {
    VectorNorm::impl(out, m, self, p.value_or(2.0), dim, keepdim, dtype);
  }
};
struct Norm {
  static constexpr const char* kName = "norm";
  static ReduceMeta meta(const at::Tensor& self, const std::optional<c10::Scalar>& p, c10::IntArrayRef dim,
                         bool keepdim) {
    return VectorNorm::meta(self, p.value_or(2.0), dim, keepdim, std::nullopt);
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self,
                   const std::optional<c10::Scalar>& p, c10::IntArrayRef dim, bool keepdim) {
    VectorNorm::impl(out, m, self, p.value_or(2.0), dim, keepdim, std::nullopt);
  }
};

// --- any / all ---------------------------------------------------------------

c10::ScalarType anyall_dtype(const at::Tensor& self) {
  return self.scalar_type() == c10::kByte ? c10::kByte : c10::kBool;
}

// any/all of a whole tensor with room (shape/append.h): its storage, with
// the room's elements masked off at a runtime length.
bool anyall_over_room(const at::Tensor& self, bool is_any, const at::Tensor& out) {
  const int64_t room = room_of(self);
  if (room == 0 || out.numel() != 1) return false;
  record::OpCall call(is_any ? "any_room" : "all_room");
  call.input(whole_of(self));
  call.scalar(self.numel(), at::kLong);
  call.output(out);
  const Dims shape = dims_of(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    if (b.elem(x) != ElemType::kPred) x = b.compare(x, zero(b, b.elem(x), b.dims(x)), Direction::kNe);
    Value inside = b.compare(b.iota({room}, 0, ElemType::kS64), b.broadcast_to(in[1], {room}), Direction::kLt);
    Value neutral = b.constant(is_any ? 0 : 1, ElemType::kPred, {room});
    x = b.select(inside, x, neutral);
    return Values{b.reshape(
        fold(b, x, {0}, is_any ? BinaryOp::kOr : BinaryOp::kAnd, b.constant(is_any ? 0 : 1, ElemType::kPred)), shape)};
  });
  return true;
}

void anyall_into(const at::Tensor& self, const Plan& p, bool is_any, const at::Tensor& out) {
  if (anyall_over_room(self, is_any, out)) return;
  record::OpCall call(is_any ? "any" : "all");
  call.input(self);
  call.attr(p.dims).attr(is_any);
  call.output(out);
  const Dims& dims = p.dims;
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    if (b.elem(x) != ElemType::kPred) x = b.compare(x, zero(b, b.elem(x), b.dims(x)), Direction::kNe);
    return Values{
        fold(b, x, dims, is_any ? BinaryOp::kOr : BinaryOp::kAnd, b.constant(is_any ? 0 : 1, ElemType::kPred))};
  });
}

// any/all over named dims, one dim, or everything: out= is bool or uint8.
template <bool kAny, class Dim>
struct AnyAll {
  static constexpr const char* kName = kAny ? "any" : "all";
  static ReduceMeta meta(const at::Tensor& self, Dim dim, bool keepdim) {
    Plan p;
    if constexpr (std::is_same_v<Dim, int64_t>)
      p = plan(self, c10::IntArrayRef{dim}, keepdim, /*empty_is_all=*/false);
    else
      p = plan(self, dim, keepdim, /*empty_is_all=*/false);
    return reduce_meta(std::move(p), anyall_dtype(self), self, OutDtype::kOwn);
  }
  static void check_out(const at::Tensor& out, const ReduceMeta&, const at::Tensor&, Dim, bool) {
    TORCH_CHECK(out.scalar_type() == c10::kBool || out.scalar_type() == c10::kByte, kName,
                " only supports bool tensor for result, got: ", out.scalar_type());
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, Dim, bool) {
    anyall_into(self, m.p, kAny, out);
  }
};
template <bool kAny>
struct AnyAllOfAll {
  static constexpr const char* kName = kAny ? "any" : "all";
  using OverDims = AnyAll<kAny, at::OptionalIntArrayRef>;
  static ReduceMeta meta(const at::Tensor& self) { return OverDims::meta(self, std::nullopt, false); }
  static void check_out(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self) {
    OverDims::check_out(out, m, self, std::nullopt, false);
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self) {
    anyall_into(self, m.p, kAny, out);
  }
};

// --- logsumexp ---------------------------------------------------------------

void logsumexp_into(const at::Tensor& self, const Plan& p, const at::Tensor& out) {
  c10::ScalarType dtype = out.scalar_type();
  ElemType acc = acc_of(dtype);
  record::OpCall call("logsumexp");
  call.input(self);
  call.attr(p.dims).attr(static_cast<int64_t>(dtype));
  call.output(out);
  const Dims& dims = p.dims;
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], acc);
    // Shift by the max for stability; an infinite max is replaced by 0 so
    // that all -inf gives -inf and +inf gives +inf rather than NaN.
    Value m = extreme_of(b, x, dims, true);
    Value inf = b.constant(std::numeric_limits<double>::infinity(), acc, b.dims(m));
    Value finite = b.compare(b.abs(m), inf, Direction::kLt);
    Value shift = b.select(finite, m, zero(b, acc, b.dims(m)));
    Value e = b.exp(b.sub(x, expand_back(b, shift, b.dims(x), dims)));
    Value r = b.log(sum_of(b, e, dims));
    return Values{b.add(r, shift)};
  });
}

struct Logsumexp {
  static constexpr const char* kName = "logsumexp";
  static ReduceMeta meta(const at::Tensor& self, c10::IntArrayRef dim, bool keepdim) {
    return reduce_meta(plan(self, dim, keepdim), float_result(self.scalar_type()), self, OutDtype::kOwn);
  }
  static void check_out(const at::Tensor& out, const ReduceMeta&, const at::Tensor&, c10::IntArrayRef, bool) {
    TORCH_CHECK(c10::isFloatingType(out.scalar_type()),
                "logsumexp(): Expected floating point type for result tensor, but got: ", out.scalar_type());
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, c10::IntArrayRef, bool) {
    logsumexp_into(self, m.p, out);
  }
};

// --- nansum / aminmax ------------------------------------------------------------

using c10::ScalarType;

at::Tensor nan_zeroed(const at::Tensor& self) {
  if (!c10::isFloatingType(self.scalar_type())) return self;
  return at::where(at::isnan(self), at::zeros_like(self), self);
}
void check_nansum(const at::Tensor& self) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
}
// sum with NaNs counted as zero. CPU's out= kernel for a floating self
// runs in out's dtype and has floating kernels only (the functional form
// with an integer dtype= converts first, as sum does).
void check_nansum_dtype(const at::Tensor& self, ScalarType result) {
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isFloatingType(self.scalar_type()) || c10::isFloatingType(result),
                              "\"nansum_cpu\" not implemented for '", c10::toString(result), "'");
}
struct Nansum {
  static constexpr const char* kName = "nansum";
  static ReduceMeta meta(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                         std::optional<ScalarType> dtype) {
    check_nansum(self);
    return Sum::meta(self, dim, keepdim, dtype);
  }
  static void check_out(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, at::OptionalIntArrayRef dim,
                        bool keepdim, std::optional<ScalarType> dtype) {
    Sum::check_out(out, m, self, dim, keepdim, dtype);
    check_nansum_dtype(self, out.scalar_type());
  }
  static void impl(const at::Tensor& out, const ReduceMeta& m, const at::Tensor& self, at::OptionalIntArrayRef, bool,
                   std::optional<ScalarType>) {
    sum_prod(nan_zeroed(self), m.p, out.scalar_type(), out, false);
  }
};

std::vector<int64_t> aminmax_dims(const at::Tensor& self, std::optional<int64_t> dim) {
  if (dim.has_value()) {
    int64_t d = wrap_dim(*dim, std::max<int64_t>(self.dim(), 1));
    TORCH_CHECK(self.dim() == 0 || self.size(d) != 0, "aminmax(): Expected reduction dim ", d,
                " to have non-zero size.");
    return self.dim() == 0 ? std::vector<int64_t>{} : std::vector<int64_t>{d};
  }
  TORCH_CHECK(self.numel() > 0,
              "aminmax(): cannot compute aminmax over an empty dimension as the operation has "
              "no identity.");
  std::vector<int64_t> all;
  for (int64_t i = 0; i < self.dim(); ++i) all.push_back(i);
  return all;
}
struct AminmaxMeta : PairMeta {
  std::vector<int64_t> dims;
};
struct Aminmax {
  static constexpr const char* kName = "aminmax";
  static AminmaxMeta meta(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
    AminmaxMeta m;
    m.dims = aminmax_dims(self, dim);
    std::vector<int64_t> sizes = self.dim() == 0 ? std::vector<int64_t>{} : plan(self, m.dims, keepdim).out_shape;
    m.results[0] = OutMeta{sizes, self.scalar_type(), self.device(), OutDtype::kExact, false};
    m.results[1] = m.results[0];
    return m;
  }
  static void impl(const at::Tensor& mn, const at::Tensor& mx, const AminmaxMeta& m, const at::Tensor& self,
                   std::optional<int64_t>, bool keepdim) {
    if (self.dim() == 0) {
      mn.copy_(self);
      mx.copy_(self);
      return;
    }
    // amin and amax record into one graph in fused eager and compiled runs.
    at::Tensor mn_out = mn, mx_out = mx;
    at::amin_out(mn_out, self, m.dims, keepdim);
    at::amax_out(mx_out, self, m.dims, keepdim);
  }
};

// --- count_nonzero ----------------------------------------------------------

at::Tensor count_nonzero_dims(const at::Tensor& self, c10::IntArrayRef dims) {
  int64_t r = self.dim();
  std::vector<bool> seen(std::max<int64_t>(r, 1), false);
  Dims red;
  for (int64_t x : dims) {
    int64_t d = wrap_dim(x, r);
    TORCH_CHECK(!seen[d], "dim ", d, " appears multiple times in the list of dims");
    seen[d] = true;
    if (r > 0) red.push_back(d);
  }
  if (dims.empty())
    for (int64_t i = 0; i < r; ++i) red.push_back(i);
  std::sort(red.begin(), red.end());
  std::vector<int64_t> oshape;
  for (int64_t i = 0; i < r; ++i)
    if (std::find(red.begin(), red.end(), i) == red.end()) oshape.push_back(self.size(i));
  at::Tensor out = empty_tpu(oshape, c10::kLong, self.device());
  Dims shape(self.sizes().begin(), self.sizes().end());
  record::OpCall call("count_nonzero");
  call.attr(c10::IntArrayRef(red));
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value nz = b.convert(b.compare(in[0], zero(b, b.elem(in[0]), shape), Direction::kNe), kS64);
    return Values{b.reduce(nz, zero(b, kS64), red, BinaryOp::kAdd)};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Sum>(m, {"sum.dim_IntList", "", "sum.IntList_out"});
  register_variants<Nansum>(m, {"nansum", "", "nansum.out"});
  register_variants<Mean>(m, {"mean.dim", "", "mean.out"});
  m.impl("prod", prod_all);
  register_variants<Prod>(m, {"prod.dim_int", "", "prod.int_out"});
  register_variants<Amax<true>>(m, {"amax", "", "amax.out"});
  register_variants<Amax<false>>(m, {"amin", "", "amin.out"});
  register_variants<MaxAll<true>>(m, {"max", "", "max.unary_out"});
  register_variants<MaxAll<false>>(m, {"min", "", "min.unary_out"});
  register_variants<MaxDim<true>>(m, {"max.dim", "", "max.dim_max"});
  register_variants<MaxDim<false>>(m, {"min.dim", "", "min.dim_min"});
  register_variants<Argmax<true>>(m, {"argmax", "", "argmax.out"});
  register_variants<Argmax<false>>(m, {"argmin", "", "argmin.out"});
  register_variants<Var<false>>(m, {"var.correction", "", "var.correction_out"});
  register_variants<Var<true>>(m, {"std.correction", "", "std.correction_out"});
  register_variants<VarMean<false>>(m, {"var_mean.correction", "", ""});
  register_variants<VarMean<true>>(m, {"std_mean.correction", "", ""});
  register_variants<VectorNorm>(m, {"linalg_vector_norm", "", "linalg_vector_norm.out"});
  register_variants<Norm>(m, {"norm.ScalarOpt_dim", "", "norm.out"});
  register_variants<NormDtype>(m, {"norm.ScalarOpt_dim_dtype", "", "norm.dtype_out"});
  register_variants<AnyAllOfAll<true>>(m, {"any", "", "any.all_out"});
  register_variants<AnyAll<true, int64_t>>(m, {"any.dim", "", "any.out"});
  register_variants<AnyAll<true, at::OptionalIntArrayRef>>(m, {"any.dims", "", "any.dims_out"});
  register_variants<AnyAllOfAll<false>>(m, {"all", "", "all.all_out"});
  register_variants<AnyAll<false, int64_t>>(m, {"all.dim", "", "all.out"});
  register_variants<AnyAll<false, at::OptionalIntArrayRef>>(m, {"all.dims", "", "all.dims_out"});
  register_variants<Logsumexp>(m, {"logsumexp", "", "logsumexp.out"});
  register_variants<Aminmax>(m, {"aminmax", "", "aminmax.out"});
  m.impl("count_nonzero.dim_IntList", count_nonzero_dims);
}

}  // namespace
}  // namespace torch_tpu::ops
