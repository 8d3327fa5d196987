// The gamma family: lgamma, digamma and polygamma (on the float-unary kernel
// of pointwise/common.h; polygamma n >= 2 goes through a Cephes Hurwitz zeta
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

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

Value cst(Builder& b, double v, Value like) { return b.constant(v, b.elem(like), b.dims(like)); }
Value pand(Builder& b, Value x, Value y) { return b.binary("stablehlo.and", x, y); }
Value por(Builder& b, Value x, Value y) { return b.binary("stablehlo.or", x, y); }
Value pnot(Builder& b, Value x) { return b.unary("stablehlo.not", x); }
Value absv(Builder& b, Value x) { return b.unary("stablehlo.abs", x); }
Value lt(Builder& b, Value x, Value y) { return b.compare(x, y, "LT"); }
Value gt(Builder& b, Value x, Value y) { return b.compare(x, y, "GT"); }
Value le(Builder& b, Value x, Value y) { return b.compare(x, y, "LE"); }
Value eq(Builder& b, Value x, Value y) { return b.compare(x, y, "EQ"); }
Value isinf(Builder& b, Value x) { return eq(b, absv(b, x), cst(b, INFINITY, x)); }
Value exp_(Builder& b, Value x) { return b.unary("stablehlo.exponential", x); }
Value log_(Builder& b, Value x) { return b.unary("stablehlo.log", x); }

Value any_true(Builder& b, Value p) {
  if (b.dims(p).empty()) return p;
  std::vector<int64_t> all(b.dims(p).size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  return b.reduce(p, b.constant(0, ElemType::kPred), all, "stablehlo.or");
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
    Value more =
        pand(c, lt(c, i, c.constant(static_cast<double>(max_iter), ElemType::kS32)), any_true(c, pnot(c, done)));
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
    Values outs{add(c, i, c.constant(1, ElemType::kS32)), por(c, done, next[ns])};
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
    Value r = cst(b, reversed ? c[12] : c[0], t);
    for (int k = 1; k <= 12; ++k) r = add(b, mul(b, r, t), cst(b, reversed ? c[12 - k] : c[k], t));
    return r;
  };
  Value big = gt(b, absv(b, a), cst(b, 1.0, a));
  Value inv = div(b, cst(b, 1.0, a), b.select(big, a, cst(b, 2.0, a)));
  Value small_r = div(b, horner(a, num, false), horner(a, den, false));
  Value big_r = div(b, horner(inv, num, true), horner(inv, den, true));
  return b.select(big, big_r, small_r);
}

// x^a e^-x / Gamma(a).
Value igam_fac(Builder& b, Value a, Value x) {
  auto C = [&](double v) { return cst(b, v, a); };
  bool f64 = b.elem(a) == ElemType::kF64;
  const double maxlog = f64 ? 7.09782712893383996843e2 : 88.72283905206835;
  const double g = 6.024680040776729583740234375;
  Value far = gt(b, absv(b, sub(b, a, x)), mul(b, C(0.4), absv(b, a)));
  Value ax = sub(b, sub(b, mul(b, a, log_(b, x)), x), b.unary("chlo.lgamma", a));
  Value direct = b.select(lt(b, ax, C(-maxlog)), C(0.0), exp_(b, ax));
  Value fac = sub(b, add(b, a, C(g)), C(0.5));
  Value res = div(b, b.unary("stablehlo.sqrt", div(b, fac, C(2.718281828459045))), lanczos_sum_expg_scaled(b, a));
  Value small = mul(b, exp_(b, sub(b, a, x)), b.binary("stablehlo.power", div(b, x, fac), a));
  Value numfac = div(b, add(b, sub(b, sub(b, x, a), C(g)), C(0.5)), fac);
  Value large = exp_(b, add(b, mul(b, a, sub(b, b.unary("stablehlo.log_plus_one", numfac), numfac)),
                            div(b, mul(b, x, C(0.5 - g)), fac)));
  Value both_small = pand(b, lt(b, a, C(200)), lt(b, x, C(200)));
  Value near = mul(b, res, b.select(both_small, small, large));
  return b.select(far, direct, near);
}

// Lower regularized gamma by its power series (`need` masks the elements
// that use it; others may hold anything).
Value igam_series(Builder& b, Value a, Value x, Value need) {
  double eps = machep(a, b);
  Value ax = igam_fac(b, a, x);
  Value one = cst(b, 1.0, a);
  Value done0 = por(b, pnot(b, need), eq(b, ax, cst(b, 0.0, a)));
  Values st = converge(b, done0, {x}, {a, one, one}, 2000, [eps](Builder& c, const Values& k, const Values& s, Value) {
    Value r = add(c, s[0], cst(c, 1.0, s[0]));
    Value cc = mul(c, s[1], div(c, k[0], r));
    Value ans = add(c, s[2], cc);
    return Values{r, cc, ans, le(c, cc, mul(c, cst(c, eps, ans), ans))};
  });
  Value res = div(b, mul(b, st[2], ax), a);
  return b.select(eq(b, ax, cst(b, 0.0, a)), cst(b, 0.0, a), res);
}

// Upper regularized gamma by DLMF 8.7.3 (small x).
Value igamc_series(Builder& b, Value a, Value x, Value need) {
  double eps = machep(a, b);
  Value one = cst(b, 1.0, a), zero = cst(b, 0.0, a);
  Values st = converge(b, pnot(b, need), {a, x}, {one, zero}, 1999,
                       [eps](Builder& c, const Values& k, const Values& s, Value i) {
                         Value n = add(c, c.broadcast_to(c.convert(i, c.elem(s[0])), c.dims(s[0])), cst(c, 1.0, s[0]));
                         Value fac = mul(c, s[0], div(c, c.unary("stablehlo.negate", k[1]), n));
                         Value term = div(c, fac, add(c, k[0], n));
                         Value sum = add(c, s[1], term);
                         return Values{fac, sum, le(c, absv(c, term), mul(c, cst(c, eps, sum), absv(c, sum)))};
                       });
  Value logx = log_(b, x);
  Value t = b.unary("stablehlo.negate", b.unary("stablehlo.exponential_minus_one",
                                                sub(b, mul(b, a, logx), b.unary("chlo.lgamma", add(b, one, a)))));
  return sub(b, t, mul(b, exp_(b, sub(b, mul(b, a, logx), b.unary("chlo.lgamma", a))), st[1]));
}

// Upper regularized gamma by its continued fraction (x > 1.1, x >= a).
Value igamc_cf(Builder& b, Value a, Value x, Value need) {
  double eps = machep(a, b);
  bool f64 = b.elem(a) == ElemType::kF64;
  const double big = f64 ? 4.503599627370496e15 : 16777216.;
  const double biginv = f64 ? 2.22044604925031308085e-16 : 5.9604644775390625e-8;
  auto C = [&](double v) { return cst(b, v, a); };
  Value ax = igam_fac(b, a, x);
  Value y = sub(b, C(1), a);
  Value z = add(b, add(b, x, y), C(1));
  Value pkm1 = add(b, x, C(1)), qkm1 = mul(b, z, x);
  Value ans = div(b, pkm1, qkm1);
  Value done0 = por(b, pnot(b, need), eq(b, ax, C(0)));
  // state: c, y, z, pkm2, pkm1, qkm2, qkm1, ans
  Values st = converge(b, done0, {}, {C(0), y, z, C(1), pkm1, x, qkm1, ans}, 2000,
                       [eps, big, biginv](Builder& c, const Values&, const Values& s, Value) {
                         auto K = [&](double v) { return cst(c, v, s[0]); };
                         Value cc = add(c, s[0], K(1)), yy = add(c, s[1], K(1)), zz = add(c, s[2], K(2));
                         Value yc = mul(c, yy, cc);
                         Value pk = sub(c, mul(c, s[4], zz), mul(c, s[3], yc));
                         Value qk = sub(c, mul(c, s[6], zz), mul(c, s[5], yc));
                         Value qnz = c.compare(qk, K(0), "NE");
                         Value r = div(c, pk, qk);
                         Value t = c.select(qnz, absv(c, div(c, sub(c, s[7], r), r)), K(1));
                         Value nans = c.select(qnz, r, s[7]);
                         Value pkm2 = s[4], pkm1 = pk, qkm2 = s[6], qkm1 = qk;
                         Value scale = gt(c, absv(c, pk), K(big));
                         auto sc = [&](Value v) { return c.select(scale, mul(c, v, K(biginv)), v); };
                         return Values{cc, yy, zz, sc(pkm2), sc(pkm1), sc(qkm2), sc(qkm1), nans, le(c, t, K(eps))};
                       });
  return b.select(eq(b, ax, C(0)), C(0), mul(b, st[7], ax));
}

// Boundary cases shared by igamma/igammac: {is_boundary, value for igamma}.
// For igammac the value is 1 - that (NaN stays NaN).
Value igamma_lower(Builder& b, Value a, Value x, bool upper) {
  auto C = [&](double v) { return cst(b, v, a); };
  Value nan = C(NAN);
  Value bad = por(b, lt(b, x, C(0)), lt(b, a, C(0)));
  Value a0 = eq(b, a, C(0)), x0 = eq(b, x, C(0));
  Value ainf = isinf(b, a), xinf = isinf(b, x);
  // Safe stand-ins so that unused lanes don't feed NaN/inf into the loops.
  Value boundary = por(b, por(b, bad, a0), por(b, x0, por(b, ainf, xinf)));
  Value nan_in = por(b, b.compare(a, a, "NE"), b.compare(x, x, "NE"));
  Value ok = pnot(b, por(b, boundary, nan_in));
  Value as = b.select(ok, a, C(1)), xs = b.select(ok, x, C(1));

  // Which method each element uses (CPU's calc_igammac branches).
  Value c_cf = pand(b, gt(b, xs, C(1.1)), pnot(b, lt(b, xs, as)));
  Value c_small = le(b, xs, C(0.5));
  Value c_sub_small = lt(b, div(b, C(-0.4), log_(b, xs)), as);
  Value c_sub_mid = lt(b, mul(b, xs, C(1.1)), as);
  Value c_sub = b.select(gt(b, xs, C(1.1)), pnot(b, c_cf), b.select(c_small, c_sub_small, c_sub_mid));
  // igammac: c_cf -> CF; c_sub -> 1 - series; else igamc series.
  // igamma: x > 1 and x > a -> 1 - igammac(...); else series.
  Value use_c = pand(b, gt(b, xs, C(1)), gt(b, xs, as));
  Value need_cf = pand(b, ok, c_cf);
  Value need_cser = pand(b, ok, pnot(b, por(b, c_cf, c_sub)));
  Value need_ser = pand(b, ok, upper ? c_sub : por(b, pnot(b, use_c), c_sub));
  if (!upper) {
    need_cf = pand(b, need_cf, use_c);
    need_cser = pand(b, need_cser, use_c);
  }
  Value ser = igam_series(b, as, xs, need_ser);
  Value cser = igamc_series(b, as, xs, need_cser);
  Value cf = igamc_cf(b, as, xs, need_cf);
  Value one = C(1);
  Value q = b.select(c_cf, cf, b.select(c_sub, sub(b, one, ser), cser));  // igammac
  Value value = upper ? q : b.select(use_c, sub(b, one, q), ser);

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

template <bool kUpper>
at::Tensor& igamma_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  ScalarType dtype = at::result_type(self, other);
  const char* name = kUpper ? "igammac_cpu" : "igamma_cpu";
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(dtype), "\"", name, "\" not implemented for '", c10::toString(dtype),
                              "'");
  prepare_out(out, broadcast_shape({self, other}), dtype, kUpper ? "igammac" : "igamma");
  pointwise(kUpper ? "igammac" : "igamma", {self, other}, out, opmath(dtype),
            [](Builder& b, const Values& in) { return igamma_lower(b, in[0], in[1], kUpper); });
  return out;
}

// --- nextafter --------------------------------------------------------------------------

at::Tensor& nextafter_out(const at::Tensor& self, const at::Tensor& other, at::Tensor& out) {
  ScalarType dtype = at::result_type(self, other);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(dtype), "\"nextafter_cpu\" not implemented for '",
                              c10::toString(dtype), "'");
  prepare_out(out, broadcast_shape({self, other}), dtype, "nextafter");
  // In the tensor's own dtype: the neighbour depends on its precision.
  pointwise("nextafter", {self, other}, out, dtype,
            [](Builder& b, const Values& in) { return b.binary("chlo.next_after", in[0], in[1]); });
  return out;
}

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
  Value sign = b.binary("stablehlo.and", bits, bits_of(uint64_t{1} << (width - 1)));
  Value e = b.binary("stablehlo.and", b.binary("stablehlo.shift_right_logical", bits, I(mbits)), I(emask));
  Value frac = b.binary("stablehlo.and", bits, frac_mask);
  // Subnormal: shift the leading 1 of the fraction up to the implicit bit.
  Value lz = b.unary("stablehlo.count_leading_zeros", frac);
  Value shift = sub(b, lz, I(width - 1 - mbits));
  Value sub_frac = b.binary("stablehlo.and", b.binary("stablehlo.shift_left", frac, shift), frac_mask);
  // A subnormal is frac * 2^(-bias - mbits); its leading 1 sits at bit `top`.
  Value top = sub(b, I(width - 1), lz);
  Value exp_sub = add(b, sub(b, top, I(mbits + bias)), I(1));
  Value is_sub = eq(b, e, I(0));
  Value exp_norm = sub(b, e, I(bias));
  Value out_frac = b.select(is_sub, sub_frac, frac);
  Value out_exp = b.select(is_sub, exp_sub, exp_norm);
  Value mbits_v = b.binary("stablehlo.or", sign,
                           b.binary("stablehlo.or", b.binary("stablehlo.shift_left", I(bias), I(mbits)), out_frac));
  Value mant = b.bitcast_convert(mbits_v, b.elem(x));
  // 0, inf, NaN (tested on the bits: a flush-to-zero compare would call subnormals 0).
  Value special = por(b, pand(b, is_sub, eq(b, frac, I(0))), eq(b, e, I(emask)));
  return {b.select(special, x, mant), b.select(special, I(0), out_exp)};
}

std::tuple<at::Tensor&, at::Tensor&> frexp_out(const at::Tensor& self, at::Tensor& mantissa, at::Tensor& exponent) {
  TORCH_CHECK(c10::isFloatingType(self.scalar_type()), "torch.frexp() only supports floating-point dtypes");
  TORCH_CHECK(mantissa.scalar_type() == self.scalar_type(), "torch.frexp() expects mantissa to have dtype ",
              self.scalar_type(), " but got ", mantissa.scalar_type());
  TORCH_CHECK(exponent.scalar_type() == c10::kInt, "torch.frexp() expects exponent to have int dtype but got ",
              exponent.scalar_type());
  prepare_out(mantissa, self.sizes(), self.scalar_type(), "frexp");
  prepare_out(exponent, self.sizes(), c10::kInt, "frexp");
  eager::OpCall call("frexp");
  call.input(self);
  call.output(mantissa);
  call.output(exponent);
  ElemType ce = self.scalar_type() == c10::kDouble ? ElemType::kF64 : ElemType::kF32;
  call.run([&](Builder& b, const Values& in) {
    Values r = frexp_lower(b, b.convert(in[0], ce));
    return Values{r[0], b.convert(r[1], ElemType::kS32)};
  });
  return {mantissa, exponent};
}

// --- lgamma / digamma --------------------------------------------------------------

Value f_lgamma(Builder& b, Value x) { return b.unary("chlo.lgamma", x); }
Value f_digamma(Builder& b, Value x) {
  // CPU: digamma(+-0) = copysign(inf, -x); chlo gives NaN there.
  Value r = b.unary("chlo.digamma", x);
  Value pole = b.select(udef::f_signbit(b, x), cst(b, INFINITY, x), cst(b, -INFINITY, x));
  return b.select(b.compare(x, cst(b, 0.0, x), "EQ"), pole, r);
}

constexpr udef::UDef d_lgamma{"lgamma", true, true, f_lgamma};
constexpr udef::UDef d_digamma{"digamma", true, true, f_digamma};

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
  auto C = [&](Builder& c, double v, Value like) { return cst(c, v, like); };
  auto inv_pow = [&](Builder& c, Value a) {  // a^-s
    Value p = a;
    for (int64_t i = 1; i < sv; ++i) p = mul(c, p, a);
    return div(c, C(c, 1.0, a), p);
  };
  // Carried: i (s32), a, b, s, done.
  Value s0 = inv_pow(b, q);
  std::vector<Value> init{b.constant(0, ElemType::kS32), q, cst(b, 0.0, q), s0,
                          b.constant(0, ElemType::kPred, b.dims(q))};
  auto running = [&](Builder& c, Value i, Value a, Value done) {
    Value more = c.binary("stablehlo.or", c.broadcast_to(c.compare(i, c.constant(9, ElemType::kS32), "LT"), c.dims(a)),
                          c.compare(a, C(c, 9.0, a), "LE"));
    return c.binary("stablehlo.and", more, c.unary("stablehlo.not", done));
  };
  auto any = [&](Builder& c, Value p) {
    if (c.dims(p).empty()) return p;
    std::vector<int64_t> all(c.dims(p).size());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
    return c.reduce(p, c.constant(0, ElemType::kPred), all, "stablehlo.or");
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
    Value na = add(c, a, C(c, 1.0, a));
    Value nb = inv_pow(c, na);
    Value ns = add(c, s, nb);
    Value tol = mul(c, C(c, eps, ns), ns);
    Value conv =
        c.binary("stablehlo.and", c.compare(c.unary("stablehlo.negate", tol), nb, "LT"), c.compare(nb, tol, "LT"));
    body->set_outputs({add(c, i, c.constant(1, ElemType::kS32)), c.select(act, na, a), c.select(act, nb, bb),
                       c.select(act, ns, s), c.binary("stablehlo.or", done, c.binary("stablehlo.and", act, conv))});
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
  Value st = sub(b, add(b, s, div(b, mul(b, bb, w), cst(b, x - 1.0, q))), mul(b, cst(b, 0.5, q), bb));
  s = b.select(done, s, st);
  Value fa = cst(b, 1.0, q);
  double k = 0;
  for (int i = 0; i < 12; ++i) {
    fa = mul(b, fa, cst(b, x + k, q));
    bb = div(b, bb, w);
    Value t = div(b, mul(b, fa, bb), cst(b, A[i], q));
    Value ns = add(b, s, t);
    s = b.select(done, s, ns);
    done = b.binary("stablehlo.or", done, b.compare(b.unary("stablehlo.abs", div(b, t, ns)), cst(b, eps, q), "LT"));
    k += 1;
    fa = mul(b, fa, cst(b, x + k, q));
    bb = div(b, bb, w);
    k += 1;
  }
  return s;
}

void polygamma_run(int64_t n, const at::Tensor& self, const at::Tensor& out) {
  TORCH_CHECK(n >= 0, "polygamma(n, x) does not support negative n.");
  ScalarType compute = opmath(float_result(self.scalar_type()));
  if (n == 0) {
    udef::u_run(d_digamma, self, out);
    return;
  }
  // chlo.polygamma is only accurate for positive x and gives NaN at poles.
  // Like CPU: trigamma reflects for x < 0.5; n >= 2 goes through the
  // Hurwitz zeta; poles give +inf (odd n) or -inf (even n).
  pointwise(
      "polygamma", {self, c10::Scalar(static_cast<double>(n))}, out, compute,
      [n](Builder& b, const Values& in) {
        Value x = in[0];
        Value direct = b.binary("chlo.polygamma", in[1], x);
        Value pole = b.binary("stablehlo.and", b.compare(x, cst(b, 0.0, x), "LE"),
                              b.compare(x, b.unary("stablehlo.floor", x), "EQ"));
        Value inf = cst(b, n % 2 ? INFINITY : -INFINITY, x);
        if (n >= 2) {
          // CPU: (-1)^(n+1) exp(lgamma(n + 1)) zeta(n + 1, x), zeta in double.
          Value finite = b.compare(b.unary("stablehlo.abs", x), cst(b, INFINITY, x), "LT");
          Value safe = b.select(b.binary("stablehlo.and", finite, b.unary("stablehlo.not", pole)), x, cst(b, 1.0, x));
          Value z = b.convert(zeta_cephes(b, n + 1, b.convert(safe, ElemType::kF64)), b.elem(x));
          bool f64 = b.elem(x) == ElemType::kF64;
          double fact = f64 ? std::exp(std::lgamma(n + 1.0)) : std::exp(std::lgamma(static_cast<float>(n + 1)));
          Value r = mul(b, cst(b, fact * (n % 2 ? 1.0 : -1.0), x), z);
          return b.select(pole, inf, b.select(finite, r, direct));
        }
        // n == 1 (CPU's trigamma): reflect for x < 0.5.
        Value one_v = cst(b, 1.0, x);
        Value mirrored = b.binary("chlo.polygamma", in[1], sub(b, one_v, x));
        Value sn = b.unary("stablehlo.sine", mul(b, x, cst(b, M_PI, x)));
        Value r = sub(b, mul(b, cst(b, M_PI * M_PI, x), div(b, one_v, mul(b, sn, sn))), mirrored);
        return b.select(b.compare(x, cst(b, 0.5, x), "LT"), r, direct);
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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("igamma.out", igamma_out<false>);
  m.impl("igammac.out", igamma_out<true>);
  m.impl("nextafter.out", nextafter_out);
  m.impl("frexp.Tensor_out", frexp_out);
  m.impl("lgamma", udef::u_fn<d_lgamma>);
  m.impl("lgamma_", udef::u_inplace<d_lgamma>);
  m.impl("lgamma.out", udef::u_out<d_lgamma>);
  m.impl("digamma", udef::u_fn<d_digamma>);
  m.impl("digamma_", udef::u_inplace<d_digamma>);
  m.impl("digamma.out", udef::u_out<d_digamma>);
  m.impl("polygamma", polygamma);
  m.impl("polygamma.out", polygamma_out);
}

}  // namespace
}  // namespace torch_tpu::ops
