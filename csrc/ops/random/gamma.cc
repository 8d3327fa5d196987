// The samplers torch.distributions builds on beyond the plain ones in
// random.cc: _standard_gamma (Gamma, and through it Chi2, StudentT, Beta),
// _sample_dirichlet (Dirichlet, Beta) and binomial; and the reparameterised
// gradients behind Gamma/Beta/Dirichlet.rsample(), _standard_gamma_grad and
// _dirichlet_grad.
//
// The samplers follow poisson in random.cc: the generator's (seed, offset)
// are runtime scalars, the program draws a fixed number of uniforms per
// element, and each rejection method runs on a fixed number of candidates of
// which the first accepted one is kept. The draws are not CPU's stream.
//
// The gradients are deterministic and reproduce ATen's CPU formulas
// (ATen/native/Distributions.h: standard_gamma_grad_one, dirichlet_grad_one)
// branch for branch, with CPU's branch tests; every form is evaluated in
// double, as CPU does for all but Dirichlet's two series (see there).
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/random/rng.h"

namespace torch_tpu::ops {
namespace {

using rng::add_rng_state;
using rng::compute_type;
using rng::kPi;
using rng::uniform01;
using rng::words_per;

Value lt(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kLt); }
Value le(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kLe); }
Value gt(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kGt); }
Value ge(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kGe); }

// Columns [lo, hi) of a 2-D value.
Value cols(Builder& b, Value u, int64_t lo, int64_t hi) { return b.slice(u, {0, lo}, {b.dims(u)[0], hi}, {1, 1}); }

// A per-element value [n] broadcast along the candidates, to [n, C].
Value per_row(Builder& b, Value x, int64_t c) { return b.broadcast_in_dim(x, {b.dims(x)[0], c}, {0}); }

// x[i, j] for the first j whose ok[i, j] holds (the last j when none does),
// as a rejection sampler takes its first accepted candidate.
Value first_accepted(Builder& b, Value ok, Value x) {
  const Dims d = b.dims(x);
  const int64_t last = d[1] - 1;
  Value idx = b.iota(d, 1, ElemType::kS32);
  Value first = b.reduce(b.select(ok, idx, b.constant(last, ElemType::kS32, d)), b.constant(last, ElemType::kS32), {1},
                         BinaryOp::kMin);
  Value pick = b.compare(idx, per_row(b, first, d[1]), Direction::kEq);
  return b.reduce(b.select(pick, x, zero(b, b.elem(x), d)), zero(b, b.elem(x)), {1}, BinaryOp::kAdd);
}

// The smallest positive normal value and the largest value below 1 of a
// float dtype: CPU clamps gamma and Dirichlet samples into them.
double smallest_normal(c10::ScalarType t) {
  switch (t) {
    case c10::kDouble:
      return DBL_MIN;
    case c10::kHalf:
      return static_cast<double>(std::numeric_limits<c10::Half>::min());
    default:  // float and bfloat16 share float's exponent range
      return FLT_MIN;
  }
}
double largest_below_one(c10::ScalarType t) {
  switch (t) {
    case c10::kDouble:
      return 1.0 - DBL_EPSILON / 2;
    case c10::kHalf:
      return 1.0 - static_cast<double>(std::numeric_limits<c10::Half>::epsilon()) / 2;
    case c10::kBFloat16:
      return 1.0 - static_cast<double>(std::numeric_limits<c10::BFloat16>::epsilon()) / 2;
    default:
      return 1.0 - FLT_EPSILON / 2;
  }
}

// CPU's std::max(lo, x): x when above lo, else lo (NaN included).
Value floor_at(Builder& b, Value x, double lo) {
  Value l = full_like(b, lo, x);
  return b.select(lt(b, l, x), x, l);
}

// --- gamma: Marsaglia-Tsang --------------------------------------------------------------
// Marsaglia and Tsang (2000) on shape a' = a, or a + 1 with the boost
// U^(1/a) when a < 1 (the method needs a' >= 1), as CPU does. At a' >= 1 a
// candidate is accepted with probability above 0.95, so all 12 fail with
// probability below 2e-16 (the last then stands). Each element takes 25
// uniforms: the boost's, 12 for 12 normals (Box-Muller's cosine and sine of
// 6 pairs are independent) and 12 for the acceptance tests.
constexpr int64_t kGammaCandidates = 12;
constexpr int64_t kGammaDraws = 1 + 2 * kGammaCandidates;

// A gamma draw as d * v times the boost, kept apart so that Dirichlet can
// work with its logarithm (U^(1/a) underflows for small a).
struct GammaDraw {
  Value dv;         // [n]: Gamma(a') draw
  Value log_boost;  // [n]: log U / a when a < 1, else 0
};

GammaDraw marsaglia_tsang(Builder& b, Value alpha, Value u) {
  const ElemType ft = b.elem(alpha);
  const int64_t n = b.dims(alpha)[0], C = kGammaCandidates, H = C / 2;
  const Dims d{n, C};
  auto c = [&](double x) { return b.constant(x, ft, d); };
  auto cn = [&](double x) { return b.constant(x, ft, {n}); };
  Value boost = lt(b, alpha, cn(1));
  Value dd = b.sub(b.select(boost, b.add(alpha, cn(1)), alpha), cn(1.0 / 3));
  Value dc = per_row(b, dd, C);
  Value cc = b.div(c(1), b.sqrt(b.mul(c(9), dc)));
  // Box-Muller; 1 - u lies in (0, 1], so the logs are finite.
  Value r = b.sqrt(b.mul(b.constant(-2, ft, {n, H}), b.log(b.sub(b.constant(1, ft, {n, H}), cols(b, u, 1, 1 + H)))));
  Value theta = b.mul(b.constant(2 * kPi, ft, {n, H}), cols(b, u, 1 + H, 1 + C));
  Value x = b.concatenate({b.mul(r, b.cos(theta)), b.mul(r, b.sin(theta))}, 1);
  Value y = b.add(c(1), b.mul(cc, x));
  Value v = b.mul(b.mul(y, y), y);
  Value ua = b.sub(c(1), cols(b, u, 1 + C, 1 + 2 * C));
  Value xx = b.mul(x, x);
  // The squeeze, then the full test; y <= 0 (v <= 0) is always rejected.
  Value squeeze = lt(b, ua, b.sub(c(1), b.mul(c(0.0331), b.mul(xx, xx))));
  Value full = lt(b, b.log(ua), b.add(b.mul(c(0.5), xx), b.mul(dc, b.add(b.sub(c(1), v), b.log(v)))));
  Value ok = b.and_(gt(b, y, c(0)), b.or_(squeeze, full));
  Value dv = b.mul(dd, first_accepted(b, ok, v));
  Value u0 = b.reshape(cols(b, u, 0, 1), {n});
  Value log_boost = b.select(boost, b.div(b.log(b.sub(cn(1), u0)), alpha), cn(0));
  return {dv, log_boost};
}

at::Tensor standard_gamma(const at::Tensor& alpha, std::optional<at::Generator> gen) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(alpha.scalar_type()), "\"gamma_tpu\" not implemented for '",
                              alpha.scalar_type(), "'");
  at::Tensor out = empty_tpu(alpha.sizes(), alpha.scalar_type(), alpha.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  auto ct = compute_type(alpha.scalar_type());
  const ElemType ft = to_elem(ct);
  record::OpCall call("_standard_gamma");
  call.attr(static_cast<int64_t>(ct));
  add_rng_state(call, gen, out, static_cast<uint64_t>(n * kGammaDraws) * words_per(ct));
  call.input(alpha);
  call.output(out);
  const double tiny = smallest_normal(out.scalar_type());
  call.run([&](Builder& b, const Values& in) {
    Value a = b.reshape(b.convert(in[2], ft), {n});
    GammaDraw g = marsaglia_tsang(b, a, uniform01(b, in[0], in[1], {n, kGammaDraws}, ft));
    // CPU's floor: a = 0, underflow and NaN (a < 0) all give the smallest normal.
    Value x = floor_at(b, b.mul(g.dv, b.exp(g.log_boost)), tiny);
    return Values{b.convert(b.reshape(x, dims_of(out)), to_elem(out.scalar_type()))};
  });
  return out;
}

// --- dirichlet -----------------------------------------------------------------------------
// Gamma draws normalised along the last dim, done on their logarithms (a
// softmax): CPU draws in double and floors each at DBL_MIN, so concentrations
// far below 1 often collapse to ties there; the log keeps them apart in any
// dtype. Only a = 0 (and NaN) draws are floored, at the lowest finite log:
// an all-zero row then comes out uniform, as on CPU.
at::Tensor sample_dirichlet(const at::Tensor& alpha, std::optional<at::Generator> gen) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(alpha.scalar_type()), "\"dirichlet_tpu\" not implemented for '",
                              alpha.scalar_type(), "'");
  at::Tensor out = empty_tpu(alpha.sizes(), alpha.scalar_type(), alpha.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  const int64_t k = alpha.dim() == 0 ? 1 : alpha.size(-1), rows = n / k;
  auto ct = compute_type(alpha.scalar_type());
  const ElemType ft = to_elem(ct);
  record::OpCall call("_sample_dirichlet");
  call.attr(static_cast<int64_t>(ct)).attr(k);
  add_rng_state(call, gen, out, static_cast<uint64_t>(n * kGammaDraws) * words_per(ct));
  call.input(alpha);
  call.output(out);
  const double lo = smallest_normal(out.scalar_type()), hi = largest_below_one(out.scalar_type());
  const double lowest_log = ft == ElemType::kF64 ? -DBL_MAX : -FLT_MAX;
  call.run([&](Builder& b, const Values& in) {
    Value a = b.reshape(b.convert(in[2], ft), {n});
    GammaDraw g = marsaglia_tsang(b, a, uniform01(b, in[0], in[1], {n, kGammaDraws}, ft));
    Value lg = floor_at(b, b.add(b.log(g.dv), g.log_boost), lowest_log);
    lg = b.reshape(lg, {rows, k});
    Value m = b.reduce(lg, lowest(b, ft), {1}, BinaryOp::kMax);
    Value e = b.exp(b.sub(lg, per_row(b, m, k)));
    Value x = b.div(e, per_row(b, b.reduce(e, zero(b, ft), {1}, BinaryOp::kAdd), k));
    // CPU clamps into [smallest normal, largest value below 1].
    x = floor_at(b, x, lo);
    x = b.select(lt(b, x, full_like(b, hi, x)), x, full_like(b, hi, x));
    return Values{b.convert(b.reshape(x, dims_of(out)), to_elem(out.scalar_type()))};
  });
  return out;
}

// --- binomial ------------------------------------------------------------------------------
// CPU's scheme (from TensorFlow): with q = min(p, 1 - p), inversion by
// geometric jumps when count * q < 10 and BTRS (Hormann's transformed
// rejection with the squeeze) from 10 up, reflected to count - X when
// p > 0.5. Inversion sums 48 geometric draws (it needs X + 1 of them, and
// X >= 48 has probability below 1e-17 when the mean is below 10). A BTRS
// candidate is accepted with probability above 0.7, so all 30 fail with
// probability below 1e-16. Each element takes one path, so both read the
// same 60 uniforms.
constexpr int64_t kInversionDraws = 48, kBtrsCandidates = 30;
constexpr int64_t kBinomialDraws = std::max(kInversionDraws, 2 * kBtrsCandidates);

// The number of geometric(q) jumps whose running sum stays within count.
Value binomial_inversion(Builder& b, Value count, Value q, Value u) {
  const int64_t K = b.dims(u)[1];
  // ceil(log U / log(1 - q)); U = 0 gives +inf, which ends the count.
  Value geom = b.ceil(b.div(b.log(u), per_row(b, b.log1p(b.neg(q)), K)));
  Value within = le(b, cumsum(b, geom, 1), per_row(b, count, K));
  return b.reduce(b.convert(within, b.elem(u)), zero(b, b.elem(u)), {1}, BinaryOp::kAdd);
}

// Stirling's series remainder log(k!) - [(k + 1/2) log(k + 1) - (k + 1) +
// log(2 pi) / 2]: CPU tabulates it below 10, which is this exact value.
Value stirling_tail(Builder& b, Value k) {
  auto c = [&](double x) { return full_like(b, x, k); };
  Value k1 = b.add(k, c(1));
  Value exact = b.add(b.sub(b.lgamma(k1), b.mul(b.add(k, c(0.5)), b.log(k1))), b.sub(k1, c(0.5 * std::log(2 * kPi))));
  Value sq = b.mul(k1, k1);
  Value series = b.div(b.sub(c(1.0 / 12), b.div(b.sub(c(1.0 / 360), b.div(c(1.0 / 1260), sq)), sq)), k1);
  return b.select(lt(b, k, c(10)), exact, series);
}

Value binomial_btrs(Builder& b, Value count, Value q, Value u, Value v) {
  const int64_t C = b.dims(u)[1];
  const ElemType ft = b.elem(u);
  auto c = [&](double x) { return b.constant(x, ft, b.dims(count)); };
  auto row = [&](Value x) { return per_row(b, x, C); };
  Value stddev = b.sqrt(b.mul(b.mul(count, q), b.sub(c(1), q)));
  Value bb = b.add(c(1.15), b.mul(c(2.53), stddev));
  Value a = b.add(b.add(c(-0.0873), b.mul(c(0.0248), bb)), b.mul(c(0.01), q));
  Value cc = b.add(b.mul(count, q), c(0.5));
  Value vr = b.sub(c(0.92), b.div(c(4.2), bb));
  Value r = b.div(q, b.sub(c(1), q));
  Value alpha = b.mul(b.add(c(2.83), b.div(c(5.1), bb)), stddev);
  Value m = b.floor(b.mul(b.add(count, c(1)), q));
  // The parts of the acceptance bound that depend on m alone.
  Value m_part = b.add(b.mul(b.add(m, c(0.5)), b.log(b.div(b.add(m, c(1)), b.mul(r, b.add(b.sub(count, m), c(1)))))),
                       b.add(stirling_tail(b, m), stirling_tail(b, b.sub(count, m))));

  auto cu = [&](double x) { return b.constant(x, ft, b.dims(u)); };
  Value uc = b.sub(u, cu(0.5));
  Value us = b.sub(cu(0.5), b.abs(uc));
  Value n = row(count);
  Value k = b.floor(b.add(b.mul(b.add(b.div(row(b.mul(c(2), a)), us), row(bb)), uc), row(cc)));
  Value valid = b.and_(ge(b, k, cu(0)), le(b, k, n));
  Value quick = b.and_(ge(b, us, cu(0.07)), le(b, v, row(vr)));
  Value lhs = b.log(b.div(b.mul(v, row(alpha)), b.add(b.div(row(a), b.mul(us, us)), row(bb))));
  Value nk1 = b.add(b.sub(n, k), cu(1));
  Value bound = b.add(row(m_part), b.mul(b.add(n, cu(1)), b.log(b.div(row(b.add(b.sub(count, m), c(1))), nk1))));
  bound = b.add(bound, b.mul(b.add(k, cu(0.5)), b.log(b.div(b.mul(row(r), nk1), b.add(k, cu(1))))));
  bound = b.sub(bound, b.add(stirling_tail(b, k), stirling_tail(b, b.sub(n, k))));
  Value ok = b.and_(valid, b.or_(quick, le(b, lhs, bound)));
  // Clamped for the all-rejected case (below 1e-16), which keeps an invalid k.
  return b.min(b.max(first_accepted(b, ok, k), c(0)), count);
}

at::Tensor binomial(const at::Tensor& count, const at::Tensor& prob, std::optional<at::Generator> gen) {
  TORCH_CHECK_VALUE(at::isFloatingType(count.scalar_type()),
                    "binomial only supports floating-point dtypes for count, got: ", count.scalar_type());
  TORCH_CHECK_VALUE(at::isFloatingType(prob.scalar_type()),
                    "binomial only supports floating-point dtypes for prob, got: ", prob.scalar_type());
  TORCH_CHECK(prob.scalar_type() == count.scalar_type(), "Found dtype ", prob.scalar_type(), " but expected ",
              count.scalar_type());
  auto shape = broadcast_shape({count, prob});
  at::Tensor out = empty_tpu(shape, count.scalar_type(), count.is_cpu() ? prob.device() : count.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  auto ct = compute_type(count.scalar_type());
  const ElemType ft = to_elem(ct);
  record::OpCall call("binomial");
  call.attr(static_cast<int64_t>(ct));
  add_rng_state(call, gen, out, static_cast<uint64_t>(n * kBinomialDraws) * words_per(ct));
  call.input(count);
  call.input(prob);
  call.output(out);
  const Dims od = dims_of(out);
  call.run([&](Builder& b, const Values& in) {
    auto flat = [&](Value x) { return b.reshape(b.broadcast_to(b.convert(x, ft), od), {n}); };
    auto c = [&](double x) { return b.constant(x, ft, {n}); };
    Value cnt = flat(in[2]), p = flat(in[3]);
    Value u = uniform01(b, in[0], in[1], {n, kBinomialDraws}, ft);
    Value flip = gt(b, p, c(0.5));
    Value q = b.select(flip, b.sub(c(1), p), p);
    Value inv = binomial_inversion(b, cnt, q, cols(b, u, 0, kInversionDraws));
    const int64_t C = kBtrsCandidates;
    Value btrs = binomial_btrs(b, cnt, q, cols(b, u, 0, C), cols(b, u, C, 2 * C));
    Value x = b.select(ge(b, b.mul(cnt, q), c(10)), btrs, inv);
    x = b.select(flip, b.sub(cnt, x), x);
    // CPU's cases, last one first: NaN p, then p >= 1, then count or p <= 0.
    x = b.select(is_nan(b, p), p, x);
    x = b.select(ge(b, p, c(1)), cnt, x);
    x = b.select(b.or_(le(b, cnt, c(0)), le(b, p, c(0))), c(0), x);
    return Values{b.convert(b.reshape(x, od), to_elem(out.scalar_type()))};
  });
  return out;
}

// --- gradients: shared checks ----------------------------------------------------------------

// CPU's TensorIterator wants every operand in the first one's dtype, then
// dispatches on floating types.
void check_grad_inputs(const char* kernel, std::initializer_list<const at::Tensor*> ts) {
  const c10::ScalarType t = (*ts.begin())->scalar_type();
  for (const at::Tensor* x : ts)
    TORCH_CHECK(x->scalar_type() == t, "Found dtype ", x->scalar_type(), " but expected ", t);
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(t), "\"", kernel, "\" not implemented for '", t, "'");
}

// The device of the first tpu operand (others may be 0-dim CPU tensors).
c10::Device tpu_device(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* x : ts)
    if (!x->is_cpu()) return x->device();
  return (*ts.begin())->device();
}

// CPU's digamma_one: +inf at 0 (chlo gives NaN there).
Value digamma_cpu(Builder& b, Value x) {
  return b.select(b.compare(x, full_like(b, 0, x), Direction::kEq), full_like(b, INFINITY, x), b.digamma(x));
}

// --- _standard_gamma_grad ------------------------------------------------------------------------
// -(d/da CDF(x; a)) / pdf(x; a) for x ~ Gamma(a): a Taylor series below
// x = 0.8, Rice's saddle-point expansion above a = 8, a bivariate rational
// approximation between. CPU evaluates it in double for every dtype, and
// so does this: float32 results then agree with CPU's to the bit in tests.
// CPU's branch bounds are float literals; these are their exact values.
constexpr double k08f = 0.8f, k09f = 0.9f, k11f = 1.1f;

Value gamma_grad_taylor(Builder& b, Value a, Value x) {
  auto c = [&](double v) { return full_like(b, v, x); };
  Value numer = c(1), denom = a;
  Value s1 = b.div(numer, denom), s2 = b.div(numer, b.mul(denom, denom));
  for (int i = 1; i <= 5; ++i) {
    numer = b.mul(numer, b.div(b.neg(x), c(i)));
    denom = b.add(denom, c(1));
    s1 = b.add(s1, b.div(numer, denom));
    s2 = b.add(s2, b.div(numer, b.mul(denom, denom)));
  }
  Value pow_xa = b.pow(x, a);
  Value pdf = b.mul(b.pow(x, b.sub(a, c(1))), b.exp(b.neg(x)));
  Value cdf = b.mul(pow_xa, s1);
  Value cdf_a = b.sub(b.mul(b.sub(b.log(x), digamma_cpu(b, a)), cdf), b.mul(pow_xa, s2));
  Value r = b.neg(b.div(cdf_a, pdf));
  return b.select(is_nan(b, r), c(0), r);
}

Value gamma_grad_rice(Builder& b, Value a, Value x) {
  auto c = [&](double v) { return full_like(b, v, x); };
  // Next to x = a, where the general form below is 0/0.
  Value n1 = b.add(c(1), b.mul(b.mul(c(24), a), b.add(c(1), b.mul(c(12), a))));
  Value n2 = b.add(b.mul(c(1440), b.mul(a, a)), b.mul(b.mul(c(6), x), b.sub(c(53), b.mul(c(120), x))));
  n2 = b.sub(n2, b.div(b.mul(b.mul(c(65), x), x), a));
  n2 = b.add(n2, b.mul(a, b.add(c(107), b.mul(c(3600), x))));
  Value a2 = b.mul(a, a);
  Value near = b.div(b.mul(n1, n2), b.mul(b.mul(c(1244160), a2), a2));
  Value denom = b.sqrt(b.mul(c(8), a));
  Value amx = b.sub(a, x);
  Value log_xa = b.log(b.div(x, a));
  Value term2 = b.div(denom, amx);
  Value term3 = b.pow(b.sub(b.sub(x, a), b.mul(a, log_xa)), c(-1.5));
  Value term23 = b.select(lt(b, x, a), b.sub(term2, term3), b.add(term2, term3));
  Value term1 = b.sub(b.mul(log_xa, term23), b.div(b.mul(b.sqrt(b.div(c(2), a)), b.add(a, x)), b.mul(amx, amx)));
  Value stirling = b.add(c(1), b.mul(b.div(c(1), b.mul(c(12), a)), b.add(c(1), b.div(c(1), b.mul(c(24), a)))));
  Value far = b.neg(b.div(b.mul(stirling, b.mul(x, term1)), denom));
  Value is_near = b.and_(le(b, b.mul(c(k09f), a), x), le(b, x, b.mul(c(k11f), a)));
  return b.select(is_near, near, far);
}

Value gamma_grad_rational(Builder& b, Value a, Value x) {
  static constexpr double kCoef[3][8] = {
      {0.16009398, -0.094634809, 0.025146376, -0.0030648343, 1, 0.32668115, 0.10406089, 0.0014179084},
      {0.53487893, 0.1298071, 0.065735949, -0.0015649758, 0.16639465, 0.020070113, -0.0035938915, -0.00058392623},
      {0.040121004, -0.0065914022, -0.0026286047, -0.0013441777, 0.017050642, -0.0021309326, 0.00085092367,
       -1.5247877e-07},
  };
  auto c = [&](double v) { return full_like(b, v, x); };
  Value u = b.log(b.div(x, a)), v = b.log(a);
  Value cv[8];
  for (int i = 0; i < 8; ++i) cv[i] = b.add(c(kCoef[0][i]), b.mul(u, b.add(c(kCoef[1][i]), b.mul(u, c(kCoef[2][i])))));
  // Horner in v over coefficients [i0, i0 + 4).
  auto cubic = [&](int i0) {
    return b.add(cv[i0], b.mul(v, b.add(cv[i0 + 1], b.mul(v, b.add(cv[i0 + 2], b.mul(v, cv[i0 + 3]))))));
  };
  return b.exp(b.div(cubic(0), cubic(4)));
}

Value gamma_grad(Builder& b, Value a, Value x) {
  Value large = b.select(gt(b, a, full_like(b, 8, a)), gamma_grad_rice(b, a, x), gamma_grad_rational(b, a, x));
  return b.select(lt(b, x, full_like(b, k08f, x)), gamma_grad_taylor(b, a, x), large);
}

at::Tensor standard_gamma_grad(const at::Tensor& self, const at::Tensor& output) {
  check_grad_inputs("_standard_gamma_grad_tpu", {&self, &output});
  at::Tensor out = empty_tpu(broadcast_shape({self, output}), self.scalar_type(), tpu_device({&self, &output}));
  if (out.numel() == 0) return out;
  pointwise("_standard_gamma_grad", {self, output}, out, c10::kDouble,
            [](Builder& b, const Values& v) { return gamma_grad(b, v[0], v[1]); });
  return out;
}

// --- _dirichlet_grad ------------------------------------------------------------------------------
// -(d/da CDF(x; a, total - a)) / pdf / (1 - x) for x ~ Beta(a, total - a):
// Taylor series next to x = 0 and x = 1, Rice's expansion when both
// parameters exceed 6, else a rational correction to an analytic form. CPU
// runs the two series in the tensor's dtype and the other forms in double;
// here all run in double (for float32 that is closer to the exact value
// than CPU: CPU's series are off by up to ~3e-6 relative there).

// _beta_grad_alpha_small: x near 0.
Value beta_grad_alpha_small(Builder& b, Value x, Value a, Value be) {
  auto c = [&](double v) { return full_like(b, v, x); };
  Value factor = b.sub(b.sub(digamma_cpu(b, a), digamma_cpu(b, b.add(a, be))), b.log(x));
  Value numer = c(1);
  Value series = b.mul(b.div(numer, a), b.add(factor, b.div(c(1), a)));
  for (int i = 1; i <= 10; ++i) {
    numer = b.mul(numer, b.div(b.mul(b.sub(c(i), be), x), c(i)));
    Value denom = b.add(a, c(i));
    series = b.add(series, b.mul(b.div(numer, denom), b.add(factor, b.div(c(1), denom))));
  }
  Value r = b.mul(b.mul(x, b.pow(b.sub(c(1), x), b.neg(be))), series);
  return b.select(is_nan(b, r), c(0), r);
}

// _beta_grad_beta_small: the same expansion for the other parameter.
Value beta_grad_beta_small(Builder& b, Value x, Value a, Value be) {
  auto c = [&](double v) { return full_like(b, v, x); };
  Value factor = b.sub(digamma_cpu(b, b.add(a, be)), digamma_cpu(b, be));
  Value numer = c(1), betas = c(1), dbetas = c(0), series = b.div(factor, a);
  for (int i = 1; i <= 8; ++i) {
    numer = b.mul(numer, b.div(b.neg(x), c(i)));
    dbetas = b.add(b.mul(dbetas, b.sub(be, c(i))), betas);
    betas = b.mul(betas, b.sub(be, c(i)));
    series = b.add(series, b.mul(b.div(numer, b.add(a, c(i))), b.add(dbetas, b.mul(factor, betas))));
  }
  Value r = b.neg(b.mul(b.pow(b.sub(c(1), x), b.sub(c(1), be)), series));
  return b.select(is_nan(b, r), c(0), r);
}

// _beta_grad_alpha_mid: Rice's saddle-point expansion (double).
Value beta_grad_alpha_mid(Builder& b, Value x, Value a, Value be) {
  auto c = [&](double v) { return full_like(b, v, x); };
  auto mul = [&](std::initializer_list<Value> vs) {
    Value r = *vs.begin();
    for (auto it = vs.begin() + 1; it != vs.end(); ++it) r = b.mul(r, *it);
    return r;
  };
  Value total = b.add(a, be), omx = b.sub(c(1), x);
  Value mean = b.div(a, total);
  Value sd = b.div(b.sqrt(b.div(b.mul(a, be), b.add(total, c(1)))), total);
  Value b2 = b.mul(be, be);
  // Next to the mean, where the general form below is 0/0.
  Value inner = mul({c(8), omx, b.sub(b.mul(c(135), be), c(11))});
  inner = b.add(b.mul(b.sub(b.add(c(453), mul({c(1620), be, omx})), b.mul(c(455), x)), be), b.mul(a, inner));
  inner = b.add(mul({c(3), b.sub(b.add(c(59), b.mul(c(180), be)), b.mul(c(90), x)), b2}), b.mul(a, inner));
  inner = b.add(mul({b.add(c(43), mul({c(20), b.add(c(16), b.mul(c(27), be)), x})), b2, be}), b.mul(a, inner));
  Value poly = b.add(mul({c(47), x, b2, b2}), b.mul(a, inner));
  Value pre_num = b.div(mul({b.add(c(1), b.mul(c(12), a)), b.add(c(1), b.mul(c(12), be))}), b.mul(total, total));
  Value pre_den = mul({c(12960), a, a, a, be, be, b.add(c(1), b.mul(c(12), total))});
  Value near = b.div(b.mul(b.div(pre_num, omx), poly), pre_den);

  Value prefactor = b.div(b.neg(x), b.sqrt(b.div(mul({c(2), a, be}), total)));
  auto st = [&](Value y) { return b.add(b.add(c(1), b.div(c(1), b.mul(c(12), y))), b.div(c(1), mul({c(288), y, y}))); };
  Value stirling = b.div(b.mul(st(a), st(be)), st(total));
  Value xm1 = b.sub(x, c(1));
  Value t1_num = b.sub(b.add(mul({c(2), b.mul(a, a), xm1}), mul({a, be, xm1})), b.mul(x, b2));
  Value axbx = b.add(b.mul(a, xm1), b.mul(be, x));
  Value t1_den = mul({b.sqrt(b.div(b.mul(c(2), a), be)), b.pow(total, c(1.5)), axbx, axbx});
  Value term1 = b.div(t1_num, t1_den);
  Value term2 = b.mul(c(0.5), b.log(b.div(a, b.mul(total, x))));
  Value term3 = b.div(b.sqrt(b.div(mul({c(8), a, be}), total)), axbx);
  Value t4_base = b.add(b.mul(be, b.log(b.div(be, b.mul(total, omx)))), b.mul(a, b.log(b.div(a, b.mul(total, x)))));
  Value term4 = b.pow(t4_base, c(-1.5));
  Value t34 = b.add(term3, b.select(lt(b, x, mean), term4, b.neg(term4)));
  Value far = mul({stirling, prefactor, b.add(term1, b.mul(term2, t34))});
  Value dev = b.mul(c(0.1), sd);
  Value is_near = b.and_(le(b, b.sub(mean, dev), x), le(b, x, b.add(mean, dev)));
  return b.select(is_near, near, far);
}

// The rational correction to x (digamma(total) - digamma(a)) / beta.
Value beta_grad_rational(Builder& b, Value x, Value a, Value total, Value be) {
  static constexpr double kC[2][3][3][4] = {
      {{{1.003668233, -0.01061107488, -0.0657888334, 0.01201642863},
        {0.6336835991, -0.3557432599, 0.05486251648, -0.001465281033},
        {-0.03276231906, 0.004474107445, 0.002429354597, -0.0001557569013}},
       {{0.221950385, -0.3187676331, 0.01799915743, 0.01074823814},
        {-0.2951249643, 0.06219954479, 0.01535556598, 0.001550077057},
        {0.02155310298, 0.004170831599, 0.001292462449, 6.976601077e-05}},
       {{-0.05980841433, 0.008441916499, 0.01085618172, 0.002319392565},
        {0.02911413504, 0.01400243777, -0.002721828457, 0.000751041181},
        {0.005900514878, -0.001936558688, -9.495446725e-06, 5.385558597e-05}}},
      {{{1, -0.02924021934, -0.04438342661, 0.007285809825},
        {0.6357567472, -0.3473456711, 0.05454656494, -0.002407477521},
        {-0.03301322327, 0.004845219414, 0.00231480583, -0.0002307248149}},
       {{0.5925320577, -0.1757678135, 0.01505928619, 0.000564515273},
        {0.1014815858, -0.06589186703, 0.01272886114, -0.0007316646956},
        {-0.007258481865, 0.001096195486, 0.0003934994223, -4.12701925e-05}},
       {{0.06469649321, -0.0236701437, 0.002902096474, -5.896963079e-05},
        {0.001925008108, -0.002869809258, 0.0008000589141, -6.063713228e-05},
        {-0.0003477407336, 6.959756487e-05, 1.097287507e-05, -1.650964693e-06}}},
  };
  auto c = [&](double v) { return full_like(b, v, x); };
  Value u = b.log(x);
  Value la = b.sub(b.log(a), u);
  Value lb = b.sub(b.log(total), la);
  Value pow_u[3] = {c(1), u, b.mul(u, u)}, pow_a[3] = {c(1), la, b.mul(la, la)};
  Value pq[2] = {c(0), c(0)};
  for (int s = 0; s < 2; ++s)
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) {
        const double* k = kC[s][i][j];
        Value cubic = b.add(c(k[0]), b.mul(lb, b.add(c(k[1]), b.mul(lb, b.add(c(k[2]), b.mul(lb, c(k[3])))))));
        pq[s] = b.add(pq[s], b.mul(b.mul(pow_u[i], pow_a[j]), cubic));
      }
  Value approx = b.div(b.mul(x, b.sub(digamma_cpu(b, total), digamma_cpu(b, a))), be);
  return b.mul(b.div(pq[0], pq[1]), approx);
}

// dirichlet_grad_one on operands of the tensor's dtype: the branch tests
// in that dtype, as CPU does them, each form in double.
Value dirichlet_grad(Builder& b, Value x, Value a, Value total) {
  auto c = [&](double v) { return full_like(b, v, x); };
  const ElemType t = b.elem(x), f64 = ElemType::kF64;
  Value be = b.sub(total, a);
  Value boundary = b.mul(b.mul(total, x), b.sub(c(1), x));
  Value near0 = b.and_(le(b, x, c(0.5)), lt(b, boundary, c(2.5)));
  Value near1 = b.and_(ge(b, x, c(0.5)), lt(b, boundary, c(0.75)));
  Value mid = b.and_(gt(b, a, c(6)), gt(b, be, c(6)));
  Value xd = b.convert(x, f64), ad = b.convert(a, f64), td = b.convert(total, f64);
  Value bd = b.sub(td, ad);
  Value r = beta_grad_rational(b, xd, ad, td, bd);
  r = b.select(mid, beta_grad_alpha_mid(b, xd, ad, bd), r);
  Value one = full_like(b, 1, xd);
  r = b.select(near1, b.neg(beta_grad_beta_small(b, b.sub(one, xd), bd, ad)), r);
  r = b.select(near0, beta_grad_alpha_small(b, xd, ad, bd), r);
  return b.convert(r, t);
}

at::Tensor dirichlet_grad_kernel(const at::Tensor& x, const at::Tensor& alpha, const at::Tensor& total) {
  check_grad_inputs("_dirichlet_grad_tpu", {&x, &alpha, &total});
  // Only float and double, as on CPU and CUDA.
  TORCH_CHECK_NOT_IMPLEMENTED(x.scalar_type() == c10::kFloat || x.scalar_type() == c10::kDouble,
                              "\"_dirichlet_grad_tpu\" not implemented for '", x.scalar_type(), "'");
  at::Tensor out = empty_tpu(broadcast_shape({x, alpha, total}), x.scalar_type(), tpu_device({&x, &alpha, &total}));
  if (out.numel() == 0) return out;
  pointwise("_dirichlet_grad", {x, alpha, total}, out, x.scalar_type(),
            [](Builder& b, const Values& v) { return dirichlet_grad(b, v[0], v[1], v[2]); });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_standard_gamma", standard_gamma);
  m.impl("_standard_gamma_grad", standard_gamma_grad);
  m.impl("_sample_dirichlet", sample_dirichlet);
  m.impl("_dirichlet_grad", dirichlet_grad_kernel);
  m.impl("binomial", binomial);
}

}  // namespace
}  // namespace torch_tpu::ops
