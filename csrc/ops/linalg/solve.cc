// Solvers over given factors and small linalg ops: triangular solves
// (triangular_solve, linalg_solve_triangular), Cholesky-based solve and
// inverse, lu_unpack, linalg_lu_solve and linalg_cross.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/linalg_lu_solve.h>
#include <ATen/ops/lu_unpack.h>
#include <ATen/ops/result_type.h>
#include <ATen/ops/triangular_solve.h>
#include <torch/library.h>

#include "ops/linalg/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops::linalg {
namespace {

using ir::Dims;

std::vector<int64_t> broadcast_batch(const at::Tensor& x, const at::Tensor& y) {
  return at::infer_size(batch_of(x), batch_of(y));
}

void check_solver_dtype(c10::ScalarType t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(t == c10::kFloat || t == c10::kDouble, "\"", kernel, "\" not implemented for '",
                              c10::toString(t), "'");
}

// X = op(A)^-1 B (left) or B op(A)^-1, batch dims broadcast to `batch`.
void trisolve_into(const at::Tensor& A, const at::Tensor& B, const std::vector<int64_t>& batch, bool left, bool upper,
                   bool unit, bool transpose, const at::Tensor& X, const at::Tensor& M) {
  if (X.numel() == 0) {
    if (M.defined() && M.numel()) M.copy_(A.expand(M.sizes()));
    return;
  }
  record::OpCall call("linalg_trisolve");
  call.attr(left).attr(upper).attr(unit).attr(transpose).attr(c10::IntArrayRef(batch));
  auto dt = X.scalar_type();
  call.input(A);
  call.input(B);
  call.output(X);
  if (M.defined()) call.output(M);
  call.run([&](Builder& b, const Values& in) {
    ElemType t = to_elem(dt);
    Value a = expand_batch(b, b.convert(in[0], t), batch, 2);
    Value rhs = expand_batch(b, b.convert(in[1], t), batch, 2);
    Values out{trisolve(b, a, rhs, left, !upper, unit, transpose)};
    if (M.defined()) out.push_back(a);
    return out;
  });
}

// Each op below is declared once for its functional and out= forms, with
// shapes, dtypes and layouts from ATen's meta kernels after tpu's checks;
// out= must have exactly each result's dtype.
struct TriangularSolve {
  static constexpr const char* kName = "triangular_solve";
  static ResultsMeta<2> meta(const at::Tensor& B, const at::Tensor& A, bool upper, bool transpose, bool unitriangular) {
    TORCH_CHECK(B.dim() >= 2, "torch.triangular_solve: Expected b to have at least 2 dimensions, but it has ", B.dim(),
                " dimensions instead");
    TORCH_CHECK(A.dim() >= 2, "torch.triangular_solve: Expected A to have at least 2 dimensions, but it has ", A.dim(),
                " dimensions instead");
    TORCH_CHECK(B.scalar_type() == A.scalar_type(), "Expected b and A to have the same dtype, but found b of type ",
                B.scalar_type(), " and A of type ", A.scalar_type(), " instead.");
    TORCH_CHECK(A.size(-1) == A.size(-2), "A must be batches of square matrices, but they are ", A.size(-2), " by ",
                A.size(-1), " matrices");
    TORCH_CHECK(A.size(-1) == B.size(-2), "Incompatible matrix sizes for triangular_solve: each A matrix is ",
                A.size(-1), " by ", A.size(-1), " but each b matrix is ", B.size(-2), " by ", B.size(-1));
    check_solver_dtype(A.scalar_type(), "triangular_solve_tpu");
    return results_like(at::triangular_solve(meta_of(B), meta_of(A), upper, transpose, unitriangular), A.device());
  }
  static void impl(const at::Tensor& X, const at::Tensor& M, const ResultsMeta<2>&, const at::Tensor& B,
                   const at::Tensor& A, bool upper, bool transpose, bool unitriangular) {
    trisolve_into(A, B, broadcast_batch(B, A), true, upper, unitriangular, transpose, X, M);
  }
};

// linalg.solve_triangular: X with AX = B (left) or XA = B, in A and B's
// promoted dtype, which out= must have.
struct SolveTriangular {
  static constexpr const char* kName = "linalg.solve_triangular";
  struct Meta : OutMeta {
    std::vector<int64_t> batch;
  };
  static Meta meta(const at::Tensor& A, const at::Tensor& B, bool upper, bool left, bool unitriangular);
  static void impl(const at::Tensor& out, const Meta& m, const at::Tensor& A, const at::Tensor& B, bool upper,
                   bool left, bool unitriangular) {
    trisolve_into(A, B, m.batch, left, upper, unitriangular, false, out, at::Tensor());
  }
};

SolveTriangular::Meta SolveTriangular::meta(const at::Tensor& A, const at::Tensor& B, bool, bool left, bool) {
  const char* fn = kName;
  check_matrix(A, fn, "A");
  check_matrix(B, fn, "B");
  TORCH_CHECK(A.size(-1) == A.size(-2), fn, ": A must be batches of square matrices, but they are ", A.size(-2), " by ",
              A.size(-1), " matrices");
  if (left) {
    TORCH_CHECK(A.size(-1) == B.size(-2), fn, ": Incompatible shapes of A and B for the equation AX = B (", A.size(-2),
                "x", A.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  } else {
    TORCH_CHECK(A.size(-1) == B.size(-1), fn, ": Incompatible shapes of A and B for the equation XA = B (", A.size(-2),
                "x", A.size(-1), " and ", B.size(-2), "x", B.size(-1), ")");
  }
  Meta m;
  m.dtype = at::result_type(A, B);
  check_solver_dtype(m.dtype, "triangular_solve_tpu");
  m.batch = broadcast_batch(A, B);
  m.sizes = cat_shape(m.batch, {B.size(-2), B.size(-1)});
  m.device = A.device();
  m.out_dtype = OutDtype::kExact;  // CPU's kernel refuses any other out dtype, a wider float too
  m.operand_layout = false;
  return m;
}

// (L L^H)^-1 from L (or (U^H U)^-1 from U).
struct CholeskyInverse {
  static constexpr const char* kName = "cholesky_inverse";
  static OutMeta meta(const at::Tensor& L, bool) {
    check_square(L, "cholesky_inverse", "A");
    check_solver_dtype(L.scalar_type(), "cholesky_inverse_tpu");
    OutMeta m{L.sizes().vec(), L.scalar_type(), L.device()};
    m.operand_layout = false;
    return m;
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& L, bool upper);
};

void CholeskyInverse::impl(const at::Tensor& out, const OutMeta&, const at::Tensor& L, bool upper) {
  if (L.numel() == 0) return;
  record::OpCall call("cholesky_inverse");
  call.attr(upper);
  call.input(L);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value l = in[0];
    Value inv = trisolve(b, l, eye(b, b.elem(l), b.dims(l)), true, !upper, false, false);
    return Values{upper ? matmul(b, inv, mT(b, inv)) : matmul(b, mT(b, inv), inv)};
  });
}

// Inputs arrive batch-broadcast from the cholesky_solve composite.
at::Tensor cholesky_solve_helper(const at::Tensor& B, const at::Tensor& A, bool upper) {
  check_solver_dtype(B.scalar_type(), "cholesky_solve_tpu");
  at::Tensor out = empty_tpu(B.sizes(), B.scalar_type(), B.device());
  if (out.numel() == 0) return out;
  auto batch = broadcast_batch(B, A);
  record::OpCall call("cholesky_solve");
  call.attr(upper).attr(c10::IntArrayRef(batch));
  call.input(B);
  call.input(A);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value a = expand_batch(b, in[1], batch, 2), rhs = expand_batch(b, in[0], batch, 2);
    // A = L L^T: L y = B, L^T x = y (upper: U^T y = B, U x = y).
    Value y = trisolve(b, a, rhs, true, !upper, false, upper);
    return Values{trisolve(b, a, y, true, !upper, false, !upper)};
  });
  return out;
}

// P, L and U of an LU factorization; an unpacked part is empty.
struct LuUnpack {
  static constexpr const char* kName = "lu_unpack";
  static ResultsMeta<3> meta(const at::Tensor& LU, const at::Tensor& piv, bool unpack_data, bool unpack_pivots) {
    TORCH_CHECK(LU.dim() >= 2, "torch.lu_unpack: Expected tensor with 2 or more dimensions. Got size: ", LU.sizes(),
                " instead");
    if (unpack_pivots) {
      TORCH_CHECK(piv.scalar_type() == c10::kInt,
                  "torch.lu_unpack: LU_pivots is expected to be a contiguous tensor of torch.int32 dtype.\n"
                  "Note: this function is intended to be used with the output produced by torch.linalg.lu_factor");
      int64_t k = std::min(LU.size(-2), LU.size(-1));
      TORCH_CHECK(piv.size(-1) == k, "torch.lu_unpack: the last dimension of LU_pivots must have size min(m, n) = ", k);
    }
    return results_like(at::lu_unpack(meta_of(LU), meta_of(piv), unpack_data, unpack_pivots), LU.device());
  }
  static void impl(const at::Tensor& P, const at::Tensor& L, const at::Tensor& U, const ResultsMeta<3>&,
                   const at::Tensor& LU, const at::Tensor& piv, bool unpack_data, bool unpack_pivots) {
    if (L.numel() + U.numel() + P.numel() == 0) return;
    int64_t m = LU.size(-2), n = LU.size(-1), k = std::min(m, n);
    record::OpCall call("lu_unpack");
    call.attr(unpack_data).attr(unpack_pivots);
    call.input(LU);
    if (unpack_pivots) call.input(piv);
    if (unpack_data) {
      call.output(L);
      call.output(U);
    }
    if (unpack_pivots) call.output(P);
    call.run([&](Builder& b, const Values& in) {
      Values outs;
      Value lu = in[0];
      ElemType et = b.elem(lu);
      if (unpack_data) {
        Dims d = b.dims(lu);
        int64_t r = d.size();
        Dims start(r, 0), strides(r, 1), ll = d, lu_lim = d;
        ll[r - 1] = k;
        lu_lim[r - 2] = k;
        Value l = b.slice(lu, start, ll, strides);
        Dims ld = b.dims(l);
        outs.push_back(b.select(tri_mask(b, ld, true, -1), l, eye(b, et, ld)));
        outs.push_back(keep_triangle(b, b.slice(lu, start, lu_lim, strides), false));
      }
      if (unpack_pivots) {
        Value pv = b.convert(in[1], ElemType::kS32);
        outs.push_back(perm_matrix(b, pivots_to_perm(b, pv, m), et));
      }
      return outs;
    });
  }
};

struct LuSolve {
  static constexpr const char* kName = "linalg_lu_solve";
  static OutMeta meta(const at::Tensor& LU, const at::Tensor& piv, const at::Tensor& B, bool left, bool adjoint) {
    const char* fn = "linalg.lu_solve";
    check_square(LU, fn, "LU");
    check_matrix(B, fn, "B");
    int64_t n = LU.size(-1);
    if (left) {
      TORCH_CHECK(B.size(-2) == n, fn, ": Incompatible shapes of A and B for the equation AX = B (", n, "x", n, " and ",
                  B.size(-2), "x", B.size(-1), ")");
    } else {
      TORCH_CHECK(B.size(-1) == n, fn, ": Incompatible shapes of A and B for the equation XA = B (", n, "x", n, " and ",
                  B.size(-2), "x", B.size(-1), ")");
    }
    TORCH_CHECK(LU.scalar_type() == B.scalar_type(), fn,
                ": Expected LU and B to have the same dtype, but found LU of type ", LU.scalar_type(),
                " and B of type ", B.scalar_type(), " instead");
    TORCH_CHECK(piv.scalar_type() == c10::kInt, fn, ": pivots should be a Tensor of scalar type torch.int32");
    TORCH_CHECK(piv.dim() >= 1 && piv.size(-1) == n, fn,
                ": Number of pivots per batch should be same as the dimension of the matrix");
    TORCH_CHECK(batch_of(piv, 1) == batch_of(LU), fn,
                ": Expected LU.shape[:-2] == pivots.shape[:-1], but got pivots.shape[:-1]: ",
                piv.sizes().slice(0, piv.dim() - 1), " and LU.shape[:-2]: ", LU.sizes().slice(0, LU.dim() - 2));
    check_solver_dtype(LU.scalar_type(), "lu_solve_tpu");
    return like_meta(at::linalg_lu_solve(meta_of(LU), meta_of(piv), meta_of(B), left, adjoint), LU.device());
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& LU, const at::Tensor& piv,
                   const at::Tensor& B, bool left, bool adjoint) {
    if (out.numel() == 0) return;
    int64_t n = LU.size(-1);
    auto batch = broadcast_batch(LU, B);
    record::OpCall call("linalg_lu_solve");
    call.attr(left).attr(adjoint).attr(c10::IntArrayRef(batch));
    call.input(LU);
    call.input(piv);
    call.input(B);
    call.output(out);
    call.run([&](Builder& b, const Values& in) {
      Value perm = pivots_to_perm(b, in[1], n);
      Value lu = expand_batch(b, in[0], batch, 2), pm = expand_batch(b, perm, batch, 1);
      Value rhs = expand_batch(b, in[2], batch, 2);
      Value x = left ? lu_solve(b, lu, pm, rhs, adjoint) : mT(b, lu_solve(b, lu, pm, mT(b, rhs), !adjoint));
      return Values{x};
    });
  }
};

at::Tensor& linalg_cross_out(const at::Tensor& x, const at::Tensor& y, int64_t dim, at::Tensor& out) {
  TORCH_CHECK(x.dim() == y.dim(), "linalg.cross: inputs must have the same number of dimensions.");
  int64_t d = wrap_dim(dim, x.dim());
  TORCH_CHECK(x.size(d) == 3 && y.size(d) == 3, "linalg.cross: inputs dimension ", dim, " must have length 3. Got ",
              x.size(d), " and ", y.size(d));
  auto shape = at::infer_size(x.sizes(), y.sizes());
  TORCH_CHECK(x.scalar_type() == y.scalar_type(), "expected scalar type ", x.scalar_type(), " but found ",
              y.scalar_type());
  prepare_out(out, shape, x.scalar_type(), "linalg.cross");
  if (out.numel() == 0) return out;
  record::OpCall call("linalg_cross");
  call.attr(d).attr(c10::IntArrayRef(shape));
  call.input(x);
  call.input(y);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Dims s(shape.begin(), shape.end());
    Value a = b.broadcast_to(in[0], s), c = b.broadcast_to(in[1], s);
    auto comp = [&](Value v, int64_t i) {
      Dims start(s.size(), 0), limit = s, strides(s.size(), 1);
      start[d] = i;
      limit[d] = i + 1;
      return b.slice(v, start, limit, strides);
    };
    Value a0 = comp(a, 0), a1 = comp(a, 1), a2 = comp(a, 2), c0 = comp(c, 0), c1 = comp(c, 1), c2 = comp(c, 2);
    return Values{b.concatenate(
        {b.sub(b.mul(a1, c2), b.mul(a2, c1)), b.sub(b.mul(a2, c0), b.mul(a0, c2)), b.sub(b.mul(a0, c1), b.mul(a1, c0))},
        d)};
  });
  return out;
}

}  // namespace
}  // namespace torch_tpu::ops::linalg

namespace torch_tpu::ops {
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<linalg::TriangularSolve>(m, {"triangular_solve", "", "triangular_solve.X"});
  register_variants<linalg::SolveTriangular>(m, {"linalg_solve_triangular", "", "linalg_solve_triangular.out"});
  register_variants<linalg::CholeskyInverse>(m, {"cholesky_inverse", "", "cholesky_inverse.out"});
  m.impl("_cholesky_solve_helper", linalg::cholesky_solve_helper);
  register_variants<linalg::LuUnpack>(m, {"lu_unpack", "", "lu_unpack.out"});
  register_variants<linalg::LuSolve>(m, {"linalg_lu_solve", "", "linalg_lu_solve.out"});
  m.impl("linalg_cross.out", linalg::linalg_cross_out);
}
}  // namespace torch_tpu::ops
