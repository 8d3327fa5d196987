// Shared pieces of the dense linear algebra kernels (linalg/factor.cc,
// linalg/solve.cc): PyTorch CPU's argument checks, and IR building blocks
// on batched matrices (the last two dimensions; batch dimensions of the
// operands of one helper must already agree).
#pragma once
#include <ATen/core/Tensor.h>

#include "ops/common.h"

namespace torch_tpu::ops::linalg {

// --- ATen glue ---------------------------------------------------------------

// "fn: The input tensor A must have at least 2 dimensions."
void check_matrix(const at::Tensor& A, const char* fn, const char* name = "A");
// ... and square.
void check_square(const at::Tensor& A, const char* fn, const char* name = "A");
// A float type the lowering supports (float32/float64), with CPU's
// messages: integers are a RuntimeError, complex and half types are not
// implemented. `kernel` names the op in the NotImplementedError.
void check_floating(const at::Tensor& A, const char* fn, const char* kernel);
// The tensor's batch shape (all but the last `matrix_dims` dims).
std::vector<int64_t> batch_of(const at::Tensor& t, int64_t matrix_dims = 2);
// Shape `batch` + `tail`.
std::vector<int64_t> cat_shape(std::vector<int64_t> batch, std::initializer_list<int64_t> tail);

// --- IR ----------------------------------------------------------------------

// Parameter i of a loop region (Builder::loop_region).
inline Value region_param(const std::shared_ptr<ir::Graph>& g, int i) { return Value{g->params()[i], 0}; }
// Swaps the last two dimensions.
Value mT(Builder& b, Value x);
// Batched matrix product [..., m, k] x [..., k, n] at full precision.
Value matmul(Builder& b, Value x, Value y);
// Predicate over `dims` (last two = rows, cols): col - row <= k (lower) or >= k.
Value tri_mask(Builder& b, const ir::Dims& dims, bool lower, int64_t k = 0);
// Zero outside the lower (upper) triangle; diagonal kept.
Value keep_triangle(Builder& b, Value x, bool lower, int64_t k = 0);
// Identity matrices of `dims` (rectangular allowed).
Value eye(Builder& b, ElemType t, const ir::Dims& dims);
// Main diagonal of [..., m, n] -> [..., min(m, n)].
Value diagonal(Builder& b, Value x);
// Solves op(A) X = B (left) or X op(A) = B with A triangular; reads only
// the named triangle of A (and not its diagonal when unit), like LAPACK.
Value trisolve(Builder& b, Value A, Value B, bool left, bool lower, bool unit, bool transpose);
// Broadcast of the leading (batch) dims of x to `batch`, keeping the last `keep` dims.
Value expand_batch(Builder& b, Value x, const ir::Dims& batch, int keep);

// LU with partial pivoting as LAPACK getrf: for each column the row of
// largest |a| (first on ties) becomes the pivot; a zero pivot skips the
// elimination and sets info to its 1-based column. Runs as one
// stablehlo.while over the columns.
struct LU {
  Value lu;    // [..., m, n]: unit-lower L below the diagonal, U on and above
  Value perm;  // s32 [..., m]: row i of P A is row perm[i] of A
  Value piv;   // s32 [..., min(m, n)]: LAPACK's 1-based sequential swaps
  Value info;  // s32 [...]
};
LU lu_factor(Builder& b, Value A);
// LAPACK pivots (1-based sequential row swaps, s32 [..., k]) -> perm [..., m].
Value pivots_to_perm(Builder& b, Value piv, int64_t m);
// out[..., i, :] = x[..., perm[i], :].
Value permute_rows(Builder& b, Value x, Value perm);
// Permutation matrix P [..., m, m] with A = P (P^T A): P[r, c] = (perm[c] == r).
Value perm_matrix(Builder& b, Value perm, ElemType t);
// The inverse permutation (s32 [..., m]).
Value inverse_perm(Builder& b, Value perm);
// Solves A X = B (or A^T X = B when adjoint) from lu_factor's output; all
// operands share batch dims.
Value lu_solve(Builder& b, Value lu, Value perm, Value B, bool adjoint);
// The sign (+1/-1) of the permutation given by LAPACK pivots, as `t` [...].
Value pivots_sign(Builder& b, Value piv, ElemType t);

}  // namespace torch_tpu::ops::linalg
