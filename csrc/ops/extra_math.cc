// Assorted math ops the OpInfo sweep found missing: rsub, equal, nansum,
// logaddexp/logaddexp2, heaviside, sinc, signbit, aminmax, logspace, and
// the special functions lgamma/digamma/polygamma/i0. Reductions and
// host-side predicates compose existing tpu ops; elementwise ones lower
// directly. Half types compute in f32 (opmath) and round once.
#include <ATen/native/Resize.h>
#include <ATen/ops/all.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/index.h>
#include <ATen/ops/index_put.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/sum.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

void check_float_kernel(ScalarType t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t), "\"", kernel, "\" not implemented for '", c10::toString(t), "'");
}

// --- rsub / equal ------------------------------------------------------------

// other - alpha * self; sub carries the dtype/bool/alpha checks.
at::Tensor rsub(const at::Tensor& self, const at::Tensor& other, const c10::Scalar& alpha) {
  return at::sub(other, self, alpha);
}

// Host sync: equal returns a Python bool. NaN != NaN, as on CPU.
bool equal(const at::Tensor& self, const at::Tensor& other) {
  if (!self.sizes().equals(other.sizes())) return false;
  if (self.numel() == 0) return true;
  return at::eq(self, other).all().item<bool>();
}

// --- nansum / aminmax ------------------------------------------------------------

at::Tensor nan_zeroed(const at::Tensor& self) {
  if (!c10::isFloatingType(self.scalar_type())) return self;
  return at::where(at::isnan(self), at::zeros_like(self), self);
}
void check_nansum(const at::Tensor& self) {
  TORCH_CHECK(!c10::isComplexType(self.scalar_type()), "nansum does not support complex inputs");
}
at::Tensor nansum(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim, std::optional<ScalarType> dtype) {
  check_nansum(self);
  return at::sum(nan_zeroed(self), dim, keepdim, dtype);
}
at::Tensor& nansum_out(const at::Tensor& self, at::OptionalIntArrayRef dim, bool keepdim,
                       std::optional<ScalarType> dtype, at::Tensor& out) {
  check_nansum(self);
  return at::sum_out(out, nan_zeroed(self), dim, keepdim, dtype);
}

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
std::tuple<at::Tensor, at::Tensor> aminmax_fn(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim) {
  auto dims = aminmax_dims(self, dim);
  if (self.dim() == 0) return {self.clone(), self.clone()};
  return {at::amin(self, dims, keepdim), at::amax(self, dims, keepdim)};
}
std::tuple<at::Tensor&, at::Tensor&> aminmax_out(const at::Tensor& self, std::optional<int64_t> dim, bool keepdim,
                                                 at::Tensor& mn, at::Tensor& mx) {
  auto [a, b] = aminmax_fn(self, dim, keepdim);
  TORCH_CHECK(mn.scalar_type() == self.scalar_type() && mx.scalar_type() == self.scalar_type(),
              "Expected out tensor to have dtype ", self.scalar_type(), ", but got ", mn.scalar_type(), " instead");
  prepare_out(mn, a.sizes(), a.scalar_type(), "aminmax");
  prepare_out(mx, b.sizes(), b.scalar_type(), "aminmax");
  mn.copy_(a);
  mx.copy_(b);
  return {mn, mx};
}

// --- logspace ------------------------------------------------------------------

at::Tensor& logspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base,
                         at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  ScalarType dt = out.scalar_type();
  // Integers: exponents and powers in double, truncated on the way out (as CPU).
  ScalarType compute = c10::isIntegralType(dt, true) || dt == c10::kDouble ? c10::kDouble : c10::kFloat;
  at::Tensor e = at::linspace(start, end, steps, at::TensorOptions().dtype(compute).device(out.device()));
  at::Tensor p = at::pow(c10::Scalar(base), e);
  if (out.numel() != steps) at::native::resize_output(out, {steps});
  out.copy_(p);
  return out;
}

// --- take / put_ ------------------------------------------------------------------
// Both treat self as flattened in row-major order; advanced indexing on the
// flat tensor gives negative-index wrapping and IndexError bounds checks.

at::Tensor take_fn(const at::Tensor& self, const at::Tensor& index) {
  TORCH_CHECK(index.scalar_type() == c10::kLong, "take(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "take(): tried to take from an empty tensor");
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(index.reshape({-1}));
  return at::index(self.reshape({-1}), idx).view(index.sizes());
}
at::Tensor& take_out(const at::Tensor& self, const at::Tensor& index, at::Tensor& out) {
  at::Tensor r = take_fn(self, index);
  prepare_out(out, r.sizes(), self.scalar_type(), "take");
  out.copy_(r);
  return out;
}

at::Tensor& put_(at::Tensor& self, const at::Tensor& index, const at::Tensor& source, bool accumulate) {
  TORCH_CHECK(index.scalar_type() == c10::kLong, "put_(): Expected a long tensor for index, but got ",
              index.scalar_type());
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "put_(): self and source expected to have the same "
              "dtype, but got self.dtype = ",
              self.scalar_type(), " and source.dtype = ", source.scalar_type());
  TORCH_CHECK_INDEX(index.numel() == source.numel(),
                    "put_(): Expected source and index to have the same number of "
                    "elements, but got source.numel() = ",
                    source.numel(), ", index.numel() = ", index.numel());
  TORCH_CHECK_INDEX(self.numel() > 0 || index.numel() == 0, "put_(): Tried to put elements into an empty tensor");
  if (index.numel() == 0) return self;
  at::Tensor flat = self.reshape({-1}).clone();
  c10::List<std::optional<at::Tensor>> idx;
  idx.push_back(index.reshape({-1}));
  flat.index_put_(idx, source.reshape({-1}), accumulate);
  self.copy_(flat.view(self.sizes()));
  return self;
}

// --- cummax / cummin ----------------------------------------------------------------
// CPU moves the index to j whenever x[j] is NaN or ties/beats the running
// extreme, i.e. whenever x[j] equals the running extreme at j (NaN once a
// NaN was seen). So indices are a running max of those j, and both outputs
// are plain reduce_window scans.

Value running(Builder& b, Value x, int64_t dim, Value init, BinaryOp kind) {
  int64_t r = b.type(x).rank();
  int64_t n = b.dims(x)[dim];
  std::vector<int64_t> window(r, 1), strides(r, 1), dil(r, 1);
  std::vector<std::pair<int64_t, int64_t>> padding(r, {0, 0});
  window[dim] = n;
  padding[dim] = {n - 1, 0};
  return b.reduce_window(x, init, window, strides, dil, dil, padding, kind);
}

template <bool kMax>
void cummaxmin_helper(const at::Tensor& self, at::Tensor& values, at::Tensor& indices, int64_t dim) {
  int64_t d = wrap_dim(dim, self.dim());
  record::OpCall call(kMax ? "cummax" : "cummin");
  call.attr(d);
  call.input(self);
  call.output(values);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    if (b.type(x).rank() == 0) return Values{x, b.constant(0, ElemType::kS64)};
    BinaryOp ext = kMax ? BinaryOp::kMax : BinaryOp::kMin;
    ElemType et = b.elem(x);
    Value v;
    Value hit;
    if (ir::is_float(et)) {
      Value isnan = b.compare(x, x, Direction::kNe);
      Value clean = b.select(isnan, b.constant(kMax ? -INFINITY : INFINITY, et, b.dims(x)), x);
      Value ext_v = running(b, clean, d, kMax ? lowest(b, et) : highest(b, et), ext);
      Value nan_seen = running(b, b.convert(isnan, ElemType::kS32), d, b.constant(0, ElemType::kS32), BinaryOp::kMax);
      nan_seen = b.compare(nan_seen, b.constant(0, ElemType::kS32, b.dims(x)), Direction::kNe);
      v = b.select(nan_seen, b.constant(NAN, et, b.dims(x)), ext_v);
      hit = b.or_(isnan, b.compare(x, v, Direction::kEq));
    } else if (et == ElemType::kPred) {
      Value xi = b.convert(x, ElemType::kS32);
      Value vi = running(b, xi, d, b.constant(kMax ? 0 : 1, ElemType::kS32), ext);
      v = b.convert(vi, et);
      hit = b.compare(xi, vi, Direction::kEq);
    } else {
      v = running(b, x, d, kMax ? lowest(b, et) : highest(b, et), ext);
      hit = b.compare(x, v, Direction::kEq);
    }
    Value j = b.iota(b.dims(x), d, ElemType::kS64);
    Value cand = b.select(hit, j, b.constant(-1, ElemType::kS64, b.dims(x)));
    Value idx = running(b, cand, d, b.constant(-1, ElemType::kS64), BinaryOp::kMax);
    return Values{v, idx};
  });
}

// --- binary elementwise ------------------------------------------------------------

// mode 0: logaddexp, 1: logaddexp2. Equal infinities return themselves
// (inf - inf would be NaN).
Value logaddexp_fn(Builder& b, Value x, Value y, bool base2) {
  Value m = b.max(x, y);
  Value d = b.neg(b.abs(b.sub(x, y)));
  Value r;
  if (base2) {
    Value p = b.pow(full_like(b, 2.0, d), d);
    r = b.add(m, b.div(b.log1p(p), full_like(b, M_LN2, p)));
  } else {
    r = b.add(m, b.log1p(b.exp(d)));
  }
  Value inf_eq =
      b.and_(b.compare(x, y, Direction::kEq), b.compare(b.abs(x), full_like(b, INFINITY, x), Direction::kEq));
  return b.select(inf_eq, x, r);
}

template <bool kBase2>
void logaddexp_run(const at::Tensor& a, const at::Tensor& o, const at::Tensor& out) {
  ScalarType t = at::result_type(a, o);
  check_float_kernel(t, kBase2 ? "logaddexp2_cpu" : "logaddexp_cpu");
  pointwise(kBase2 ? "logaddexp2" : "logaddexp", {a, o}, out, opmath(t),
            [](Builder& b, const Values& x) { return logaddexp_fn(b, x[0], x[1], kBase2); });
}
template <bool kBase2>
at::Tensor logaddexp(const at::Tensor& a, const at::Tensor& o) {
  at::Tensor out = empty_tpu(broadcast_shape({a, o}), at::result_type(a, o), a.device());
  logaddexp_run<kBase2>(a, o, out);
  return out;
}
template <bool kBase2>
at::Tensor& logaddexp_out(const at::Tensor& a, const at::Tensor& o, at::Tensor& out) {
  prepare_out(out, broadcast_shape({a, o}), at::result_type(a, o), kBase2 ? "logaddexp2" : "logaddexp");
  logaddexp_run<kBase2>(a, o, out);
  return out;
}

void heaviside_run(const at::Tensor& a, const at::Tensor& v, const at::Tensor& out) {
  TORCH_CHECK(a.scalar_type() == v.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes");
  TORCH_CHECK(!c10::isComplexType(a.scalar_type()), "heaviside is not yet implemented for complex tensors.");
  pointwise("heaviside", {a, v}, out, a.scalar_type(), [](Builder& b, const Values& x) {
    Value z = zero(b, b.elem(x[0]), b.dims(x[0]));
    Value pos = b.convert(b.compare(x[0], z, Direction::kGt), b.elem(x[0]));
    return b.select(b.compare(x[0], z, Direction::kEq), x[1], pos);
  });
}
at::Tensor heaviside(const at::Tensor& a, const at::Tensor& v) {
  TORCH_CHECK(a.scalar_type() == v.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes");
  at::Tensor out = empty_tpu(broadcast_shape({a, v}), a.scalar_type(), a.device());
  heaviside_run(a, v, out);
  return out;
}
at::Tensor& heaviside_out(const at::Tensor& a, const at::Tensor& v, at::Tensor& out) {
  TORCH_CHECK(a.scalar_type() == v.scalar_type(), "heaviside is not yet implemented for tensors with different dtypes");
  prepare_out(out, broadcast_shape({a, v}), a.scalar_type(), "heaviside");
  heaviside_run(a, v, out);
  return out;
}
at::Tensor& heaviside_(at::Tensor& a, const at::Tensor& v) {
  check_inplace(a, broadcast_shape({a, v}), a.scalar_type());
  heaviside_run(a, v, a);
  return a;
}

// --- unary elementwise ---------------------------------------------------------------

struct UDef {
  const char* name;
  bool float_result;  // ints/bool -> default float; otherwise bool result
  bool ints_ok;
  Value (*fn)(Builder&, Value);
};

Value f_sinc(Builder& b, Value x) {
  Value px = b.mul(x, full_like(b, M_PI, x));
  Value r = b.div(b.sin(px), px);
  return b.select(b.compare(x, full_like(b, 0.0, x), Direction::kEq), full_like(b, 1.0, x), r);
}
Value f_signbit(Builder& b, Value x) {
  if (b.elem(x) == ElemType::kPred) return b.constant(0, ElemType::kPred, b.dims(x));
  Value z = zero(b, b.elem(x), b.dims(x));
  Value neg = b.compare(x, z, Direction::kLt);
  if (!ir::is_float(b.elem(x))) return neg;
  // -0.0: 1/x is -inf.
  Value negzero = b.and_(b.compare(x, z, Direction::kEq), b.compare(b.div(full_like(b, 1.0, x), x), z, Direction::kLt));
  return b.or_(neg, negzero);
}
Value f_lgamma(Builder& b, Value x) { return b.lgamma(x); }
Value f_digamma(Builder& b, Value x) {
  // CPU: digamma(+-0) = copysign(inf, -x); chlo gives NaN there.
  Value r = b.digamma(x);
  Value pole = b.select(f_signbit(b, x), full_like(b, INFINITY, x), full_like(b, -INFINITY, x));
  return b.select(b.compare(x, full_like(b, 0.0, x), Direction::kEq), pole, r);
}

// Modified Bessel I0 (Abramowitz & Stegun 9.8.1/9.8.2, ~2e-7 relative): a
// polynomial in (x/3.75)^2 for |x| <= 3.75, else exp(|x|)/sqrt(|x|) times a
// polynomial in 3.75/|x|; exp(|x|) is formed whole so it overflows
// (to inf) past |x| ~ 88.7 exactly as CPU's kernel does.
Value poly(Builder& b, Value t, std::initializer_list<double> c) {
  std::vector<double> cs(c);
  Value r = full_like(b, cs.back(), t);
  for (int i = static_cast<int>(cs.size()) - 2; i >= 0; --i) r = b.add(b.mul(r, t), full_like(b, cs[i], t));
  return r;
}
Value f_i0(Builder& b, Value x) {
  Value ax = b.abs(x);
  Value small_t = b.div(ax, full_like(b, 3.75, x));
  Value small =
      poly(b, b.mul(small_t, small_t), {1.0, 3.5156229, 3.0899424, 1.2067492, 0.2659732, 0.0360768, 0.0045813});
  Value big_x = b.max(ax, full_like(b, 3.75, x));  // keeps the unused branch finite
  Value t = b.div(full_like(b, 3.75, x), big_x);
  Value p = poly(
      b, t,
      {0.39894228, 0.01328592, 0.00225319, -0.00157565, 0.00916281, -0.02057706, 0.02635537, -0.01647633, 0.00392377});
  Value big = b.mul(b.div(p, b.sqrt(big_x)), b.exp(big_x));
  return b.select(b.compare(ax, full_like(b, 3.75, x), Direction::kLe), small, big);
}

constexpr UDef d_i0{"i0", true, true, f_i0};
constexpr UDef d_sinc{"sinc", true, true, f_sinc};
constexpr UDef d_signbit{"signbit", false, true, f_signbit};
constexpr UDef d_lgamma{"lgamma", true, true, f_lgamma};
constexpr UDef d_digamma{"digamma", true, true, f_digamma};

ScalarType u_result(const UDef& d, ScalarType t) { return d.float_result ? float_result(t) : c10::kBool; }
void u_run(const UDef& d, const at::Tensor& self, const at::Tensor& out) {
  ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(t), "\"", d.name, "\" not implemented for complex tensors");
  ScalarType compute = d.float_result ? opmath(float_result(t)) : t;
  auto fn = d.fn;
  pointwise(d.name, {self}, out, compute, [fn](Builder& b, const Values& x) { return fn(b, x[0]); });
}
template <const UDef& D>
at::Tensor u_fn(const at::Tensor& self) {
  at::Tensor out = empty_tpu(self.sizes(), u_result(D, self.scalar_type()), self.device());
  u_run(D, self, out);
  return out;
}
template <const UDef& D>
at::Tensor& u_inplace(at::Tensor& self) {
  check_inplace(self, self.sizes(), u_result(D, self.scalar_type()));
  u_run(D, self, self);
  return self;
}
template <const UDef& D>
at::Tensor& u_out(const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes(), u_result(D, self.scalar_type()), D.name);
  u_run(D, self, out);
  return out;
}

// --- polygamma ------------------------------------------------------------------------

// Hurwitz zeta(s, q) for integer s = n + 1 >= 3, as CPU computes it for
// polygamma (Cephes: direct sum until the term is negligible or q + i > 9,
// then an Euler-Maclaurin tail), in float64 because CPU accumulates float
// inputs in double. chlo.polygamma is inaccurate for negative non-integer x
// (off by thousands for n = 4 near x = -8.3) and the reflection formulas
// lose ~1e-4 relative in float32 there, so n >= 2 uses this for every x.
// `q` must be f64 and finite, and not a pole.
Value zeta_cephes(Builder& b, int64_t sv, Value q) {
  const double eps = 1.11022302462515654042e-16;
  auto C = [&](Builder& c, double v, Value like) { return full_like(c, v, like); };
  auto inv_pow = [&](Builder& c, Value a) {  // a^-s
    Value p = a;
    for (int64_t i = 1; i < sv; ++i) p = c.mul(p, a);
    return c.div(C(c, 1.0, a), p);
  };
  // Carried: i (s32), a, b, s, done.
  Value s0 = inv_pow(b, q);
  std::vector<Value> init{b.constant(0, ElemType::kS32), q, full_like(b, 0.0, q), s0,
                          b.constant(0, ElemType::kPred, b.dims(q))};
  auto running = [&](Builder& c, Value i, Value a, Value done) {
    Value more = c.or_(c.broadcast_to(c.compare(i, c.constant(9, ElemType::kS32), Direction::kLt), c.dims(a)),
                       c.compare(a, C(c, 9.0, a), Direction::kLe));
    return c.and_(more, c.not_(done));
  };
  auto any = [&](Builder& c, Value p) {
    if (c.dims(p).empty()) return p;
    std::vector<int64_t> all(c.dims(p).size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    return c.reduce(p, c.constant(0, ElemType::kPred), all, BinaryOp::kOr);
  };
  auto cond = b.loop_region(init);
  {
    Builder c(*cond);
    auto P = [&](int k) { return Value{cond->params()[k], 0}; };
    cond->set_outputs({any(c, running(c, P(0), P(1), P(4)))});
  }
  auto body = b.loop_region(init);
  {
    Builder c(*body);
    auto P = [&](int k) { return Value{body->params()[k], 0}; };
    Value i = P(0), a = P(1), bb = P(2), s = P(3), done = P(4);
    Value act = running(c, i, a, done);
    Value na = c.add(a, C(c, 1.0, a));
    Value nb = inv_pow(c, na);
    Value ns = c.add(s, nb);
    Value tol = c.mul(C(c, eps, ns), ns);
    Value conv = c.and_(c.compare(c.neg(tol), nb, Direction::kLt), c.compare(nb, tol, Direction::kLt));
    body->set_outputs({c.add(i, c.constant(1, ElemType::kS32)), c.select(act, na, a), c.select(act, nb, bb),
                       c.select(act, ns, s), c.or_(done, c.and_(act, conv))});
  }
  auto outs = b.while_loop(init, cond, body);
  Value a = outs[1], bb = outs[2], s = outs[3], done = outs[4];
  // Euler-Maclaurin tail (12 Bernoulli terms), each element stopping once
  // its correction is negligible.
  static const double A[] = {12.0,
                             -720.0,
                             30240.0,
                             -1209600.0,
                             47900160.0,
                             -1.8924375803183791606e9,
                             7.47242496e10,
                             -2.950130727918164224e12,
                             1.1646782814350067249e14,
                             -4.5979787224074726105e15,
                             1.8152105401943546773e17,
                             -7.1661652561756670113e18};
  const double x = static_cast<double>(sv);
  Value w = a;
  Value st = b.sub(b.add(s, b.div(b.mul(bb, w), full_like(b, x - 1.0, q))), b.mul(full_like(b, 0.5, q), bb));
  s = b.select(done, s, st);
  Value fa = full_like(b, 1.0, q);
  double k = 0;
  for (int i = 0; i < 12; ++i) {
    fa = b.mul(fa, full_like(b, x + k, q));
    bb = b.div(bb, w);
    Value t = b.div(b.mul(fa, bb), full_like(b, A[i], q));
    Value ns = b.add(s, t);
    s = b.select(done, s, ns);
    done = b.or_(done, b.compare(b.abs(b.div(t, ns)), full_like(b, eps, q), Direction::kLt));
    k += 1;
    fa = b.mul(fa, full_like(b, x + k, q));
    bb = b.div(bb, w);
    k += 1;
  }
  return s;
}

void polygamma_run(int64_t n, const at::Tensor& self, const at::Tensor& out) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  ScalarType compute = opmath(float_result(self.scalar_type()));
  if (n == 0) {
    u_run(d_digamma, self, out);
    return;
  }
  // chlo.polygamma is only accurate for positive x and gives NaN at poles.
  // Like CPU: trigamma reflects for x < 0.5; n >= 2 goes through the
  // Hurwitz zeta; poles give +inf (odd n) or -inf (even n).
  pointwise(
      "polygamma", {self, c10::Scalar(static_cast<double>(n))}, out, compute,
      [n](Builder& b, const Values& in) {
        Value x = in[0];
        Value direct = b.polygamma(in[1], x);
        Value pole =
            b.and_(b.compare(x, full_like(b, 0.0, x), Direction::kLe), b.compare(x, b.floor(x), Direction::kEq));
        Value inf = full_like(b, n % 2 ? INFINITY : -INFINITY, x);
        if (n >= 2) {
          // CPU: (-1)^(n+1) exp(lgamma(n + 1)) zeta(n + 1, x), zeta in double.
          Value finite = b.compare(b.abs(x), full_like(b, INFINITY, x), Direction::kLt);
          Value safe = b.select(b.and_(finite, b.not_(pole)), x, full_like(b, 1.0, x));
          Value z = b.convert(zeta_cephes(b, n + 1, b.convert(safe, ElemType::kF64)), b.elem(x));
          bool f64 = b.elem(x) == ElemType::kF64;
          double fact = f64 ? std::exp(std::lgamma(n + 1.0)) : std::exp(std::lgamma(static_cast<float>(n + 1)));
          Value r = b.mul(full_like(b, fact * (n % 2 ? 1.0 : -1.0), x), z);
          return b.select(pole, inf, b.select(finite, r, direct));
        }
        // n == 1 (CPU's trigamma): reflect for x < 0.5.
        Value one_v = full_like(b, 1.0, x);
        Value mirrored = b.polygamma(in[1], b.sub(one_v, x));
        Value sn = b.sin(b.mul(x, full_like(b, M_PI, x)));
        Value r = b.sub(b.mul(full_like(b, M_PI * M_PI, x), b.div(one_v, b.mul(sn, sn))), mirrored);
        return b.select(b.compare(x, full_like(b, 0.5, x), Direction::kLt), r, direct);
      },
      n);
}
at::Tensor polygamma(int64_t n, const at::Tensor& self) {
  at::Tensor out = empty_tpu(self.sizes(), float_result(self.scalar_type()), self.device());
  polygamma_run(n, self, out);
  return out;
}
at::Tensor& polygamma_out(int64_t n, const at::Tensor& self, at::Tensor& out) {
  prepare_out(out, self.sizes(), float_result(self.scalar_type()), "polygamma");
  polygamma_run(n, self, out);
  return out;
}
at::Tensor& polygamma_(at::Tensor& self, int64_t n) {
  check_inplace(self, self.sizes(), float_result(self.scalar_type()));
  polygamma_run(n, self, self);
  return self;
}

#define REG3(n)                     \
  m.impl(#n, u_fn<d_##n>);          \
  m.impl(#n "_", u_inplace<d_##n>); \
  m.impl(#n ".out", u_out<d_##n>);

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("rsub.Tensor", rsub);
  m.impl("equal", equal);
  m.impl("_cummax_helper", cummaxmin_helper<true>);
  m.impl("_cummin_helper", cummaxmin_helper<false>);
  m.impl("take", take_fn);
  m.impl("take.out", take_out);
  m.impl("put_", put_);
  m.impl("nansum", nansum);
  m.impl("nansum.out", nansum_out);
  m.impl("aminmax", aminmax_fn);
  m.impl("aminmax.out", aminmax_out);
  m.impl("logspace.out", logspace_out);
  m.impl("logaddexp", logaddexp<false>);
  m.impl("logaddexp.out", logaddexp_out<false>);
  m.impl("logaddexp2", logaddexp<true>);
  m.impl("logaddexp2.out", logaddexp_out<true>);
  m.impl("heaviside", heaviside);
  m.impl("heaviside.out", heaviside_out);
  m.impl("heaviside_", heaviside_);
  REG3(sinc) REG3(lgamma) REG3(digamma) REG3(i0) m.impl("signbit", u_fn<d_signbit>);
  m.impl("signbit.out", u_out<d_signbit>);
  m.impl("polygamma", polygamma);
  m.impl("polygamma.out", polygamma_out);
}

}  // namespace
}  // namespace torch_tpu::ops
