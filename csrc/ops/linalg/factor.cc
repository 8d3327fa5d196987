// Dense factorizations and what is read off them: Cholesky
// (linalg_cholesky_ex, cholesky), LU with partial pivoting
// (linalg_lu_factor_ex, linalg_lu), and through LU inverse, solve,
// determinant and log-determinant. Also the IR building blocks of
// linalg/common.h. The *_ex ops compute `info` on the device; only the
// checked variants (and ATen's composites over them) synchronise to raise.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_linalg_check_errors.h>
#include <ATen/ops/_linalg_det.h>
#include <ATen/ops/_linalg_slogdet.h>
#include <ATen/ops/_linalg_solve_ex.h>
#include <ATen/ops/linalg_cholesky_ex.h>
#include <ATen/ops/linalg_inv_ex.h>
#include <ATen/ops/linalg_lu.h>
#include <ATen/ops/linalg_lu_factor_ex.h>
#include <torch/library.h>

#include "ops/linalg/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops::linalg {

using ir::Dims;
constexpr ElemType kI32 = ElemType::kS32;

// --- glue ----------------------------------------------------------------------

void check_matrix(const at::Tensor& A, const char* fn, const char* name) {
  TORCH_CHECK(A.dim() >= 2, fn, ": The input tensor ", name, " must have at least 2 dimensions.");
}

void check_square(const at::Tensor& A, const char* fn, const char* name) {
  check_matrix(A, fn, name);
  TORCH_CHECK(A.size(-1) == A.size(-2), fn, ": ", name, " must be batches of square matrices, but they are ",
              A.size(-2), " by ", A.size(-1), " matrices");
}

void check_floating(const at::Tensor& A, const char* fn, const char* kernel) {
  auto t = A.scalar_type();
  TORCH_CHECK(at::isFloatingType(t) || at::isComplexType(t), fn,
              ": Expected a floating point or complex tensor as input. Got ", t);
  TORCH_CHECK_NOT_IMPLEMENTED(t == c10::kFloat || t == c10::kDouble, "\"", kernel, "\" not implemented for '",
                              c10::toString(t), "'");
}

std::vector<int64_t> batch_of(const at::Tensor& t, int64_t matrix_dims) {
  auto s = t.sizes();
  return std::vector<int64_t>(s.begin(), s.end() - std::min<int64_t>(matrix_dims, t.dim()));
}

std::vector<int64_t> cat_shape(std::vector<int64_t> batch, std::initializer_list<int64_t> tail) {
  batch.insert(batch.end(), tail.begin(), tail.end());
  return batch;
}

// --- IR ------------------------------------------------------------------------

namespace {
Dims batch_dims(Builder& b, Value x, int keep = 2) {
  const Dims& d = b.dims(x);
  return Dims(d.begin(), d.end() - keep);
}
int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}
Value land(Builder& b, Value x, Value y) { return b.and_(x, y); }
Value lnot(Builder& b, Value x) { return b.not_(x); }
// Row idx[b] of x[b] for x [B, m, ...]: an exact gather (no arithmetic).
Value row_at(Builder& b, Value x, Value idx) {
  Dims d = b.dims(x);
  int64_t B = d[0];
  Value bi = b.iota({B, 1}, 0, kI32);
  Value ind = b.concatenate({bi, b.reshape(idx, {B, 1})}, 1);
  Dims slice = d, out{B}, offs;
  slice[0] = slice[1] = 1;
  for (size_t i = 2; i < d.size(); ++i) {
    out.push_back(d[i]);
    offs.push_back(static_cast<int64_t>(i) - 1);
  }
  return b.gather(x, ind, offs, {0, 1}, {0, 1}, 1, slice, out);
}
}  // namespace

Value mT(Builder& b, Value x) {
  int64_t r = b.type(x).rank();
  Dims perm;
  for (int64_t i = 0; i < r; ++i) perm.push_back(i);
  std::swap(perm[r - 1], perm[r - 2]);
  return b.transpose(x, perm);
}

Value matmul(Builder& b, Value x, Value y) {
  int64_t r = b.type(x).rank();
  Dims batch;
  for (int64_t i = 0; i + 2 < r; ++i) batch.push_back(i);
  return b.dot_general(x, y, batch, batch, {r - 1}, {r - 2}, b.elem(x), "HIGHEST");
}

Value tri_mask(Builder& b, const Dims& dims, bool lower, int64_t k) {
  int64_t r = dims.size();
  Value row = b.iota(dims, r - 2, ElemType::kS64), col = b.iota(dims, r - 1, ElemType::kS64);
  Value diff = b.sub(col, row);
  return b.compare(diff, b.constant(k, ElemType::kS64, dims), lower ? Direction::kLe : Direction::kGe);
}

Value keep_triangle(Builder& b, Value x, bool lower, int64_t k) {
  const Dims& d = b.dims(x);
  return b.select(tri_mask(b, d, lower, k), x, zero(b, b.elem(x), d));
}

Value eye(Builder& b, ElemType t, const Dims& dims) {
  int64_t r = dims.size();
  Value eq = b.compare(b.iota(dims, r - 2, kI32), b.iota(dims, r - 1, kI32), Direction::kEq);
  return b.select(eq, one(b, t, dims), zero(b, t, dims));
}

Value diagonal(Builder& b, Value x) {
  Dims d = b.dims(x);
  int64_t r = d.size(), k = std::min(d[r - 2], d[r - 1]);
  Dims start(r, 0), limit = d, strides(r, 1);
  limit[r - 2] = limit[r - 1] = k;
  Value sq = b.slice(x, start, limit, strides);
  Dims sd = b.dims(sq);
  Value eq = b.compare(b.iota(sd, r - 2, kI32), b.iota(sd, r - 1, kI32), Direction::kEq);
  // One non-zero term per row: the sum is exact.
  return b.reduce(b.select(eq, sq, zero(b, b.elem(x), sd)), zero(b, b.elem(x)), {r - 1}, BinaryOp::kAdd);
}

Value trisolve(Builder& b, Value A, Value B, bool left, bool lower, bool unit, bool transpose) {
  const Dims& d = b.dims(A);
  Value a = keep_triangle(b, A, lower);
  if (unit) {
    int64_t r = d.size();
    Value eq = b.compare(b.iota(d, r - 2, kI32), b.iota(d, r - 1, kI32), Direction::kEq);
    a = b.select(eq, one(b, b.elem(A), d), a);
  }
  return b.triangular_solve(a, B, left, lower, unit, transpose ? "TRANSPOSE" : "NO_TRANSPOSE");
}

Value expand_batch(Builder& b, Value x, const Dims& batch, int keep) {
  Dims d = b.dims(x);
  Dims target = batch;
  target.insert(target.end(), d.end() - keep, d.end());
  if (d == target) return x;
  return b.broadcast_to(x, target);
}

LU lu_factor(Builder& b, Value a) {
  Dims d = b.dims(a);
  int64_t r = d.size(), m = d[r - 2], n = d[r - 1], K = std::min(m, n);
  Dims batch(d.begin(), d.end() - 2);
  int64_t B = numel(batch);
  ElemType t = b.elem(a);
  Value A = b.reshape(a, {B, m, n});
  Value perm = b.iota({B, m}, 1, kI32);
  Value piv = b.constant(0, kI32, {B, K});
  Value info = b.constant(0, kI32, {B});
  if (K > 0 && B > 0) {
    std::vector<Value> init{b.constant(0, kI32), A, perm, piv, info};
    auto cond = b.loop_region(init);
    {
      Builder c(*cond);
      cond->set_outputs({c.compare(region_param(cond, 0), c.constant(K, kI32), Direction::kLt)});
    }
    auto body = b.loop_region(init);
    {
      Builder c(*body);
      Value k = region_param(body, 0), X = region_param(body, 1), pm = region_param(body, 2),
            pv = region_param(body, 3), inf = region_param(body, 4);
      Dims d3{B, m, n}, d2{B, m}, d1{B};
      Value zi = c.constant(0, kI32);
      Value rows2 = c.iota(d2, 1, kI32), rows3 = c.iota(d3, 1, kI32), cols3 = c.iota(d3, 2, kI32);
      Value k1 = c.broadcast_to(k, d1), k2 = c.broadcast_to(k, d2), k3 = c.broadcast_to(k, d3);
      // Pivot row: first maximum of |a| at or below the diagonal.
      Value col = c.reshape(c.dynamic_slice(X, {zi, zi, k}, {B, m, 1}), d2);
      Value active = c.compare(rows2, k2, Direction::kGe);
      Value mag = c.select(active, c.abs(col), c.constant(-1, t, d2));
      Value mx = c.reduce(mag, lowest(c, t), {1}, BinaryOp::kMax);
      Value hit = land(c, active, c.compare(mag, c.broadcast_in_dim(mx, d2, {0}), Direction::kEq));
      Value p = c.reduce(c.select(hit, rows2, c.constant(m, kI32, d2)), c.constant(m, kI32), {1}, BinaryOp::kMin);
      p = c.select(c.compare(p, c.constant(m, kI32, d1), Direction::kGe), k1, p);  // NaN column: keep the row
      // Swap rows k and p of the matrix and of the permutation.
      Value rowk = c.reshape(c.dynamic_slice(X, {zi, k, zi}, {B, 1, n}), {B, n});
      Value rowp = row_at(c, X, p);
      Value isk3 = c.compare(rows3, k3, Direction::kEq),
            isp3 = c.compare(rows3, c.broadcast_in_dim(p, d3, {0}), Direction::kEq);
      Value rowp3 = c.broadcast_in_dim(rowp, d3, {0, 2});
      X = c.select(isk3, rowp3, c.select(isp3, c.broadcast_in_dim(rowk, d3, {0, 2}), X));
      Value permk = c.reshape(c.dynamic_slice(pm, {zi, k}, {B, 1}), d1);
      Value permp = row_at(c, pm, p);
      Value isk2 = c.compare(rows2, k2, Direction::kEq),
            isp2 = c.compare(rows2, c.broadcast_in_dim(p, d2, {0}), Direction::kEq);
      pm = c.select(isk2, c.broadcast_in_dim(permp, d2, {0}), c.select(isp2, c.broadcast_in_dim(permk, d2, {0}), pm));
      pv = c.dynamic_update_slice(pv, c.reshape(c.add(p, c.constant(1, kI32, d1)), {B, 1}), {zi, k});
      // Eliminate below the pivot unless it is zero (LAPACK then records info).
      Value pivot = c.reshape(c.dynamic_slice(rowp, {zi, k}, {B, 1}), d1);
      Value nz = c.compare(pivot, zero(c, t, d1), Direction::kNe);
      Value k_plus_1 = c.add(k1, c.constant(1, kI32, d1));
      inf = c.select(land(c, c.compare(inf, c.constant(0, kI32, d1), Direction::kEq), lnot(c, nz)), k_plus_1, inf);
      Value colk = c.reshape(c.dynamic_slice(X, {zi, zi, k}, {B, m, 1}), d2);
      // Scale by the reciprocal unless it would overflow (as getrf2 does).
      Value tiny =
          c.compare(c.abs(pivot), c.constant(t == ElemType::kF64 ? 2.2250738585072014e-308 : 1.17549435e-38, t, d1),
                    Direction::kGe);
      Value pivot2 = c.broadcast_in_dim(pivot, d2, {0});
      Value recip2 = c.broadcast_in_dim(c.div(one(c, t, d1), pivot), d2, {0});
      Value l = c.select(c.broadcast_in_dim(tiny, d2, {0}), c.mul(colk, recip2), c.div(colk, pivot2));
      Value l3 = c.broadcast_in_dim(l, d3, {0, 1});
      Value below = land(c, c.compare(rows3, k3, Direction::kGt), c.broadcast_in_dim(nz, d3, {0}));
      Value right = c.compare(cols3, k3, Direction::kGt);
      Value upd = c.sub(X, c.mul(l3, rowp3));
      X = c.select(land(c, below, right), upd, X);
      X = c.select(land(c, below, c.compare(cols3, k3, Direction::kEq)), l3, X);
      body->set_outputs({c.add(k, c.constant(1, kI32)), X, pm, pv, inf});
    }
    auto outs = b.while_loop(init, cond, body);
    A = outs[1];
    perm = outs[2];
    piv = outs[3];
    info = outs[4];
  }
  auto with = [&](std::initializer_list<int64_t> tail) {
    Dims s = batch;
    s.insert(s.end(), tail.begin(), tail.end());
    return s;
  };
  return LU{b.reshape(A, d), b.reshape(perm, with({m})), b.reshape(piv, with({K})), b.reshape(info, batch)};
}

Value pivots_to_perm(Builder& b, Value piv, int64_t m) {
  Dims pd = b.dims(piv);
  int64_t K = pd.back();
  Dims batch(pd.begin(), pd.end() - 1);
  int64_t B = numel(batch);
  Value perm = b.iota({B, m}, 1, kI32);
  if (K > 0 && B > 0 && m > 0) {
    Value pv = b.reshape(piv, {B, K});
    std::vector<Value> init{b.constant(0, kI32), perm, pv};
    auto cond = b.loop_region(init);
    {
      Builder c(*cond);
      cond->set_outputs({c.compare(region_param(cond, 0), c.constant(K, kI32), Direction::kLt)});
    }
    auto body = b.loop_region(init);
    {
      Builder c(*body);
      Value k = region_param(body, 0), pm = region_param(body, 1), pvs = region_param(body, 2);
      Dims d1{B}, d2{B, m};
      Value zi = c.constant(0, kI32);
      // Out-of-range pivots are clamped (the gather clamps too): no host check.
      Value p = c.sub(c.reshape(c.dynamic_slice(pvs, {zi, k}, {B, 1}), d1), c.constant(1, kI32, d1));
      p = c.clamp(c.constant(0, kI32), p, c.constant(m - 1, kI32));
      Value rows2 = c.iota(d2, 1, kI32);
      Value permk = c.reshape(c.dynamic_slice(pm, {zi, k}, {B, 1}), d1);
      Value permp = row_at(c, pm, p);
      Value isk = c.compare(rows2, c.broadcast_to(k, d2), Direction::kEq);
      Value isp = c.compare(rows2, c.broadcast_in_dim(p, d2, {0}), Direction::kEq);
      pm = c.select(isk, c.broadcast_in_dim(permp, d2, {0}), c.select(isp, c.broadcast_in_dim(permk, d2, {0}), pm));
      body->set_outputs({c.add(k, c.constant(1, kI32)), pm, pvs});
    }
    perm = b.while_loop(init, cond, body)[1];
  }
  Dims out = batch;
  out.push_back(m);
  return b.reshape(perm, out);
}

Value permute_rows(Builder& b, Value x, Value perm) {
  Dims d = b.dims(x);
  int64_t r = d.size(), m = d[r - 2], n = d[r - 1];
  int64_t B = numel(Dims(d.begin(), d.end() - 2));
  Value X = b.reshape(x, {B, m, n});
  Value P = b.reshape(perm, {B, m, 1});
  Value bi = b.iota({B, m, 1}, 0, kI32);
  Value ind = b.concatenate({bi, P}, 2);
  Value g = b.gather(X, ind, {2}, {0, 1}, {0, 1}, 2, {1, 1, n}, {B, m, n});
  return b.reshape(g, d);
}

Value inverse_perm(Builder& b, Value perm) {
  Dims d = b.dims(perm);
  int64_t r = d.size();
  return b.sort({perm, b.iota(d, r - 1, kI32)}, r - 1, false)[1];
}

Value perm_matrix(Builder& b, Value perm, ElemType t) {
  Dims d = b.dims(perm);
  int64_t r = d.size(), m = d.back();
  Dims pd = d;
  pd.push_back(m);
  Dims map;
  for (int64_t i = 0; i < r - 1; ++i) map.push_back(i);
  map.push_back(r);  // perm[c] varies along the columns
  Value pc = b.broadcast_in_dim(perm, pd, map);
  Value eq = b.compare(pc, b.iota(pd, r - 1, kI32), Direction::kEq);
  return b.select(eq, one(b, t, pd), zero(b, t, pd));
}

Value lu_solve(Builder& b, Value lu, Value perm, Value B, bool adjoint) {
  if (!adjoint) {
    Value y = permute_rows(b, B, perm);
    y = trisolve(b, lu, y, true, true, true, false);
    return trisolve(b, lu, y, true, false, false, false);
  }
  // A = P^T L U, so A^T X = B is U^T L^T (P X) = B.
  Value y = trisolve(b, lu, B, true, false, false, true);
  y = trisolve(b, lu, y, true, true, true, true);
  return permute_rows(b, y, inverse_perm(b, perm));
}

Value pivots_sign(Builder& b, Value piv, ElemType t) {
  Dims d = b.dims(piv);
  int64_t r = d.size();
  Value moved = b.compare(piv, b.add(b.iota(d, r - 1, kI32), b.constant(1, kI32, d)), Direction::kNe);
  Value count = b.reduce(b.convert(moved, kI32), b.constant(0, kI32), {r - 1}, BinaryOp::kAdd);
  Dims bd = b.dims(count);
  Value odd = b.compare(b.rem(count, b.constant(2, kI32, bd)), b.constant(0, kI32, bd), Direction::kNe);
  return b.select(odd, b.constant(-1, t, bd), one(b, t, bd));
}

// --- kernels -------------------------------------------------------------------

namespace {

// Right-looking Cholesky of symmetric [..., n, n] as one stablehlo.while
// over the columns. stablehlo.cholesky cannot be used: XLA turns the whole
// result into NaN on failure, so LAPACK's info (the order of the first
// leading minor that is not positive-definite) could not be recovered.
// A non-positive (or NaN) pivot stops the elimination there and sets info.
std::pair<Value, Value> cholesky_factor(Builder& b, Value a) {
  Dims d = b.dims(a);
  int64_t r = d.size(), n = d[r - 1];
  Dims batch(d.begin(), d.end() - 2);
  int64_t B = numel(batch);
  ElemType t = b.elem(a);
  Value X = b.reshape(a, {B, n, n});
  Value info = b.constant(0, kI32, {B});
  std::vector<Value> init{b.constant(0, kI32), X, info};
  auto cond = b.loop_region(init);
  {
    Builder c(*cond);
    cond->set_outputs({c.compare(region_param(cond, 0), c.constant(n, kI32), Direction::kLt)});
  }
  auto body = b.loop_region(init);
  {
    Builder c(*body);
    Value k = region_param(body, 0), A = region_param(body, 1), inf = region_param(body, 2);
    Dims d3{B, n, n}, d2{B, n}, d1{B};
    Value zi = c.constant(0, kI32);
    Value rows2 = c.iota(d2, 1, kI32), rows3 = c.iota(d3, 1, kI32), cols3 = c.iota(d3, 2, kI32);
    Value k2 = c.broadcast_to(k, d2), k3 = c.broadcast_to(k, d3);
    Value col = c.reshape(c.dynamic_slice(A, {zi, zi, k}, {B, n, 1}), d2);
    Value pivot = c.reshape(c.dynamic_slice(col, {zi, k}, {B, 1}), d1);
    Value good = c.compare(pivot, zero(c, t, d1), Direction::kGt);
    Value clean = c.compare(inf, c.constant(0, kI32, d1), Direction::kEq);
    Value ok = land(c, good, clean);
    inf = c.select(land(c, clean, lnot(c, good)), c.add(c.broadcast_to(k, d1), c.constant(1, kI32, d1)), inf);
    Value s = c.sqrt(pivot);
    // LAPACK scales the column by the reciprocal of the pivot's root.
    Value l = c.mul(col, c.broadcast_in_dim(c.div(one(c, t, d1), s), d2, {0}));
    l = c.select(c.compare(rows2, k2, Direction::kEq), c.broadcast_in_dim(s, d2, {0}), l);
    Value li = c.broadcast_in_dim(l, d3, {0, 1}), lj = c.broadcast_in_dim(l, d3, {0, 2});
    Value ok3 = c.broadcast_in_dim(ok, d3, {0});
    Value trailing = land(c, land(c, c.compare(rows3, k3, Direction::kGt), c.compare(cols3, k3, Direction::kGt)), ok3);
    A = c.select(trailing, c.sub(A, c.mul(li, lj)), A);
    A = c.select(land(c, land(c, c.compare(cols3, k3, Direction::kEq), c.compare(rows3, k3, Direction::kGe)), ok3), li,
                 A);
    body->set_outputs({c.add(k, c.constant(1, kI32)), A, inf});
  }
  auto outs = b.while_loop(init, cond, body);
  return {keep_triangle(b, b.reshape(outs[1], d), true), b.reshape(outs[2], batch)};
}

}  // namespace

namespace {

// Cholesky of the triangle named by `upper`; info = first non-positive pivot.
void cholesky_into(const at::Tensor& A, bool upper, const at::Tensor& L, const at::Tensor& info) {
  if (A.numel() == 0) {
    if (info.numel()) info.zero_();
    return;
  }
  record::OpCall call("linalg_cholesky");
  call.attr(upper);
  call.input(A);
  call.output(L);
  call.output(info);
  call.run([&](Builder& b, const Values& in) {
    Value a = in[0];
    Dims d = b.dims(a);
    // Read one triangle only, as LAPACK does.
    Value sym = b.select(tri_mask(b, d, !upper), a, mT(b, a));
    auto [l, inf] = cholesky_factor(b, sym);
    return Values{upper ? mT(b, l) : l, inf};
  });
}

// Each op below is declared once for its functional and out= forms
// (ops/variants.h). Shapes, dtypes and layouts come from ATen's meta
// kernels after tpu's own checks (the dtypes the lowerings support, with
// CPU's messages), so results are column-major where CPU's are, and out=
// must have exactly each result's dtype.
struct CholeskyEx {
  static constexpr const char* kName = "linalg_cholesky_ex";
  static ResultsMeta<2> meta(const at::Tensor& A, bool upper, bool) {
    check_square(A, "linalg.cholesky");
    check_floating(A, "linalg.cholesky", "cholesky_tpu");
    return results_like(at::linalg_cholesky_ex(meta_of(A), upper, false), A.device());
  }
  static void impl(const at::Tensor& L, const at::Tensor& info, const ResultsMeta<2>&, const at::Tensor& A, bool upper,
                   bool check_errors) {
    cholesky_into(A, upper, L, info);
    if (check_errors) at::_linalg_check_errors(info, "linalg.cholesky_ex", A.dim() == 2);
  }
};

// The deprecated torch.cholesky: an error, not an info code, where A is
// not positive definite.
struct Cholesky {
  static constexpr const char* kName = "cholesky";
  static OutMeta meta(const at::Tensor& A, bool) {
    check_square(A, "cholesky");
    check_floating(A, "cholesky", "cholesky_tpu");
    OutMeta m{A.sizes().vec(), A.scalar_type(), A.device(), OutDtype::kExact};
    m.operand_layout = false;
    return m;
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& A, bool upper) {
    at::Tensor info = empty_tpu(batch_of(A), c10::kInt, A.device());
    cholesky_into(A, upper, out, info);
    at::_linalg_check_errors(info, "cholesky", A.dim() == 2);
  }
};

// LU of `A` (or of A^T when `transposed`) into LU/pivots/info; any may be undefined.
void lu_into(const at::Tensor& A, bool transposed, const at::Tensor& LUt, const at::Tensor& piv,
             const at::Tensor& info) {
  record::OpCall call("linalg_lu_factor");
  call.attr(transposed);
  call.input(A);
  call.output(LUt);
  call.output(piv);
  call.output(info);
  call.run([&](Builder& b, const Values& in) {
    LU f = lu_factor(b, transposed ? mT(b, in[0]) : in[0]);
    return Values{f.lu, f.piv, f.info};
  });
}

void check_lu_input(const at::Tensor& A, bool pivot, const char* fn) {
  TORCH_CHECK(A.dim() >= 2, fn, ": Expected tensor with 2 or more dimensions. Got size: ", A.sizes(), " instead");
  TORCH_CHECK(pivot, "linalg.lu_factor: LU without pivoting is not implemented on the TPU");
  TORCH_CHECK_NOT_IMPLEMENTED(A.scalar_type() == c10::kFloat || A.scalar_type() == c10::kDouble,
                              "\"lu_tpu\" not implemented for '", c10::toString(A.scalar_type()), "'");
}

struct LuFactorEx {
  static constexpr const char* kName = "linalg_lu_factor_ex";
  static ResultsMeta<3> meta(const at::Tensor& A, bool pivot, bool) {
    check_lu_input(A, pivot, "torch.lu_factor");
    return results_like(at::linalg_lu_factor_ex(meta_of(A), pivot, false), A.device());
  }
  static void impl(const at::Tensor& LUt, const at::Tensor& piv, const at::Tensor& info, const ResultsMeta<3>&,
                   const at::Tensor& A, bool, bool check_errors) {
    if (A.numel() == 0) {
      if (info.numel()) info.zero_();
      return;
    }
    lu_into(A, false, LUt, piv, info);
    if (check_errors) at::_linalg_check_errors(info, "torch.linalg.lu_factor_ex", A.dim() == 2);
  }
};

struct Lu {
  static constexpr const char* kName = "linalg_lu";
  static ResultsMeta<3> meta(const at::Tensor& A, bool pivot) {
    check_lu_input(A, pivot, "linalg.lu");
    return results_like(at::linalg_lu(meta_of(A), pivot), A.device());
  }
  static void impl(const at::Tensor& P, const at::Tensor& L, const at::Tensor& U, const ResultsMeta<3>&,
                   const at::Tensor& A, bool) {
    int64_t m = A.size(-2), n = A.size(-1), k = std::min(m, n);
    if (A.numel() == 0) {
      if (P.numel()) P.copy_(at::eye(m, A.options().device(c10::kCPU)).expand(P.sizes()));
      if (L.numel()) L.zero_();
      if (U.numel()) U.zero_();
      return;
    }
    record::OpCall call("linalg_lu");
    call.input(A);
    call.output(P);
    call.output(L);
    call.output(U);
    call.run([&](Builder& b, const Values& in) {
      LU f = lu_factor(b, in[0]);
      Dims d = b.dims(in[0]);
      int64_t r = d.size();
      ElemType t = b.elem(in[0]);
      Dims start(r, 0), strides(r, 1), lim_l = d, lim_u = d;
      lim_l[r - 1] = k;
      lim_u[r - 2] = k;
      Value l = b.slice(f.lu, start, lim_l, strides);
      Dims ld = b.dims(l);
      l = b.select(tri_mask(b, ld, true, -1), l, eye(b, t, ld));
      Value u = keep_triangle(b, b.slice(f.lu, start, lim_u, strides), false);
      return Values{b.convert(perm_matrix(b, f.perm, t), t), l, u};
    });
  }
};

// CPU's det/slogdet factor A^T when A is contiguous (det(A^T) = det(A)); the
// backward formulas assume the same, so LU/pivots must follow that choice.
// (solve_ex's LU output is always the factorization of A.)
bool use_transpose(const at::Tensor& A) { return A.is_contiguous(); }

// Batch-broadcast shape of two operands' leading dims.
std::vector<int64_t> broadcast_batch(const at::Tensor& x, const at::Tensor& y) {
  return at::infer_size(batch_of(x), batch_of(y));
}

// B is a vector (or a batch of them) rather than a matrix.
bool solve_vector_case(const at::Tensor& A, const at::Tensor& B) {
  return B.dim() == 1 || (A.dim() - 1 == B.dim() && B.sizes().equals(A.sizes().slice(0, A.dim() - 1)));
}

struct SolveEx {
  static constexpr const char* kName = "_linalg_solve_ex";
  static ResultsMeta<4> meta(const at::Tensor& A, const at::Tensor& B, bool left, bool) {
    check_square(A, "linalg.solve");
    check_floating(A, "linalg.solve", "linalg_solve_tpu");
    TORCH_CHECK(A.scalar_type() == B.scalar_type(),
                "linalg.solve: Expected A and B to have the same dtype, but found A of type ", A.scalar_type(),
                " and B of type ", B.scalar_type(), " instead");
    bool vector_case = solve_vector_case(A, B);
    at::Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
    int64_t n = A.size(-1);
    if (left) {
      TORCH_CHECK(B_.size(-2) == n, "linalg.solve: Incompatible shapes of A and B for the equation AX = B (",
                  A.size(-2), "x", n, " and ", B_.size(-2), "x", B_.size(-1), ")");
    } else {
      TORCH_CHECK(B_.size(-1) == n, "linalg.solve: Incompatible shapes of A and B for the equation XA = B (",
                  A.size(-2), "x", n, " and ", B_.size(-2), "x", B_.size(-1), ")");
    }
    return results_like(at::_linalg_solve_ex(meta_of(A), meta_of(B), left, false), A.device());
  }
  static void impl(const at::Tensor& result, const at::Tensor& LUt, const at::Tensor& piv, const at::Tensor& info,
                   const ResultsMeta<4>&, const at::Tensor& A, const at::Tensor& B, bool left, bool check_errors) {
    bool vector_case = solve_vector_case(A, B);
    at::Tensor B_ = vector_case ? B.unsqueeze(-1) : B;
    auto batch = broadcast_batch(A, B_);
    if (A.numel() == 0 || B_.numel() == 0) {
      if (info.numel()) info.zero_();
      if (result.numel()) result.zero_();
      if (A.numel()) lu_into(A, false, LUt, piv, info);
      if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
      return;
    }
    bool tr = false;
    record::OpCall call("linalg_solve_ex");
    call.attr(left).attr(tr).attr(vector_case).attr(c10::IntArrayRef(batch));
    call.input(A);
    call.input(B);
    call.output(result);
    call.output(LUt);
    call.output(piv);
    call.output(info);
    call.run([&](Builder& b, const Values& in) {
      LU f = lu_factor(b, tr ? mT(b, in[0]) : in[0]);
      Value rhs = in[1];
      if (vector_case) {
        Dims d = b.dims(rhs);
        d.push_back(1);
        rhs = b.reshape(rhs, d);
      }
      rhs = expand_batch(b, rhs, batch, 2);
      Value lu = expand_batch(b, f.lu, batch, 2), perm = expand_batch(b, f.perm, batch, 1);
      Value x = left ? lu_solve(b, lu, perm, rhs, tr) : mT(b, lu_solve(b, lu, perm, mT(b, rhs), !tr));
      if (vector_case) {
        Dims d = b.dims(x);
        d.pop_back();
        x = b.reshape(x, d);
      }
      return Values{x, f.lu, f.piv, f.info};
    });
    if (check_errors) at::_linalg_check_errors(info, "torch.linalg.solve_ex", A.dim() == 2);
  }
};

struct InvEx {
  static constexpr const char* kName = "linalg_inv_ex";
  static ResultsMeta<2> meta(const at::Tensor& A, bool) {
    check_square(A, "linalg.inv");
    auto t = A.scalar_type();
    TORCH_CHECK(!(t == c10::kBFloat16 || t == c10::kHalf), "linalg.inv: Low precision dtypes not supported. Got ", t);
    check_floating(A, "linalg.inv", "linalg_inv_tpu");
    return results_like(at::linalg_inv_ex(meta_of(A), false), A.device());
  }
  static void impl(const at::Tensor& inverse, const at::Tensor& info, const ResultsMeta<2>&, const at::Tensor& A,
                   bool check_errors) {
    if (A.numel() == 0) {
      if (info.numel()) info.zero_();
    } else {
      bool tr = false;
      record::OpCall call("linalg_inv_ex");
      call.attr(tr);
      call.input(A);
      call.output(inverse);
      call.output(info);
      call.run([&](Builder& b, const Values& in) {
        LU f = lu_factor(b, tr ? mT(b, in[0]) : in[0]);
        Value x = lu_solve(b, f.lu, f.perm, eye(b, b.elem(in[0]), b.dims(in[0])), tr);
        return Values{x, f.info};
      });
    }
    if (check_errors) at::_linalg_check_errors(info, "linalg.inv_ex", A.dim() == 2);
  }
};

// det and slogdet read the diagonal of U and the pivots' parity.
// det and slogdet: the LU of A (of A^T where CPU factors that), then
// `finish` reads the results off U's diagonal and the pivots' sign; the LU
// and pivots are results too.
using DetFinish = Values (*)(Builder& b, Value diag, Value pivot_sign);
void record_det(const char* name, const at::Tensor& A, std::initializer_list<at::Tensor> outs, DetFinish finish) {
  bool tr = use_transpose(A);
  record::OpCall call(name);
  call.attr(tr);
  call.input(A);
  for (const at::Tensor& o : outs) call.output(o);
  call.run([&](Builder& b, const Values& in) {
    LU f = lu_factor(b, tr ? mT(b, in[0]) : in[0]);
    Values r = finish(b, diagonal(b, f.lu), pivots_sign(b, f.piv, b.elem(in[0])));
    r.push_back(f.lu);
    r.push_back(f.piv);
    return r;
  });
}

struct Det {
  static constexpr const char* kName = "_linalg_det";
  static ResultsMeta<3> meta(const at::Tensor& A) {
    check_square(A, "linalg.det");
    check_floating(A, "linalg.det", "lu_tpu");
    return results_like(at::_linalg_det(meta_of(A)), A.device());
  }
  static void impl(const at::Tensor& result, const at::Tensor& LUt, const at::Tensor& piv, const ResultsMeta<3>&,
                   const at::Tensor& A) {
    if (result.numel() == 0) return;
    record_det("linalg_det", A, {result, LUt, piv}, [](Builder& b, Value d, Value psign) {
      int64_t r = b.dims(d).size();
      return Values{b.mul(psign, b.reduce(d, one(b, b.elem(d)), {r - 1}, BinaryOp::kMul))};
    });
  }
};

struct Slogdet {
  static constexpr const char* kName = "_linalg_slogdet";
  static ResultsMeta<4> meta(const at::Tensor& A) {
    check_square(A, "linalg.slogdet");
    check_floating(A, "linalg.slogdet", "lu_tpu");
    return results_like(at::_linalg_slogdet(meta_of(A)), A.device());
  }
  static void impl(const at::Tensor& sign, const at::Tensor& logabsdet, const at::Tensor& LUt, const at::Tensor& piv,
                   const ResultsMeta<4>&, const at::Tensor& A) {
    if (sign.numel() == 0) return;
    record_det("linalg_slogdet", A, {sign, logabsdet, LUt, piv}, [](Builder& b, Value d, Value psign) {
      ElemType t = b.elem(d);
      int64_t r = b.dims(d).size();
      Value sgn = b.reduce(b.sign(d), one(b, t), {r - 1}, BinaryOp::kMul);
      Value logabs = b.reduce(b.log(b.abs(d)), zero(b, t), {r - 1}, BinaryOp::kAdd);
      return Values{b.mul(psign, sgn), logabs};
    });
  }
};

}  // namespace
}  // namespace torch_tpu::ops::linalg

namespace torch_tpu::ops {
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<linalg::CholeskyEx>(m, {"linalg_cholesky_ex", "", "linalg_cholesky_ex.L"});
  register_variants<linalg::Cholesky>(m, {"cholesky", "", "cholesky.out"});
  register_variants<linalg::LuFactorEx>(m, {"linalg_lu_factor_ex", "", "linalg_lu_factor_ex.out"});
  register_variants<linalg::Lu>(m, {"linalg_lu", "", "linalg_lu.out"});
  register_variants<linalg::SolveEx>(m, {"_linalg_solve_ex", "", "_linalg_solve_ex.result"});
  register_variants<linalg::InvEx>(m, {"linalg_inv_ex", "", "linalg_inv_ex.inverse"});
  register_variants<linalg::Det>(m, {"_linalg_det", "", "_linalg_det.result"});
  register_variants<linalg::Slogdet>(m, {"_linalg_slogdet", "", "_linalg_slogdet.sign"});
}
}  // namespace torch_tpu::ops
