// linalg_matrix_exp: scaling and squaring with a diagonal Padé approximant
// (Higham 2005, the method of SciPy's and JAX's expm). Each matrix is
// scaled by 2^-s so that its 1-norm falls under the approximant's bound,
// r(A) = (V - U)^-1 (V + U) is solved with the LU helpers, and r is squared
// s times. s differs per matrix and is known only on the device, so the
// squarings run as one stablehlo.while up to the batch's largest s, each
// matrix keeping its square only while its own count lasts. Every type uses
// the degree-13 approximant: degree 7, enough for float32's epsilon on its
// own, needs more squarings, whose rounding showed on OpInfo's samples;
// bfloat16 and float16 compute in float32.
// The backward is PyTorch's (a matrix_exp of a block matrix), which lands
// here again.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

#include "ops/linalg/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops::linalg {
namespace {

using ir::Dims;

// Padé coefficients b_0..b_13 of exp (Higham 2005) and the 1-norm below
// which degree 13 needs no scaling.
constexpr double kPade13[] = {64764752532480000.0,
                              32382376266240000.0,
                              7771770303897600.0,
                              1187353796428800.0,
                              129060195264000.0,
                              10559470521600.0,
                              670442572800.0,
                              33522128640.0,
                              1323241920.0,
                              40840800.0,
                              960960.0,
                              16380.0,
                              182.0,
                              1.0};
constexpr double kTheta13 = 5.371920351148152;

// sum_i c[i] * X_i over the terms given (all [B, n, n]).
Value combine(Builder& b, const std::vector<std::pair<double, Value>>& terms) {
  Value acc;
  for (const auto& [c, x] : terms) {
    Value t = b.mul(x, b.constant(c, b.elem(x), b.dims(x)));
    acc = acc.valid() ? b.add(acc, t) : t;
  }
  return acc;
}

// (U, V) of the degree-13 approximant at A [B, n, n].
std::pair<Value, Value> pade13(Builder& b, Value A) {
  const double* c = kPade13;
  Value I = eye(b, b.elem(A), b.dims(A));
  Value A2 = matmul(b, A, A), A4 = matmul(b, A2, A2), A6 = matmul(b, A4, A2);
  Value inner_u = matmul(b, A6, combine(b, {{c[13], A6}, {c[11], A4}, {c[9], A2}}));
  Value U = matmul(b, A, b.add(inner_u, combine(b, {{c[7], A6}, {c[5], A4}, {c[3], A2}, {c[1], I}})));
  Value inner_v = matmul(b, A6, combine(b, {{c[12], A6}, {c[10], A4}, {c[8], A2}}));
  Value V = b.add(inner_v, combine(b, {{c[6], A6}, {c[4], A4}, {c[2], A2}, {c[0], I}}));
  return {U, V};
}

// R squared s[i] times for each matrix i: R [B, n, n], s s32 [B].
Value square_per_matrix(Builder& b, Value R, Value s) {
  const Dims d = b.dims(R);
  const int64_t B = d[0];
  Value most = b.reduce(s, b.constant(0, ElemType::kS32), {0}, ir::BinaryOp::kMax);
  std::vector<Value> init{b.constant(0, ElemType::kS32), most, s, R};
  auto cond = b.loop_region(init);
  {
    Builder c(*cond);
    cond->set_outputs({c.compare(region_param(cond, 0), region_param(cond, 1), ir::Direction::kLt)});
  }
  auto body = b.loop_region(init);
  {
    Builder c(*body);
    Value k = region_param(body, 0), counts = region_param(body, 2), X = region_param(body, 3);
    Value more = c.compare(c.broadcast_to(k, {B}), counts, ir::Direction::kLt);
    Value sq = matmul(c, X, X);
    X = c.select(c.broadcast_in_dim(more, d, {0}), sq, X);
    body->set_outputs({c.add(k, c.constant(1, ElemType::kS32)), region_param(body, 1), counts, X});
  }
  return b.while_loop(init, cond, body)[3];
}

// exp(A) for A [B, n, n] of a float type.
Value expm(Builder& b, Value A) {
  const Dims d = b.dims(A);
  const ElemType t = b.elem(A);
  const double theta = kTheta13;
  // 1-norm: the largest column sum of |a|.
  Value norm = b.reduce(b.reduce(b.abs(A), b.constant(0, t), {1}, ir::BinaryOp::kAdd), b.constant(0, t), {1},
                        ir::BinaryOp::kMax);  // [B]
  // s = max(0, ceil(log2(norm / theta))); a zero or NaN norm gives 0 (the
  // comparison is false), an infinite one a bounded count (the result is
  // then NaN or inf, as on CPU).
  Value ratio = b.div(norm, b.constant(theta, t, {d[0]}));
  Value log2r = b.div(b.log(ratio), b.constant(std::log(2.0), t, {d[0]}));
  Value s = b.ceil(log2r);
  Value need = b.compare(ratio, b.constant(1, t, {d[0]}), ir::Direction::kGt);
  s = b.select(need, b.clamp(b.constant(0, t), s, b.constant(1024, t)), b.constant(0, t, {d[0]}));
  Value scale = b.pow(b.constant(2, t, {d[0]}), b.neg(s));
  Value As = b.mul(A, b.broadcast_in_dim(scale, d, {0}));
  auto [U, V] = pade13(b, As);
  LU f = lu_factor(b, b.sub(V, U));
  Value R = lu_solve(b, f.lu, f.perm, b.add(V, U), false);
  return square_per_matrix(b, R, b.convert(s, ElemType::kS32));
}

struct MatrixExp {
  static constexpr const char* kName = "linalg.matrix_exp";
  static OutMeta meta(const at::Tensor& A) {
    const char* fn = kName;
    check_matrix(A, fn);
    TORCH_CHECK(A.size(-1) == A.size(-2), fn, ": A must be batches of square matrices, but they are ", A.size(-2),
                " by ", A.size(-1), " matrices");
    const auto dt = A.scalar_type();
    TORCH_CHECK(c10::isFloatingType(dt) || c10::isComplexType(dt), fn,
                ": Expected a floating point or complex tensor as input. Got ", c10::toString(dt));
    TORCH_CHECK_NOT_IMPLEMENTED(!c10::isComplexType(dt), "\"linalg_matrix_exp_tpu\" not implemented for '",
                                c10::toString(dt), "'");
    return OutMeta{A.sizes().vec(), dt, A.device(), OutDtype::kOwn, false};
  }
  static void check_out(const at::Tensor& out, const OutMeta& m, const at::Tensor&) {
    TORCH_CHECK(out.scalar_type() == m.dtype, "Expected out tensor to have dtype ", m.dtype, ", but got ",
                out.scalar_type(), " instead");
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& A) {
    if (A.numel() == 0) return;
    const int64_t n = A.size(-1);
    const int64_t B = A.numel() / (n * n);
    const auto dt = m.dtype;
    const bool f64 = dt == c10::kDouble;
    record::OpCall call("linalg_matrix_exp");
    call.input(A);
    call.output(out);
    call.run([&](Builder& b, const Values& in) {
      const ElemType work = f64 ? ElemType::kF64 : ElemType::kF32;
      Value a = b.reshape(b.convert(in[0], work), {B, n, n});
      Value r = expm(b, a);
      return Values{b.convert(b.reshape(r, b.dims(in[0])), to_elem(dt))};
    });
  }
};

}  // namespace
}  // namespace torch_tpu::ops::linalg

namespace torch_tpu::ops {
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<linalg::MatrixExp>(m, {"linalg_matrix_exp", "", "linalg_matrix_exp.out"});
}
}  // namespace torch_tpu::ops
