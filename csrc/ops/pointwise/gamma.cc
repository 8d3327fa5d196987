// The gamma family: lgamma, digamma and polygamma (lgamma/digamma are
// PointwiseDefs of pointwise/common.h; polygamma n >= 2 goes through a Cephes Hurwitz zeta
// loop in float64), the regularized incomplete gamma functions
// (igamma/igammac), and the float bit-level ops nextafter and frexp.
//
// igamma/igammac follow the structure of PyTorch CPU's Cephes-derived
// kernels (ATen/native/Math.h): boundary values, then the power series
// (DLMF 8.11.4), the igammac series (DLMF 8.7.3) or the continued fraction
// (DLMF 8.9.2), each iterated in a stablehlo.while until every element has
// converged (or 2000 iterations), with the x^a e^-x / Gamma(a) prefactor
// formed through the Lanczos approximation when a ~ x. CPU's uniform
// asymptotic expansion for large a (> 20) with a ~ x is not reproduced:
// the series and continued fraction converge there too, only slower.
//
// igamma/igammac/nextafter/frexp register only their structured .out
// overloads; the functional and in-place overloads are composites over them.
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"
#include "ops/pointwise/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

Value absv(Builder& b, Value x) { return b.abs(x); }
Value lt(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kLt); }
Value gt(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kGt); }
Value le(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kLe); }
Value eq(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kEq); }
Value isinf(Builder& b, Value x) { return eq(b, absv(b, x), full_like(b, INFINITY, x)); }
Value exp_(Builder& b, Value x) { return b.exp(x); }
Value log_(Builder& b, Value x) { return b.log(x); }

Value any_true(Builder& b, Value p) {
  if (b.dims(p).empty()) return p;
  std::vector<int64_t> all(b.dims(p).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return b.reduce(p, b.constant(0, ElemType::kPred), all, BinaryOp::kOr);
}

// Iterates `step` until every element has converged or `max_iter` steps
// ran. `consts` are loop invariants, `state` the per-element iterates;
// elements with `done` set initially (or once `step` reports convergence)
// keep their state. step(b, consts, state, i) -> {new state..., converged}.
using Step = std::function<Values(Builder&, const Values&, const Values&, Value)>;
Values converge(Builder& b, Value done0, const Values& consts, const Values& state, int64_t max_iter,
                const Step& step) {
  Values init{b.constant(0, ElemType::kS32), done0};
  init.insert(init.end(), consts.begin(), consts.end());
  init.insert(init.end(), state.begin(), state.end());
  size_t nc = consts.size(), ns = state.size();
  auto cond = b.loop_region(init);
  {
    Builder c(*cond);
    Value i{cond->params()[0], 0}, done{cond->params()[1], 0};
    Value more = c.and_(lt(c, i, c.constant(static_cast<double>(max_iter), ElemType::kS32)), any_true(c, c.not_(done)));
    cond->set_outputs({more});
  }
  auto body = b.loop_region(init);
  {
    Builder c(*body);
    auto P = [&](size_t k) { return Value{body->params()[k], 0}; };
    Value i = P(0), done = P(1);
    Values cs, ss;
    for (size_t k = 0; k < nc; ++k) cs.push_back(P(2 + k));
    for (size_t k = 0; k < ns; ++k) ss.push_back(P(2 + nc + k));
    Values next = step(c, cs, ss, i);
    Values outs{c.add(i, c.constant(1, ElemType::kS32)), c.or_(done, next[ns])};
    for (Value v : cs) outs.push_back(v);
    for (size_t k = 0; k < ns; ++k) outs.push_back(c.select(done, ss[k], next[k]));
    body->set_outputs(outs);
  }
  Values res = b.while_loop(init, cond, body);
  return Values(res.begin() + 2 + nc, res.end());
}

double machep(Value like, Builder& b) {
  return b.elem(like) == ElemType::kF64 ? 1.11022302462515654042e-16 : 5.9604644775390625e-8;
}

// Lanczos sum (scaled by exp(-g)) as a rational function, evaluated in 1/a
// for a > 1 so that the degree-12 polynomials do not overflow.
Value lanczos_sum_expg_scaled(Builder& b, Value a) {
  static const double num[13] = {
      0.006061842346248906525783753964555936883222, 0.5098416655656676188125178644804694509993,
      19.51992788247617482847860966235652136208,    449.9445569063168119446858607650988409623,
      6955.999602515376140356310115515198987526,    75999.29304014542649875303443598909137092,
      601859.6171681098786670226533699352302507,    3481712.15498064590882071018964774556468,
      14605578.08768506808414169982791359218571,    43338889.32467613834773723740590533316085,
      86363131.28813859145546927288977868422342,    103794043.1163445451906271053616070238554,
      56906521.91347156388090791033559122686859};
  static const double den[13] = {1.,        66.,        1925.,      32670.,     357423.,   2637558., 13339535.,
                                 45995730., 105258076., 150917976., 120543840., 39916800., 0.};
  // Coefficients are highest degree first.
  auto horner = [&](Value t, const double* c, bool reversed) {
    Value r = full_like(b, reversed ? c[12] : c[0], t);
    for (int k = 1; k <= 12; ++k) r = b.add(b.mul(r, t), full_like(b, reversed ? c[12 - k] : c[k], t));
    return r;
  };
  Value big = gt(b, absv(b, a), full_like(b, 1.0, a));
  Value inv = b.div(full_like(b, 1.0, a), b.select(big, a, full_like(b, 2.0, a)));
  Value small_r = b.div(horner(a, num, false), horner(a, den, false));
  Value big_r = b.div(horner(inv, num, true), horner(inv, den, true));
  return b.select(big, big_r, small_r);
}

// x^a e^-x / Gamma(a).
Value igam_fac(Builder& b, Value a, Value x) {
  auto C = [&](double v) { return full_like(b, v, a); };
  bool f64 = b.elem(a) == ElemType::kF64;
  const double maxlog = f64 ? 7.09782712893383996843e2 : 88.72283905206835;
  const double g = 6.024680040776729583740234375;
  Value far = gt(b, absv(b, b.sub(a, x)), b.mul(C(0.4), absv(b, a)));
  Value ax = b.sub(b.sub(b.mul(a, log_(b, x)), x), b.lgamma(a));
  Value direct = b.select(lt(b, ax, C(-maxlog)), C(0.0), exp_(b, ax));
  Value fac = b.sub(b.add(a, C(g)), C(0.5));
  Value res = b.div(b.sqrt(b.div(fac, C(2.718281828459045))), lanczos_sum_expg_scaled(b, a));
  Value small = b.mul(exp_(b, b.sub(a, x)), b.pow(b.div(x, fac), a));
  Value numfac = b.div(b.add(b.sub(b.sub(x, a), C(g)), C(0.5)), fac);
  Value large = exp_(b, b.add(b.mul(a, b.sub(b.log1p(numfac), numfac)), b.div(b.mul(x, C(0.5 - g)), fac)));
  Value both_small = b.and_(lt(b, a, C(200)), lt(b, x, C(200)));
  Value near = b.mul(res, b.select(both_small, small, large));
  return b.select(far, direct, near);
}

// Lower regularized gamma by its power series (`need` masks the elements
// that use it; others may hold anything).
Value igam_series(Builder& b, Value a, Value x, Value need) {
  double eps = machep(a, b);
  Value ax = igam_fac(b, a, x);
  Value one = full_like(b, 1.0, a);
  Value done0 = b.or_(b.not_(need), eq(b, ax, full_like(b, 0.0, a)));
  Values st = converge(b, done0, {x}, {a, one, one}, 2000, [eps](Builder& c, const Values& k, const Values& s, Value) {
    Value r = c.add(s[0], full_like(c, 1.0, s[0]));
    Value cc = c.mul(s[1], c.div(k[0], r));
    Value ans = c.add(s[2], cc);
    return Values{r, cc, ans, le(c, cc, c.mul(full_like(c, eps, ans), ans))};
  });
  Value res = b.div(b.mul(st[2], ax), a);
  return b.select(eq(b, ax, full_like(b, 0.0, a)), full_like(b, 0.0, a), res);
}

// Upper regularized gamma by DLMF 8.7.3 (small x).
Value igamc_series(Builder& b, Value a, Value x, Value need) {
  double eps = machep(a, b);
  Value one = full_like(b, 1.0, a), zero = full_like(b, 0.0, a);
  Values st = converge(
      b, b.not_(need), {a, x}, {one, zero}, 1999, [eps](Builder& c, const Values& k, const Values& s, Value i) {
        Value n = c.add(c.broadcast_to(c.convert(i, c.elem(s[0])), c.dims(s[0])), full_like(c, 1.0, s[0]));
        Value fac = c.mul(s[0], c.div(c.neg(k[1]), n));
        Value term = c.div(fac, c.add(k[0], n));
        Value sum = c.add(s[1], term);
        return Values{fac, sum, le(c, absv(c, term), c.mul(full_like(c, eps, sum), absv(c, sum)))};
      });
  Value logx = log_(b, x);
  Value t = b.neg(b.expm1(b.sub(b.mul(a, logx), b.lgamma(b.add(one, a)))));
  return b.sub(t, b.mul(exp_(b, b.sub(b.mul(a, logx), b.lgamma(a))), st[1]));
}

// Upper regularized gamma by its continued fraction (x > 1.1, x >= a).
Value igamc_cf(Builder& b, Value a, Value x, Value need) {
  double eps = machep(a, b);
  bool f64 = b.elem(a) == ElemType::kF64;
  const double big = f64 ? 4.503599627370496e15 : 16777216.;
  const double biginv = f64 ? 2.22044604925031308085e-16 : 5.9604644775390625e-8;
  auto C = [&](double v) { return full_like(b, v, a); };
  Value ax = igam_fac(b, a, x);
  Value y = b.sub(C(1), a);
  Value z = b.add(b.add(x, y), C(1));
  Value pkm1 = b.add(x, C(1)), qkm1 = b.mul(z, x);
  Value ans = b.div(pkm1, qkm1);
  Value done0 = b.or_(b.not_(need), eq(b, ax, C(0)));
  // state: c, y, z, pkm2, pkm1, qkm2, qkm1, ans
  Values st = converge(b, done0, {}, {C(0), y, z, C(1), pkm1, x, qkm1, ans}, 2000,
                       [eps, big, biginv](Builder& c, const Values&, const Values& s, Value) {
                         auto K = [&](double v) { return full_like(c, v, s[0]); };
                         Value cc = c.add(s[0], K(1)), yy = c.add(s[1], K(1)), zz = c.add(s[2], K(2));
                         Value yc = c.mul(yy, cc);
                         Value pk = c.sub(c.mul(s[4], zz), c.mul(s[3], yc));
                         Value qk = c.sub(c.mul(s[6], zz), c.mul(s[5], yc));
                         Value qnz = c.compare(qk, K(0), Direction::kNe);
                         Value r = c.div(pk, qk);
                         Value t = c.select(qnz, absv(c, c.div(c.sub(s[7], r), r)), K(1));
                         Value nans = c.select(qnz, r, s[7]);
                         Value pkm2 = s[4], pkm1 = pk, qkm2 = s[6], qkm1 = qk;
                         Value scale = gt(c, absv(c, pk), K(big));
                         auto sc = [&](Value v) { return c.select(scale, c.mul(v, K(biginv)), v); };
                         return Values{cc, yy, zz, sc(pkm2), sc(pkm1), sc(qkm2), sc(qkm1), nans, le(c, t, K(eps))};
                       });
  return b.select(eq(b, ax, C(0)), C(0), b.mul(st[7], ax));
}

// Boundary cases shared by igamma/igammac: {is_boundary, value for igamma}.
// For igammac the value is 1 - that (NaN stays NaN).
Value igamma_lower(Builder& b, Value a, Value x, bool upper) {
  auto C = [&](double v) { return full_like(b, v, a); };
  Value nan = C(NAN);
  Value bad = b.or_(lt(b, x, C(0)), lt(b, a, C(0)));
  Value a0 = eq(b, a, C(0)), x0 = eq(b, x, C(0));
  Value ainf = isinf(b, a), xinf = isinf(b, x);
  // Safe stand-ins so that unused lanes don't feed NaN/inf into the loops.
  Value boundary = b.or_(b.or_(bad, a0), b.or_(x0, b.or_(ainf, xinf)));
  Value nan_in = b.or_(b.compare(a, a, Direction::kNe), b.compare(x, x, Direction::kNe));
  Value ok = b.not_(b.or_(boundary, nan_in));
  Value as = b.select(ok, a, C(1)), xs = b.select(ok, x, C(1));

  // Which method each element uses (CPU's calc_igammac branches).
  Value c_cf = b.and_(gt(b, xs, C(1.1)), b.not_(lt(b, xs, as)));
  Value c_small = le(b, xs, C(0.5));
  Value c_sub_small = lt(b, b.div(C(-0.4), log_(b, xs)), as);
  Value c_sub_mid = lt(b, b.mul(xs, C(1.1)), as);
  Value c_sub = b.select(gt(b, xs, C(1.1)), b.not_(c_cf), b.select(c_small, c_sub_small, c_sub_mid));
  // igammac: c_cf -> CF; c_sub -> 1 - series; else igamc series.
  // igamma: x > 1 and x > a -> 1 - igammac(...); else series.
  Value use_c = b.and_(gt(b, xs, C(1)), gt(b, xs, as));
  Value need_cf = b.and_(ok, c_cf);
  Value need_cser = b.and_(ok, b.not_(b.or_(c_cf, c_sub)));
  Value need_ser = b.and_(ok, upper ? c_sub : b.or_(b.not_(use_c), c_sub));
  if (!upper) {
    need_cf = b.and_(need_cf, use_c);
    need_cser = b.and_(need_cser, use_c);
  }
  Value ser = igam_series(b, as, xs, need_ser);
  Value cser = igamc_series(b, as, xs, need_cser);
  Value cf = igamc_cf(b, as, xs, need_cf);
  Value one = C(1);
  Value q = b.select(c_cf, cf, b.select(c_sub, b.sub(one, ser), cser));  // igammac
  Value value = upper ? q : b.select(use_c, b.sub(one, q), ser);

  // Boundaries, in CPU's order.
  Value lo_a0 = b.select(gt(b, x, C(0)), upper ? C(0) : C(1), nan);
  Value lo_ainf = b.select(xinf, nan, upper ? C(1) : C(0));
  Value r = b.select(xinf, upper ? C(0) : C(1), value);
  r = b.select(ainf, lo_ainf, r);
  r = b.select(x0, upper ? C(1) : C(0), r);
  r = b.select(a0, lo_a0, r);
  r = b.select(bad, nan, r);
  return b.select(nan_in, nan, r);
}

// igamma/igammac and nextafter: binary ops with float results only.
OutMeta float_binary_meta(const at::Tensor& self, const at::Tensor& other, const char* cpu_name) {
  ScalarType dtype = at::result_type(self, other);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(dtype), "\"", cpu_name, "\" not implemented for '",
                              c10::toString(dtype), "'");
  return OutMeta{broadcast_shape({self, other}), dtype, self.device()};
}

template <bool kUpper>
struct Igamma {
  static constexpr const char* kName = kUpper ? "igammac" : "igamma";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& other) {
    return float_binary_meta(self, other, kUpper ? "igammac_cpu" : "igamma_cpu");
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& other) {
    pointwise(kName, {self, other}, out, opmath(m.dtype),
              [](Builder& b, const Values& in) { return igamma_lower(b, in[0], in[1], kUpper); });
  }
};

// --- nextafter --------------------------------------------------------------------------

struct NextAfter {
  static constexpr const char* kName = "nextafter";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& other) {
    return float_binary_meta(self, other, "nextafter_cpu");
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& other) {
    // In the tensor's own dtype: the neighbour depends on its precision.
    pointwise(kName, {self, other}, out, m.dtype,
              [](Builder& b, const Values& in) { return b.next_after(in[0], in[1]); });
  }
};

// --- frexp ------------------------------------------------------------------------------

// Mantissa in [0.5, 1) and exponent from the bits, so that subnormals are
// exact whatever the denormal mode; 0, inf and NaN give (x, 0) like C's frexp.
Values frexp_lower(Builder& b, Value x) {
  bool f64 = b.elem(x) == ElemType::kF64;
  ElemType it = f64 ? ElemType::kS64 : ElemType::kS32;
  const int mbits = f64 ? 52 : 23, width = f64 ? 64 : 32, bias = f64 ? 1022 : 126;
  const double emask = f64 ? 0x7ff : 0xff;
  auto I = [&](double v) { return b.constant(v, it, b.dims(x)); };
  auto bits_of = [&](uint64_t v) { return b.broadcast_to(b.constant_bits(v, it), b.dims(x)); };
  Value bits = b.bitcast_convert(x, it);
  Value frac_mask = bits_of((uint64_t{1} << mbits) - 1);
  Value sign = b.and_(bits, bits_of(uint64_t{1} << (width - 1)));
  Value e = b.and_(b.shr_logical(bits, I(mbits)), I(emask));
  Value frac = b.and_(bits, frac_mask);
  // Subnormal: shift the leading 1 of the fraction up to the implicit bit.
  Value lz = b.clz(frac);
  Value shift = b.sub(lz, I(width - 1 - mbits));
  Value sub_frac = b.and_(b.shl(frac, shift), frac_mask);
  // A subnormal is frac * 2^(-bias - mbits); its leading 1 sits at bit `top`.
  Value top = b.sub(I(width - 1), lz);
  Value exp_sub = b.add(b.sub(top, I(mbits + bias)), I(1));
  Value is_sub = eq(b, e, I(0));
  Value exp_norm = b.sub(e, I(bias));
  Value out_frac = b.select(is_sub, sub_frac, frac);
  Value out_exp = b.select(is_sub, exp_sub, exp_norm);
  Value mbits_v = b.or_(sign, b.or_(b.shl(I(bias), I(mbits)), out_frac));
  Value mant = b.bitcast_convert(mbits_v, b.elem(x));
  // 0, inf, NaN (tested on the bits: a flush-to-zero compare would call subnormals 0).
  Value special = b.or_(b.and_(is_sub, eq(b, frac, I(0))), eq(b, e, I(emask)));
  return {b.select(special, x, mant), b.select(special, I(0), out_exp)};
}

// frexp's functional form is composite in ATen over its out= form.
struct Frexp {
  static constexpr const char* kName = "frexp";
  static PairMeta meta(const at::Tensor& self) {
    TORCH_CHECK(c10::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point dtypes");
    PairMeta m;
    m.results[0] = OutMeta{self.sizes().vec(), self.scalar_type(), self.device()};
    m.results[1] = OutMeta{self.sizes().vec(), c10::kInt, self.device()};
    return m;
  }
  static void check_out(const at::Tensor& mantissa, const at::Tensor& exponent, const PairMeta&,
                        const at::Tensor& self) {
    TORCH_CHECK(mantissa.scalar_type() == self.scalar_type(), "torch.frexp() expects mantissa to have dtype ",
                self.scalar_type(), " but got ", mantissa.scalar_type());
    TORCH_CHECK(exponent.scalar_type() == c10::kInt, "torch.frexp() expects exponent to have int dtype but got ",
                exponent.scalar_type());
  }
  static void impl(const at::Tensor& mantissa, const at::Tensor& exponent, const PairMeta&, const at::Tensor& self) {
    record::OpCall call("frexp");
    call.input(self);
    call.output(mantissa);
    call.output(exponent);
    ElemType ce = self.scalar_type() == c10::kDouble ? ElemType::kF64 : ElemType::kF32;
    call.run([&](Builder& b, const Values& in) {
      Values r = frexp_lower(b, b.convert(in[0], ce));
      return Values{r[0], b.convert(r[1], ElemType::kS32)};
    });
  }
};

// --- lgamma / digamma --------------------------------------------------------------

Value f_lgamma(Builder& b, Value x) { return b.lgamma(x); }
Value f_digamma(Builder& b, Value x) {
  // CPU: digamma(+-0) = copysign(inf, -x); chlo gives NaN there.
  Value r = b.digamma(x);
  Value pole = b.select(f_signbit(b, x), full_like(b, INFINITY, x), full_like(b, -INFINITY, x));
  return b.select(b.compare(x, full_like(b, 0.0, x), Direction::kEq), pole, r);
}

constexpr int kLgamma = Accepts::kReal | Accepts::kComplexLater;
constexpr PointwiseDef d_lgamma{"lgamma", Result::kFloat, kLgamma, lower1<f_lgamma>};
constexpr PointwiseDef d_digamma{"digamma", Result::kFloat, kLgamma, lower1<f_digamma>};

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
    check_dtype(d_digamma, self.scalar_type());
    run_pointwise(d_digamma, {self}, self.scalar_type(), out);
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
// polygamma(n, self): the order comes first. Its in-place form
// (self.polygamma_(n)) is composite in ATen over the out= form.
struct Polygamma {
  static constexpr const char* kName = "polygamma";
  static OutMeta meta(int64_t, const at::Tensor& self) {
    return OutMeta{self.sizes().vec(), float_result(self.scalar_type()), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, int64_t n, const at::Tensor& self) {
    polygamma_run(n, self, out);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Igamma<false>>(m, "igamma");
  register_variants<Igamma<true>>(m, "igammac");
  register_variants<NextAfter>(m, "nextafter");
  register_variants<Frexp>(m, {"", "", "frexp.Tensor_out"});
  register_variants<Unary<d_lgamma>>(m, "lgamma");
  register_variants<Unary<d_digamma>>(m, "digamma");
  register_variants<Polygamma>(m, {"polygamma", "", "polygamma.out"});
}

}  // namespace
}  // namespace torch_tpu::ops
