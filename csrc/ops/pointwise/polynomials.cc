// Orthogonal polynomials with a per-element degree n: torch.special's
// chebyshev_polynomial_{t,u,v,w}, shifted_chebyshev_polynomial_{t,u,v,w},
// hermite_polynomial_{h,he}, laguerre_polynomial_l, legendre_polynomial_p.
//
// Semantics follow PyTorch CPU (ATen/native/Math.h): n is truncated toward
// zero (NaN/inf/huge n count as negative and give 0), closed forms for
// |x| == 1 and, for Chebyshev with |x| < 1 and large n, a trigonometric
// form; otherwise the three-term recurrence, which stops early once the
// running value is NaN (Chebyshev, Laguerre, Legendre). Since n varies per
// element, the recurrence runs in one stablehlo.while up to the largest
// remaining degree (decided on device, in the loop condition); each
// element stops updating once it reaches its own n.
//
// Only the .out overloads are registered: the functional, in-place and
// Scalar-operand overloads are composites over them.
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"
#include "ops/pointwise/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;

enum class Kind { kT, kU, kV, kW, kH, kHe, kL, kP };

// Degree above which CPU switches Chebyshev (|y| < 1) to the trig form.
int64_t trig_threshold(Kind kind, bool shifted) {
  switch (kind) {
    case Kind::kT:
      return 6;
    case Kind::kU:
    case Kind::kV:
      return shifted ? 6 : 8;
    case Kind::kW:
      return shifted ? 4 : 8;
    default:
      return -1;
  }
}

// One recurrence step: the next value from (p, q) = (P_{k-1}, P_k) at loop
// index j (1-based; j-th application of the recurrence).
Value step(Builder& b, Kind kind, Value y, Value p, Value q, Value j_f) {
  auto C = [&](double v) { return full_like(b, v, y); };
  switch (kind) {
    case Kind::kH: {  // k = 2j: r = (x + x) q - k p
      Value k = b.add(j_f, j_f);
      return b.sub(b.mul(b.add(y, y), q), b.mul(k, p));
    }
    case Kind::kHe:  // k = j: r = x q - k p
      return b.sub(b.mul(y, q), b.mul(j_f, p));
    case Kind::kL: {  // k = j: r = ((2k + (1 - x)) q - k p) / (k + 1)
      Value t = b.add(b.add(j_f, j_f), b.sub(C(1), y));
      return b.div(b.sub(b.mul(t, q), b.mul(j_f, p)), b.add(j_f, C(1)));
    }
    case Kind::kP: {  // k = j: r = ((2k + 1) x q - k p) / (k + 1)
      Value t = b.mul(b.add(b.add(j_f, j_f), C(1)), y);
      return b.div(b.sub(b.mul(t, q), b.mul(j_f, p)), b.add(j_f, C(1)));
    }
    default:  // Chebyshev family: r = (y + y) q - p
      return b.sub(b.mul(b.add(y, y), q), p);
  }
}

bool nan_stops(Kind k) { return k != Kind::kH && k != Kind::kHe; }

// Elements with j <= m that are still running (no NaN yet, where CPU stops on NaN).
Value running(Builder& b, Kind kind, Value j, Value m, Value q) {
  Value act = b.compare(b.broadcast_to(j, b.dims(m)), m, Direction::kLe);
  if (nan_stops(kind)) act = b.and_(act, b.not_(is_nan(b, q)));
  return act;
}

// Runs the recurrence from (p, q) = (P_0, P_1) for m[i] steps per element.
Value recurrence(Builder& b, Kind kind, Value y, Value m, Value p0, Value q0) {
  Value j0 = b.constant(1, ElemType::kS64);
  std::vector<Value> init{j0, y, m, p0, q0};
  auto cond = b.loop_region(init);
  {
    Builder c(*cond);
    auto P = [&](int i) { return Value{cond->params()[i], 0}; };
    Value act = running(c, kind, P(0), P(2), P(4));
    Value any = act;
    if (!c.dims(act).empty()) {
      std::vector<int64_t> all(c.dims(act).size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
      any = c.reduce(act, c.constant(0, ElemType::kPred), all, BinaryOp::kOr);
    }
    cond->set_outputs({any});
  }
  auto body = b.loop_region(init);
  {
    Builder c(*body);
    auto P = [&](int i) { return Value{body->params()[i], 0}; };
    Value j = P(0), yv = P(1), mv = P(2), p = P(3), q = P(4);
    Value act = running(c, kind, j, mv, q);
    Value j_f = c.broadcast_to(c.convert(j, c.elem(yv)), c.dims(yv));
    Value r = step(c, kind, yv, p, q, j_f);
    body->set_outputs({c.add(j, c.constant(1, ElemType::kS64)), yv, mv, c.select(act, q, p), c.select(act, r, q)});
  }
  return b.while_loop(init, cond, body)[4];
}

// shifted: the shifted Chebyshev polynomials, of argument 2x - 1.
template <Kind kKind, bool kShifted = false>
Value lower(Builder& b, const Values& in, ElemType) {
  Value x = in[0], n = in[1];
  auto C = [&](double v) { return full_like(b, v, x); };
  Value zero_f = C(0), one_f = C(1);
  // n truncated toward zero; CPU's float -> int64 cast of NaN/inf/out of
  // range gives INT64_MIN, i.e. "negative", hence 0.
  Value nt = b.select(b.compare(n, zero_f, Direction::kLt), b.ceil(n), b.floor(n));
  Value valid = b.and_(b.compare(nt, zero_f, Direction::kGe), b.compare(nt, C(9223372036854775808.0), Direction::kLt));
  Value nf = b.select(valid, nt, zero_f);
  Value ni = b.convert(nf, ElemType::kS64);
  auto I = [&](int64_t v) { return b.constant(static_cast<double>(v), ElemType::kS64, b.dims(ni)); };
  Value even = b.compare(b.rem(ni, I(2)), I(0), Direction::kEq);
  Value n0 = b.compare(ni, I(0), Direction::kEq), n1 = b.compare(ni, I(1), Direction::kEq);
  Value two_n1 = b.add(b.add(nf, nf), one_f);  // float(2n + 1)
  Value pm1 = b.select(even, one_f, C(-1));    // (-1)^n

  Value y = kShifted ? b.sub(b.add(x, x), one_f) : x;
  Value result;  // closed-form value where `closed`
  Value closed;
  Value q1;  // P_1, the recurrence's starting q (P_0 = 1)
  switch (kKind) {
    case Kind::kT:
    case Kind::kU:
    case Kind::kV:
    case Kind::kW: {
      Value ay = b.abs(y);
      Value at1 = b.compare(ay, one_f, Direction::kEq);
      Value pos = b.compare(y, zero_f, Direction::kGt);
      Value trig = b.and_(b.compare(ni, I(trig_threshold(kKind, kShifted)), Direction::kGt),
                          b.compare(ay, one_f, Direction::kLt));
      Value th = b.acos(y);
      Value edge, tv;
      if (kKind == Kind::kT) {
        q1 = y;
        edge = b.select(b.or_(pos, even), one_f, C(-1));
        tv = b.cos(b.mul(nf, th));
      } else if (kKind == Kind::kU) {
        q1 = b.add(y, y);
        Value np1 = b.add(nf, one_f);
        edge = b.select(b.or_(pos, even), np1, b.neg(np1));
        Value s = b.sin(th);
        Value a = b.mul(np1, th);
        tv = b.select(b.compare(s, zero_f, Direction::kNe), b.div(b.sin(a), s), b.div(b.mul(np1, b.cos(a)), y));
      } else if (kKind == Kind::kV) {
        q1 = b.sub(b.add(y, y), one_f);
        Value odd_case = b.mul(pm1, two_n1);  // +-(2n+1)
        edge = b.select(pos, one_f, odd_case);
        Value h = b.div(th, C(2));
        Value a = b.mul(b.add(nf, C(0.5)), th);
        tv = b.select(b.compare(b.sin(h), one_f, Direction::kNe), b.div(b.cos(a), b.cos(h)), odd_case);
      } else {
        q1 = b.add(b.add(y, y), one_f);
        edge = b.select(pos, two_n1, pm1);
        Value h = b.div(th, C(2));
        Value a = b.mul(b.add(nf, C(0.5)), th);
        Value degenerate = kShifted ? pm1 : edge;
        tv = b.select(b.compare(b.cos(h), one_f, Direction::kNe), b.div(b.sin(a), b.sin(h)), degenerate);
      }
      result = b.select(at1, edge, b.select(trig, tv, b.select(n0, one_f, q1)));
      closed = b.or_(b.or_(at1, trig), b.or_(n0, n1));
      break;
    }
    case Kind::kH:
    case Kind::kHe: {
      q1 = kKind == Kind::kH ? b.add(x, x) : x;
      // CPU gives up (NaN) past a dtype-dependent degree.
      int64_t limit = b.elem(x) == ElemType::kF32 ? 128 : b.elem(x) == ElemType::kF64 ? 512 : 1024;
      Value big = b.compare(ni, I(limit), Direction::kGt);
      result = b.select(n0, one_f, b.select(n1, q1, C(NAN)));
      closed = b.or_(b.or_(n0, n1), big);
      break;
    }
    case Kind::kL: {
      q1 = b.sub(one_f, x);
      Value x0 = b.compare(x, zero_f, Direction::kEq);
      result = b.select(b.or_(x0, n0), one_f, q1);
      closed = b.or_(b.or_(x0, n0), n1);
      break;
    }
    case Kind::kP: {
      q1 = x;
      Value at1 = b.compare(b.abs(x), one_f, Direction::kEq);
      Value pos = b.compare(x, zero_f, Direction::kGt);
      Value edge = b.select(b.or_(pos, even), one_f, C(-1));
      result = b.select(at1, edge, b.select(n0, one_f, q1));
      closed = b.or_(at1, b.or_(n0, n1));
      break;
    }
  }
  // (NaN x with n >= 2 gives NaN. CPU's U, W, Laguerre and Legendre loops
  // then return an uninitialised value, which varies with the element's
  // position in the vectorised loop; it is not reproduced.)
  closed = b.or_(closed, b.not_(valid));
  Value m = b.select(closed, I(0), b.sub(ni, I(1)));  // recurrence steps left
  Value rec = recurrence(b, kKind, y, m, one_f, q1);
  return b.select(b.not_(valid), zero_f, b.select(closed, result, rec));
}

// CPU's kernels exist for float and double only (ints promote to float).
constexpr int kPoly = Accepts::kNoHalf;

constexpr PointwiseDef d_chebyshev_polynomial_t{"chebyshev_polynomial_t", Result::kFloat, kPoly, lower<Kind::kT>};
constexpr PointwiseDef d_chebyshev_polynomial_u{"chebyshev_polynomial_u", Result::kFloat, kPoly, lower<Kind::kU>};
constexpr PointwiseDef d_chebyshev_polynomial_v{"chebyshev_polynomial_v", Result::kFloat, kPoly, lower<Kind::kV>};
constexpr PointwiseDef d_chebyshev_polynomial_w{"chebyshev_polynomial_w", Result::kFloat, kPoly, lower<Kind::kW>};
constexpr PointwiseDef d_shifted_chebyshev_polynomial_t{"shifted_chebyshev_polynomial_t", Result::kFloat, kPoly,
                                                        lower<Kind::kT, true>};
constexpr PointwiseDef d_shifted_chebyshev_polynomial_u{"shifted_chebyshev_polynomial_u", Result::kFloat, kPoly,
                                                        lower<Kind::kU, true>};
constexpr PointwiseDef d_shifted_chebyshev_polynomial_v{"shifted_chebyshev_polynomial_v", Result::kFloat, kPoly,
                                                        lower<Kind::kV, true>};
constexpr PointwiseDef d_shifted_chebyshev_polynomial_w{"shifted_chebyshev_polynomial_w", Result::kFloat, kPoly,
                                                        lower<Kind::kW, true>};
constexpr PointwiseDef d_hermite_polynomial_h{"hermite_polynomial_h", Result::kFloat, kPoly, lower<Kind::kH>};
constexpr PointwiseDef d_hermite_polynomial_he{"hermite_polynomial_he", Result::kFloat, kPoly, lower<Kind::kHe>};
constexpr PointwiseDef d_laguerre_polynomial_l{"laguerre_polynomial_l", Result::kFloat, kPoly, lower<Kind::kL>};
constexpr PointwiseDef d_legendre_polynomial_p{"legendre_polynomial_p", Result::kFloat, kPoly, lower<Kind::kP>};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // ATen's functional forms are composites over out=, so only out= is registered.
  register_variants<Binary<d_chebyshev_polynomial_t>>(m, {"", "", "special_chebyshev_polynomial_t.out"});
  register_variants<Binary<d_chebyshev_polynomial_u>>(m, {"", "", "special_chebyshev_polynomial_u.out"});
  register_variants<Binary<d_chebyshev_polynomial_v>>(m, {"", "", "special_chebyshev_polynomial_v.out"});
  register_variants<Binary<d_chebyshev_polynomial_w>>(m, {"", "", "special_chebyshev_polynomial_w.out"});
  register_variants<Binary<d_shifted_chebyshev_polynomial_t>>(m,
                                                              {"", "", "special_shifted_chebyshev_polynomial_t.out"});
  register_variants<Binary<d_shifted_chebyshev_polynomial_u>>(m,
                                                              {"", "", "special_shifted_chebyshev_polynomial_u.out"});
  register_variants<Binary<d_shifted_chebyshev_polynomial_v>>(m,
                                                              {"", "", "special_shifted_chebyshev_polynomial_v.out"});
  register_variants<Binary<d_shifted_chebyshev_polynomial_w>>(m,
                                                              {"", "", "special_shifted_chebyshev_polynomial_w.out"});
  register_variants<Binary<d_hermite_polynomial_h>>(m, {"", "", "special_hermite_polynomial_h.out"});
  register_variants<Binary<d_hermite_polynomial_he>>(m, {"", "", "special_hermite_polynomial_he.out"});
  register_variants<Binary<d_laguerre_polynomial_l>>(m, {"", "", "special_laguerre_polynomial_l.out"});
  register_variants<Binary<d_legendre_polynomial_p>>(m, {"", "", "special_legendre_polynomial_p.out"});
}

}  // namespace
}  // namespace torch_tpu::ops
