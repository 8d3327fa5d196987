// Dense decompositions: QR (geqrf, householder_product, linalg_qr, ormqr),
// the symmetric eigensolver (_linalg_eigh) and SVD (_linalg_svd), plus
// linalg_lstsq on top of the SVD.
//
// XLA expands two families of custom calls itself: "Qr" (blocked Householder
// QR returning LAPACK's geqrf form, with LAPACK's sign choice
// beta = -sign(alpha) * norm) with "ProductOfElementaryHouseholderReflectors"
// (orgqr), and "Eigh" (cyclic Jacobi). Everything else is built from those.
// The SVD is the eigendecomposition of the symmetric [[0, A], [A^T, 0]],
// whose eigenvalues are +-sigma with eigenvectors [u; v] / sqrt(2): unlike
// eigh(A^T A) it does not square the condition number.
#include <ATen/ExpandUtils.h>
#include <ATen/ops/_linalg_eigh.h>
#include <ATen/ops/_linalg_svd.h>
#include <ATen/ops/geqrf.h>
#include <ATen/ops/linalg_qr.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/variants.h"
#include "record/driver.h"

namespace torch_tpu::ops {

// Whether residuals exist depends on the computed ranks.
const record::SyncSite kLstsqSync{"linalg_lstsq", record::SyncReason::kHostRead};
using ir::Dims;
using ir::TensorType;

namespace {

Dims dims_of(c10::IntArrayRef s) { return Dims(s.begin(), s.end()); }

Dims batch_of(const Dims& d) { return Dims(d.begin(), d.end() - 2); }

Dims cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

int64_t numel(const Dims& d) {
  int64_t n = 1;
  for (int64_t v : d) n *= v;
  return n;
}

// Pred mask over the last two dims: col - row >= k (upper) or <= k (lower).
Value tri_mask(Builder& b, const Dims& dims, int64_t k, bool upper) {
  int64_t r = static_cast<int64_t>(dims.size());
  Value row = b.iota(dims, r - 2, ElemType::kS64), col = b.iota(dims, r - 1, ElemType::kS64);
  Value diff = b.sub(col, row);
  return b.compare(diff, b.constant(static_cast<double>(k), ElemType::kS64, dims),
                   upper ? Direction::kGe : Direction::kLe);
}

Value triu(Builder& b, Value x, int64_t k = 0) {
  return b.select(tri_mask(b, b.dims(x), k, true), x, zero(b, b.elem(x), b.dims(x)));
}

// Identity-like [..., r, c] (ones on the main diagonal).
Value eye(Builder& b, ElemType t, const Dims& dims) {
  int64_t r = static_cast<int64_t>(dims.size());
  Value eq = b.compare(b.iota(dims, r - 2, ElemType::kS64), b.iota(dims, r - 1, ElemType::kS64), Direction::kEq);
  return b.select(eq, one(b, t, dims), zero(b, t, dims));
}

// x[..., r0:r1, c0:c1]
Value block(Builder& b, Value x, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  Dims d = b.dims(x);
  size_t r = d.size();
  Dims start(r, 0), lim = d, st(r, 1);
  start[r - 2] = r0;
  lim[r - 2] = r1;
  start[r - 1] = c0;
  lim[r - 1] = c1;
  return b.slice(x, start, lim, st);
}

// Zero-pads the last two dims of x up to (rows, cols).
Value pad_to(Builder& b, Value x, int64_t rows, int64_t cols) {
  Dims d = b.dims(x);
  size_t r = d.size();
  Dims lo(r, 0), hi(r, 0), in(r, 0);
  hi[r - 2] = rows - d[r - 2];
  hi[r - 1] = cols - d[r - 1];
  return b.pad(x, zero(b, b.elem(x)), lo, hi, in);
}

// Batched x @ y with optional transposes of the last two dims.
Value matmul(Builder& b, Value x, Value y, bool tx, bool ty, c10::ScalarType st) {
  int64_t nb = static_cast<int64_t>(b.dims(x).size()) - 2;
  Dims batch;
  for (int64_t i = 0; i < nb; ++i) batch.push_back(i);
  return b.dot_general(x, y, batch, batch, {tx ? nb : nb + 1}, {ty ? nb + 1 : nb}, b.elem(x), precision_for(st));
}

Value mT(Builder& b, Value x) {
  Dims perm;
  int64_t r = static_cast<int64_t>(b.dims(x).size());
  for (int64_t i = 0; i < r - 2; ++i) perm.push_back(i);
  perm.push_back(r - 1);
  perm.push_back(r - 2);
  return b.transpose(x, perm);
}

// ---- IR building blocks -------------------------------------------------

// geqrf: {a (reflectors below the diagonal, R on and above), tau}.
Values geqrf_ir(Builder& b, Value a) {
  Dims d = b.dims(a);
  int64_t m = d[d.size() - 2], n = d.back(), k = std::min(m, n);
  TensorType tau_t{b.elem(a), cat(batch_of(d), {k})};
  if (numel(d) == 0) return Values{a, zero(b, b.elem(a), tau_t.dims)};
  return b.custom_call("Qr", {a}, {b.type(a), tau_t});
}

// orgqr: the first n columns of H_1 ... H_k for a [..., m, n] (m >= n) and
// tau [..., k] (k <= n).
Value householder_ir(Builder& b, Value a, Value tau) {
  Dims d = b.dims(a);
  if (numel(d) == 0 || b.dims(tau).back() == 0) return eye(b, b.elem(a), d);
  return b.custom_call("ProductOfElementaryHouseholderReflectors", {a, tau}, {b.type(a)})[0];
}

// The full [..., mm, mm] orthogonal factor from reflectors a [..., mm, c].
Value full_q_ir(Builder& b, Value a, Value tau) {
  Dims d = b.dims(a);
  int64_t mm = d[d.size() - 2], c = d.back();
  Value sq = c >= mm ? block(b, a, 0, mm, 0, mm) : pad_to(b, a, mm, mm);
  return householder_ir(b, sq, tau);
}

// Symmetric eigendecomposition reading the `lower` triangle: {w ascending, V}.
Values eigh_ir(Builder& b, Value a, bool lower) {
  Dims d = b.dims(a);
  int64_t n = d.back();
  ElemType t = b.elem(a);
  TensorType w_t{t, cat(batch_of(d), {n})};
  if (numel(d) == 0) return Values{zero(b, t, w_t.dims), a};
  // Sweeps stop once the off-diagonal mass is below tol * ||A||_F; at the
  // unit roundoff Jacobi is as accurate as LAPACK's tridiagonal QR.
  double tol = t == ElemType::kF64 ? 1e-15 : 1e-7;
  char cfg[64];
  std::snprintf(cfg, sizeof cfg, "%d,1,100,%g", lower ? 1 : 0, tol);
  Values vw = b.custom_call("Eigh", {a}, {b.type(a), w_t}, cfg);
  return Values{vw[1], vw[0]};
}

// SVD of a [..., m, n]: {U [..., m, ucols], S [..., k] descending,
// Vh [..., vrows, n]} with ucols = full ? m : k and vrows = full ? n : k.
Values svd_ir(Builder& b, Value a, bool full) {
  Dims d = b.dims(a);
  Dims batch = batch_of(d);
  int64_t m = d[d.size() - 2], n = d.back(), k = std::min(m, n);
  int64_t uc = full ? m : k, vr = full ? n : k;
  ElemType t = b.elem(a);
  if (numel(d) == 0) {
    return Values{eye(b, t, cat(batch, {m, uc})), zero(b, t, cat(batch, {k})), eye(b, t, cat(batch, {vr, n}))};
  }
  int64_t N = m + n;
  // H = [[0, A], [A^T, 0]]
  Value top = b.concatenate({zero(b, t, cat(batch, {m, m})), a}, static_cast<int64_t>(d.size()) - 1);
  Value bot = b.concatenate({mT(b, a), zero(b, t, cat(batch, {n, n}))}, static_cast<int64_t>(d.size()) - 1);
  Value h = b.concatenate({top, bot}, static_cast<int64_t>(d.size()) - 2);
  Values wv = eigh_ir(b, h, true);
  // Descending order: the k singular values first, then the |m - n| zero
  // eigenvalues whose eigenvectors complete U (m > n) or V (n > m).
  int64_t r = static_cast<int64_t>(d.size());
  Value w = b.reverse(wv[0], {r - 2});
  Value v = b.reverse(wv[1], {r - 1});
  Dims ws(r - 1, 0), wl = cat(batch, {k}), w1(r - 1, 1);
  Value s = b.abs(b.slice(w, ws, wl, w1));
  int64_t cols = std::max(m, n);
  (void)N;
  // Column-normalised halves: exact for sigma > 0 (both halves have norm
  // 1/sqrt(2)) and for the null-space vectors (one half is zero).
  auto normalised = [&](Value x) {
    Value sq = b.reduce(b.mul(x, x), zero(b, t), {r - 2}, BinaryOp::kAdd);
    Value nrm = b.sqrt(sq);
    Value safe = b.select(b.compare(nrm, zero(b, t, b.dims(nrm)), Direction::kGt), nrm, one(b, t, b.dims(nrm)));
    Dims xd = b.dims(x), map;
    for (int64_t i = 0; i < r - 2; ++i) map.push_back(i);
    map.push_back(r - 1);
    return b.div(x, b.broadcast_in_dim(safe, xd, map));
  };
  Value u = normalised(block(b, v, 0, m, 0, std::min(cols, uc)));
  Value vv = normalised(block(b, v, m, N, 0, std::min(cols, vr)));
  // Each [u; v] pair may come out as [u; -v] for -sigma's partner only;
  // for +sigma the halves share the sign, so U S Vh = A holds as is.
  return Values{u, s, mT(b, vv)};
}

// ---- ATen glue ----------------------------------------------------------

void check_float_input(const at::Tensor& t, const char* kernel) {
  auto st = t.scalar_type();
  if (st != c10::kFloat && st != c10::kDouble) {
    TORCH_CHECK_NOT_IMPLEMENTED(false, "\"", kernel, "\" not implemented for '", c10::toString(st), "'");
  }
}

void check_floating(const at::Tensor& t, const char* op) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()) || at::isComplexType(t.scalar_type()), op,
              ": Expected a floating point or complex tensor as input. Got ", t.scalar_type());
}

// Column-major (LAPACK's) strides for a batch of matrices of `sizes`.
std::vector<int64_t> column_major(const std::vector<int64_t>& sizes) {
  size_t r = sizes.size();
  std::vector<int64_t> st(r, 1);
  if (r < 2) return st;
  st[r - 2] = 1;
  st[r - 1] = std::max<int64_t>(sizes[r - 2], 1);
  int64_t step = std::max<int64_t>(sizes[r - 2] * sizes[r - 1], 1);
  for (size_t i = r - 2; i-- > 0;) {
    st[i] = step;
    step *= std::max<int64_t>(sizes[i], 1);
  }
  return st;
}

// Each op below is declared once for its functional and out= forms
// (ops/variants.h); results have CPU's layouts (column-major factors), and
// out= must have exactly each result's dtype (geqrf's: any it casts to), as
// on CPU.
struct Geqrf {
  static constexpr const char* kName = "geqrf";
  static ResultsMeta<2> meta(const at::Tensor& self) {
    TORCH_CHECK(self.dim() >= 2, "torch.geqrf: input must have at least 2 dimensions.");
    check_float_input(self, "geqrf_cpu");
    Dims d = dims_of(self.sizes());
    int64_t k = std::min(d[d.size() - 2], d.back());
    ResultsMeta<2> m;
    m.results[0] = OutMeta{self.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kOwn, false};
    m.results[0].strides = column_major(m.results[0].sizes);
    m.results[1] = OutMeta{cat(batch_of(d), {k}), self.scalar_type(), self.device(), OutDtype::kOwn, false};
    return m;
  }
  // out= may have any dtype the result casts to, as on CPU.
  static void check_out(const at::Tensor& a, const at::Tensor& tau, const ResultsMeta<2>&, const at::Tensor& self) {
    TORCH_CHECK(c10::canCast(self.scalar_type(), a.scalar_type()),
                "torch.geqrf: Expected a to be safely castable from ", self.scalar_type(),
                " dtype, but got a with dtype ", a.scalar_type());
    TORCH_CHECK(c10::canCast(self.scalar_type(), tau.scalar_type()),
                "torch.geqrf: Expected tau to be safely castable from ", self.scalar_type(),
                " dtype, but got tau with dtype ", tau.scalar_type());
  }
  static void impl(const at::Tensor& a, const at::Tensor& tau, const ResultsMeta<2>& m, const at::Tensor& self) {
    if (a.scalar_type() != self.scalar_type() || tau.scalar_type() != self.scalar_type()) {
      auto [ra, rt] = at::geqrf(self);
      a.copy_(ra);
      tau.copy_(rt);
      return;
    }
    record::OpCall call("geqrf");
    call.input(self);
    call.output(a);
    call.output(tau);
    call.run([&](Builder& b, const Values& in) { return geqrf_ir(b, in[0]); });
  }
};

// Q from geqrf's Householder reflectors; out= may be any dtype it casts to.
struct HouseholderProduct {
  static constexpr const char* kName = "householder_product";
  static OutMeta meta(const at::Tensor& input, const at::Tensor& tau);
  static void check_out(const at::Tensor& out, const OutMeta& m, const at::Tensor&, const at::Tensor&) {
    TORCH_CHECK(c10::canCast(m.dtype, out.scalar_type()),
                "torch.linalg.householder_product: Expected result to be safely castable from ", m.dtype,
                " dtype, but got result with dtype ", out.scalar_type());
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& input, const at::Tensor& tau) {
    record::OpCall call("householder_product");
    call.input(input);
    call.input(tau);
    call.output(out);
    call.run([](Builder& b, const Values& in) { return Values{householder_ir(b, in[0], in[1])}; });
  }
};

OutMeta HouseholderProduct::meta(const at::Tensor& input, const at::Tensor& tau) {
  const char* op = "torch.linalg.householder_product";
  TORCH_CHECK(input.dim() >= 2, op, ": input must have at least 2 dimensions.");
  TORCH_CHECK(input.size(-2) >= input.size(-1), op,
              ": input.shape[-2] must be greater than or equal to input.shape[-1]");
  TORCH_CHECK(input.size(-1) >= tau.size(-1), op, ": input.shape[-1] must be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(input.dim() - tau.dim() == 1, op,
              ": Expected tau to have one dimension less than input, but got tau.ndim equal to ", tau.dim(),
              " and input.ndim is equal to ", input.dim());
  if (input.dim() > 2) {
    auto eb = input.sizes().slice(0, input.dim() - 2), tb = tau.sizes().slice(0, tau.dim() - 1);
    TORCH_CHECK(eb.equals(tb), op, ": Expected batch dimensions of tau to be equal to input.shape[:-2], but got ", tb);
  }
  TORCH_CHECK(tau.scalar_type() == input.scalar_type(), op, ": tau dtype ", tau.scalar_type(),
              " does not match input dtype ", input.scalar_type());
  check_float_input(input, "orgqr_cpu");
  OutMeta m{input.sizes().vec(), input.scalar_type(), input.device()};
  m.operand_layout = false;
  return m;
}

// mode -> (compute_q, complete)
std::pair<bool, bool> qr_mode(c10::string_view mode) {
  if (mode == "reduced") return {true, false};
  if (mode == "complete") return {true, true};
  if (mode == "r") return {false, false};
  TORCH_CHECK(false, "qr received unrecognized mode '", mode,
              "' but expected one of 'reduced' (default), 'r', or 'complete'");
}

struct Qr {
  static constexpr const char* kName = "linalg_qr";
  static ResultsMeta<2> meta(const at::Tensor& A, c10::string_view mode) {
    TORCH_CHECK(A.dim() >= 2, "linalg.qr: The input tensor A must have at least 2 dimensions.");
    check_floating(A, "linalg.qr");
    qr_mode(mode);
    check_float_input(A, "geqrf_cpu");
    return results_like(at::linalg_qr(meta_of(A), mode), A.device());
  }
  static void impl(const at::Tensor& Q, const at::Tensor& R, const ResultsMeta<2>&, const at::Tensor& A,
                   c10::string_view mode) {
    auto [compute_q, complete] = qr_mode(mode);
    Dims d = dims_of(A.sizes());
    int64_t m = d[d.size() - 2], n = d.back(), k = std::min(m, n);
    bool full = complete && m > n;
    record::OpCall call("linalg_qr");
    call.attr(compute_q).attr(full);
    call.input(A);
    if (compute_q) call.output(Q);
    call.output(R);
    call.run([&](Builder& b, const Values& in) {
      Values qr = geqrf_ir(b, in[0]);
      Values out;
      if (compute_q)
        out.push_back(full ? full_q_ir(b, qr[0], qr[1]) : householder_ir(b, block(b, qr[0], 0, m, 0, k), qr[1]));
      out.push_back(triu(b, full ? qr[0] : block(b, qr[0], 0, k, 0, n)));
      return out;
    });
  }
};

// Q (from geqrf's reflectors) times other; out= must have self's dtype.
struct Ormqr {
  static constexpr const char* kName = "ormqr";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& tau, const at::Tensor& other, bool left, bool);
  static void check_out(const at::Tensor& out, const OutMeta& m, const at::Tensor&, const at::Tensor&,
                        const at::Tensor&, bool, bool) {
    TORCH_CHECK(out.scalar_type() == m.dtype,
                "torch.ormqr: Expected input and result to have the same dtype, but input ", "has dtype", m.dtype,
                " and result has dtype ", out.scalar_type());
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& tau,
                   const at::Tensor& other, bool left, bool transpose);
};

OutMeta Ormqr::meta(const at::Tensor& self, const at::Tensor& tau, const at::Tensor& other, bool left, bool) {
  const char* op = "torch.ormqr";
  TORCH_CHECK(self.dim() >= 2, op, ": input must have at least 2 dimensions.");
  TORCH_CHECK(other.dim() >= 2, op, ": other must have at least 2 dimensions.");
  int64_t left_size_condition = left ? -2 : -1;
  TORCH_CHECK(other.size(left_size_condition) >= tau.size(-1), op, ": other.shape[", left_size_condition,
              "] must be greater than or equal to tau.shape[-1]");
  TORCH_CHECK(other.size(left_size_condition) == self.size(-2), op, ": other.shape[", left_size_condition,
              "] must be equal to input.shape[-2]");
  TORCH_CHECK(self.size(-1) >= tau.size(-1), op, ": tau.shape[-1] must be less than or equal to input.shape[-1]");
  TORCH_CHECK(self.dim() - tau.dim() == 1, op,
              ": Expected tau to have one dimension less than input, but got tau.ndim equal to ", tau.dim(),
              " and input.ndim is equal to ", self.dim());
  TORCH_CHECK(self.dim() == other.dim(), op,
              ": Expected other to have the same number of dimensions as input, but got other.ndim equal to ",
              other.dim(), " and input.ndim is equal to ", self.dim());
  if (self.dim() > 2) {
    auto eb = self.sizes().slice(0, self.dim() - 2);
    TORCH_CHECK(eb.equals(tau.sizes().slice(0, tau.dim() - 1)), op,
                ": Expected batch dimensions of tau to be equal to input.shape[:-2], but got ",
                tau.sizes().slice(0, tau.dim() - 1));
    TORCH_CHECK(eb.equals(other.sizes().slice(0, other.dim() - 2)), op,
                ": Expected batch dimensions of other to be equal to input.shape[:-2], but got ",
                other.sizes().slice(0, other.dim() - 2));
  }
  TORCH_CHECK(tau.scalar_type() == self.scalar_type(), op,
              ": Expected input and tau to have the same dtype, but input has dtype ", self.scalar_type(),
              " and tau has dtype ", tau.scalar_type());
  TORCH_CHECK(other.scalar_type() == self.scalar_type(), op,
              ": Expected input and other to have the same dtype, but input has dtype ", self.scalar_type(),
              " and other has dtype ", other.scalar_type());
  check_float_input(self, "ormqr_cpu");
  OutMeta m{other.sizes().vec(), self.scalar_type(), self.device()};
  m.operand_layout = false;
  return m;
}

void Ormqr::impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const at::Tensor& tau,
                 const at::Tensor& other, bool left, bool transpose) {
  auto st = self.scalar_type();
  record::OpCall call("ormqr");
  call.attr(left).attr(transpose);
  call.input(self);
  call.input(tau);
  call.input(other);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    if (numel(b.dims(in[2])) == 0) return Values{in[2]};
    Value q = full_q_ir(b, in[0], in[1]);
    return Values{left ? matmul(b, q, in[2], transpose, false, st) : matmul(b, in[2], q, false, transpose, st)};
  });
}

struct Eigh {
  static constexpr const char* kName = "_linalg_eigh";
  static ResultsMeta<2> meta(const at::Tensor& A, c10::string_view uplo, bool compute_v) {
    TORCH_CHECK(A.dim() >= 2, "linalg.eigh: The input tensor A must have at least 2 dimensions.");
    TORCH_CHECK(A.size(-1) == A.size(-2), "linalg.eigh: A must be batches of square matrices, but they are ",
                A.size(-2), " by ", A.size(-1), " matrices");
    TORCH_CHECK(uplo.size() == 1 && (uplo[0] == 'L' || uplo[0] == 'l' || uplo[0] == 'U' || uplo[0] == 'u'),
                "Expected UPLO argument to be 'L' or 'U', but got ", uplo);
    check_float_input(A, "linalg_eigh_cpu");
    return results_like(at::_linalg_eigh(meta_of(A), uplo, compute_v), A.device());
  }
  static void impl(const at::Tensor& L, const at::Tensor& V, const ResultsMeta<2>&, const at::Tensor& A,
                   c10::string_view uplo, bool compute_v) {
    bool lower = uplo[0] == 'L' || uplo[0] == 'l';
    record::OpCall call("linalg_eigh");
    call.attr(lower).attr(compute_v);
    call.input(A);
    call.output(L);
    if (compute_v) call.output(V);
    call.run([&](Builder& b, const Values& in) {
      Values wv = eigh_ir(b, in[0], lower);
      if (!compute_v) wv.pop_back();
      return wv;
    });
  }
};

struct Svd {
  static constexpr const char* kName = "_linalg_svd";
  static ResultsMeta<3> meta(const at::Tensor& A, bool full_matrices, bool compute_uv,
                             std::optional<c10::string_view> driver) {
    TORCH_CHECK(A.dim() >= 2, "linalg.svd: The input tensor A must have at least 2 dimensions.");
    check_floating(A, "linalg.svd");
    TORCH_CHECK(!driver.has_value(),
                "torch.linalg.svd: keyword argument `driver=` is only supported on CUDA inputs with cuSOLVER "
                "backend.");
    check_float_input(A, "linalg_svd_cpu");
    auto m = results_like(at::_linalg_svd(meta_of(A), full_matrices, compute_uv, driver), A.device());
    // CPU's Vh is column-major, as LAPACK writes it; the meta kernel's is not.
    if (compute_uv) m.results[2].strides = column_major(m.results[2].sizes);
    return m;
  }
  static void impl(const at::Tensor& U, const at::Tensor& S, const at::Tensor& Vh, const ResultsMeta<3>&,
                   const at::Tensor& A, bool full_matrices, bool compute_uv, std::optional<c10::string_view>) {
    bool full = compute_uv && full_matrices;
    record::OpCall call("linalg_svd");
    call.attr(full).attr(compute_uv);
    call.input(A);
    if (compute_uv) call.output(U);
    call.output(S);
    if (compute_uv) call.output(Vh);
    call.run([&](Builder& b, const Values& in) {
      Values usv = svd_ir(b, in[0], full);
      if (!compute_uv) return Values{usv[1]};
      return usv;
    });
  }
};

// linalg_lstsq through the SVD: x = V diag(1 / sigma) U^T B, dropping the
// singular values at or below rcond * sigma_max (the minimum-norm solution
// gelsy/gelsd/gelss return; gels assumes full rank, so it keeps them all).
std::tuple<at::Tensor&, at::Tensor&, at::Tensor&, at::Tensor&> linalg_lstsq_out(
    const at::Tensor& A, const at::Tensor& B, std::optional<double> rcond, std::optional<c10::string_view> driver_opt,
    at::Tensor& solution, at::Tensor& residuals, at::Tensor& rank, at::Tensor& sv) {
  const char* op = "torch.linalg.lstsq";
  TORCH_CHECK(A.dim() >= 2, op, ": input must have at least 2 dimensions.");
  TORCH_CHECK(B.dim() >= 1, op, ": other must have at least 1 dimension.");
  TORCH_CHECK(A.scalar_type() == B.scalar_type(), op,
              ": Expected input and other to have the same dtype, but got input's dtype ", A.scalar_type(),
              " and other's dtype ", B.scalar_type());
  bool vector = B.dim() == A.dim() - 1;
  int64_t dim_b = vector ? -1 : -2;
  TORCH_CHECK(A.size(-2) == B.size(dim_b), op, ": input.size(-2) should match other.size(", dim_b, ")");
  auto st = A.scalar_type();
  TORCH_CHECK(st == c10::kFloat || st == c10::kDouble,
              "This function doesn't handle types other than float and double");
  std::string driver = driver_opt.has_value() ? std::string(*driver_opt) : "gelsy";
  TORCH_CHECK(driver == "gels" || driver == "gelsy" || driver == "gelsd" || driver == "gelss", op,
              ": parameter `driver` should be one of (gels, gelsy, gelsd, gelss)");
  Dims ad = dims_of(A.sizes()), bd = dims_of(B.sizes());
  if (vector) bd.push_back(1);
  int64_t m = ad[ad.size() - 2], n = ad.back(), k = std::min(m, n), nrhs = bd.back();
  Dims batch = dims_of(at::infer_size(batch_of(ad), batch_of(bd)));
  bool gels = driver == "gels", with_sv = driver == "gelsd" || driver == "gelss";
  double eps = st == c10::kDouble ? std::numeric_limits<double>::epsilon() : std::numeric_limits<float>::epsilon();
  double rc = rcond.has_value() ? *rcond : eps * static_cast<double>(std::max(m, n));
  if (rc < 0) rc = eps;  // LAPACK reads a negative rcond as machine precision
  bool want_res = m > n && driver != "gelsy";
  Dims sol_shape = cat(batch, vector ? Dims{n} : Dims{n, nrhs});
  Dims res_shape = cat(batch, {nrhs});
  for (at::Tensor* t : {&solution, &residuals, &sv})
    TORCH_CHECK(t->scalar_type() == st, op, ": Expected out tensors to have dtype ", st, ", but got ", t->scalar_type(),
                " instead");
  TORCH_CHECK(rank.scalar_type() == c10::kLong, op, ": Expected rank to have dtype Long, but got ", rank.scalar_type());
  prepare_out(solution, sol_shape, st, "linalg_lstsq");
  prepare_out(rank, gels ? Dims{0} : batch, c10::kLong, "linalg_lstsq");
  prepare_out(sv, with_sv ? cat(batch, {k}) : Dims{0}, st, "linalg_lstsq");
  at::Tensor res = want_res ? empty_tpu(res_shape, st, A.device()) : at::Tensor();
  record::OpCall call("linalg_lstsq");
  call.attr(vector).attr(gels).attr(with_sv).attr(want_res);
  call.input(A);
  call.input(B);
  call.scalar(rc, st);
  call.output(solution);
  if (!gels) call.output(rank);
  if (with_sv) call.output(sv);
  if (want_res) call.output(res);
  call.run([&](Builder& b, const Values& in) {
    ElemType t = b.elem(in[0]);
    Value a = b.broadcast_to(in[0], cat(batch, {m, n}));
    Value rhs = b.broadcast_to(vector ? b.reshape(in[1], cat(b.dims(in[1]), {1})) : in[1], cat(batch, {m, nrhs}));
    int64_t r = static_cast<int64_t>(batch.size()) + 1;  // rank of S
    Values usv = svd_ir(b, a, false);
    Value s = usv[1];
    Dims sdims = b.dims(s), bmap;
    for (int64_t i = 0; i < r - 1; ++i) bmap.push_back(i);
    Value smax = k > 0 ? b.reduce(s, zero(b, t), {r - 1}, BinaryOp::kMax) : zero(b, t, batch);
    Value cut = b.mul(b.broadcast_in_dim(smax, sdims, bmap), b.broadcast_to(in[2], sdims));
    Value keep = b.compare(s, cut, Direction::kGt);
    Value inv = b.div(one(b, t, sdims), s);
    if (!gels) inv = b.select(keep, inv, zero(b, t, sdims));
    Dims map2 = bmap;
    map2.push_back(r - 1);
    // x = V (S^+ (U^T B))
    Value utb = matmul(b, usv[0], rhs, true, false, st);
    Value scaled = b.mul(utb, b.broadcast_in_dim(inv, b.dims(utb), map2));
    Value x = matmul(b, usv[2], scaled, true, false, st);
    Values out{vector ? b.reshape(x, sol_shape) : x};
    if (!gels) {
      Value cnt = b.reduce(b.convert(keep, ElemType::kS64), zero(b, ElemType::kS64), {r - 1}, BinaryOp::kAdd);
      out.push_back(cnt);
    }
    if (with_sv) out.push_back(s);
    if (want_res) {
      Value diff = b.sub(matmul(b, a, x, false, false, st), rhs);
      out.push_back(b.reduce(b.mul(diff, diff), zero(b, t), {r - 1}, BinaryOp::kAdd));
    }
    return out;
  });
  // gelss/gelsd report residuals only when every matrix has full rank.
  if (want_res && with_sv && numel(batch) != 0) kLstsqSync();
  bool have_res = want_res && (!with_sv || numel(batch) == 0 || rank.eq(n).all().item<bool>());
  prepare_out(residuals, have_res ? res_shape : Dims{0}, st, "linalg_lstsq");
  if (have_res) residuals.copy_(res);
  return {solution, residuals, rank, sv};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Geqrf>(m, {"geqrf", "", "geqrf.a"});
  register_variants<HouseholderProduct>(m, {"linalg_householder_product", "", "linalg_householder_product.out"});
  register_variants<Qr>(m, {"linalg_qr", "", "linalg_qr.out"});
  register_variants<Ormqr>(m, {"ormqr", "", "ormqr.out"});
  register_variants<Eigh>(m, {"_linalg_eigh", "", "_linalg_eigh.eigenvalues"});
  register_variants<Svd>(m, {"_linalg_svd", "", "_linalg_svd.U"});
  m.impl("linalg_lstsq.out", linalg_lstsq_out);
}

}  // namespace
}  // namespace torch_tpu::ops
