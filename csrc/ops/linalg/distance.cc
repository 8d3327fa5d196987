// Pairwise p-norm distances: _cdist_forward/_cdist_backward (x1 rows against
// x2 rows, batched) and _pdist_forward/_pdist_backward (rows of one matrix,
// pairs i < j in row-major order). Distances are computed directly from the
// differences (no matmul expansion), in the opmath type.
#include <torch/library.h>

#include <cmath>
#include <vector>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

// Which formula a p selects (a compile-time attribute; p itself is a runtime scalar).
enum PMode : int64_t { kZero, kOne, kLtTwo, kTwo, kInf, kGeneral };
int64_t p_mode(double p) {
  if (p == 0) return kZero;
  if (p == 1) return kOne;
  if (std::isinf(p)) return kInf;
  if (p < 2) return kLtTwo;
  if (p == 2) return kTwo;
  return kGeneral;
}

// p-norm of `diff` over dimension `dim`; `p` is a scalar broadcastable value.
Value norm_over(Builder& b, Value diff, int64_t dim, int64_t mode, Value p) {
  ElemType e = b.elem(diff);
  Value a = b.abs(diff);
  switch (mode) {
    case kZero: {
      Value nz = b.select(b.compare(diff, full_like(b, 0, diff), Direction::kNe), full_like(b, 1, diff),
                          full_like(b, 0, diff));
      return b.reduce(nz, zero(b, e), {dim}, BinaryOp::kAdd);
    }
    case kOne:
      return b.reduce(a, zero(b, e), {dim}, BinaryOp::kAdd);
    case kTwo:
      return b.sqrt(b.reduce(b.mul(diff, diff), zero(b, e), {dim}, BinaryOp::kAdd));
    case kInf:
      return b.reduce(a, zero(b, e), {dim}, BinaryOp::kMax);
    default: {
      Value s = b.reduce(b.pow(a, b.broadcast_to(p, b.dims(a))), zero(b, e), {dim}, BinaryOp::kAdd);
      Value inv = b.div(one(b, e, b.dims(s)), b.broadcast_to(p, b.dims(s)));
      return b.pow(s, inv);
    }
  }
}

// d dist / d x1 times grad, elementwise; g and dist already broadcast to diff's shape.
Value dist_grad(Builder& b, Value diff, Value g, Value dist, int64_t mode, Value p0) {
  Value zero_v = full_like(b, 0, diff);
  Value sgn = b.sign(diff);
  Value a = b.abs(diff);
  Value p = b.broadcast_to(p0, b.dims(diff));
  Value dist0 = b.compare(dist, zero_v, Direction::kEq);
  switch (mode) {
    case kZero:
      return zero_v;
    case kOne:
      return b.mul(g, sgn);
    case kTwo:
      return b.select(dist0, zero_v, b.div(b.mul(g, diff), dist));
    case kInf:
      return b.select(b.compare(a, dist, Direction::kEq), b.mul(g, sgn), zero_v);
    case kLtTwo: {
      Value pm1 = b.sub(p, full_like(b, 1, p));
      Value r = b.div(b.mul(b.mul(sgn, b.pow(a, pm1)), g), b.pow(dist, pm1));
      Value bad = b.or_(
          dist0, b.and_(b.compare(diff, zero_v, Direction::kEq), b.compare(p, full_like(b, 1, p), Direction::kLt)));
      return b.select(bad, zero_v, r);
    }
    default: {
      Value r = b.div(b.mul(b.mul(diff, b.pow(a, b.sub(p, full_like(b, 2, p)))), g),
                      b.pow(dist, b.sub(p, full_like(b, 1, p))));
      return b.select(dist0, zero_v, r);
    }
  }
}

// --- cdist -------------------------------------------------------------------------------

void check_cdist(const at::Tensor& x1, const at::Tensor& x2, double p) {
  TORCH_CHECK(x1.dim() >= 2, "cdist only supports at least 2D tensors, X1 got: ", x1.dim(), "D");
  TORCH_CHECK(x2.dim() >= 2, "cdist only supports at least 2D tensors, X2 got: ", x2.dim(), "D");
  TORCH_CHECK(x1.size(-1) == x2.size(-1), "X1 and X2 must have the same number of columns. X1: ", x1.size(-1),
              " X2: ", x2.size(-1));
  TORCH_CHECK(at::isFloatingType(x1.scalar_type()),
              "cdist only supports floating-point dtypes, X1 got: ", x1.scalar_type());
  TORCH_CHECK(at::isFloatingType(x2.scalar_type()),
              "cdist only supports floating-point dtypes, X2 got: ", x2.scalar_type());
  TORCH_CHECK(p >= 0, "cdist only supports non-negative p values");
}

std::vector<int64_t> batch_shape(const at::Tensor& x1, const at::Tensor& x2) {
  std::vector<int64_t> b1(x1.sizes().begin(), x1.sizes().end() - 2), b2(x2.sizes().begin(), x2.sizes().end() - 2);
  // Trailing-aligned broadcast of the batch dims.
  size_t n = std::max(b1.size(), b2.size());
  std::vector<int64_t> out(n, 1);
  for (size_t i = 0; i < n; ++i) {
    int64_t a = i < n - b1.size() ? 1 : b1[i - (n - b1.size())];
    int64_t c = i < n - b2.size() ? 1 : b2[i - (n - b2.size())];
    TORCH_CHECK(a == c || a == 1 || c == 1, "The size of tensor a (", a, ") must match the size of tensor b (", c,
                ") at non-singleton dimension ", i);
    out[i] = a == 1 ? c : a;
  }
  return out;
}

int64_t prod(const std::vector<int64_t>& v) {
  int64_t r = 1;
  for (int64_t x : v) r *= x;
  return r;
}

// x ([..., n, m]) broadcast to [batch..., n, m] and flattened to [B, n, m].
Value batch_flat(Builder& b, Value x, const std::vector<int64_t>& batch) {
  Dims d = b.dims(x);
  int64_t n = d[d.size() - 2], m = d.back();
  Dims full(batch.begin(), batch.end());
  full.push_back(n);
  full.push_back(m);
  return b.reshape(b.broadcast_to(x, full), {prod(batch), n, m});
}

at::Tensor cdist_forward(const at::Tensor& x1, const at::Tensor& x2, double p, std::optional<int64_t> compute_mode) {
  check_cdist(x1, x2, p);
  TORCH_CHECK(!compute_mode.has_value() || (*compute_mode >= 0 && *compute_mode <= 2),
              "possible modes: None, 1, 2, but was: ", *compute_mode);
  auto batch = batch_shape(x1, x2);
  int64_t P = x1.size(-2), R = x2.size(-2), M = x1.size(-1);
  std::vector<int64_t> shape = batch;
  shape.push_back(P);
  shape.push_back(R);
  auto dt = x1.scalar_type();
  at::Tensor out = empty_tpu(shape, dt, x1.device());
  if (out.numel() == 0) return out;
  int64_t mode = p_mode(p);
  auto ct = opmath(dt);
  ElemType e = to_elem(ct);
  int64_t B = prod(batch);
  record::OpCall call("_cdist_forward");
  call.attr(mode).attr(static_cast<int64_t>(ct)).attr(c10::IntArrayRef(batch));
  call.input(x1);
  call.input(x2);
  call.scalar(p, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value a = batch_flat(b, b.convert(in[0], e), batch);
    Value c = batch_flat(b, b.convert(in[1], e), batch);
    Dims full = {B, P, R, M};
    Value diff = b.sub(b.broadcast_in_dim(a, full, {0, 1, 3}), b.broadcast_in_dim(c, full, {0, 2, 3}));
    Value d = norm_over(b, diff, 3, mode, in[2]);
    return Values{b.reshape(d, Dims(shape.begin(), shape.end()))};
  });
  return out;
}

at::Tensor cdist_backward(const at::Tensor& grad, const at::Tensor& x1, const at::Tensor& x2, double p,
                          const at::Tensor& cdist) {
  check_cdist(x1, x2, p);
  auto batch = batch_shape(x1, x2);
  int64_t P = x1.size(-2), R = x2.size(-2), M = x1.size(-1);
  std::vector<int64_t> shape = batch;
  shape.push_back(P);
  shape.push_back(M);
  auto dt = x1.scalar_type();
  at::Tensor out = empty_tpu(shape, dt, x1.device());
  if (out.numel() == 0) return out;
  int64_t mode = p_mode(p);
  auto ct = opmath(dt);
  ElemType e = to_elem(ct);
  int64_t B = prod(batch);
  record::OpCall call("_cdist_backward");
  call.attr(mode).attr(static_cast<int64_t>(ct)).attr(c10::IntArrayRef(batch));
  call.input(grad);
  call.input(x1);
  call.input(x2);
  call.input(cdist);
  call.scalar(p, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Dims full = {B, P, R, M};
    Dims od(shape.begin(), shape.end());
    if (R == 0 || mode == kZero) return Values{zero(b, e, od)};
    Value g = batch_flat(b, b.convert(in[0], e), batch);
    Value a = batch_flat(b, b.convert(in[1], e), batch);
    Value c = batch_flat(b, b.convert(in[2], e), batch);
    Value dist = batch_flat(b, b.convert(in[3], e), batch);
    Value diff = b.sub(b.broadcast_in_dim(a, full, {0, 1, 3}), b.broadcast_in_dim(c, full, {0, 2, 3}));
    Value t = dist_grad(b, diff, b.broadcast_in_dim(g, full, {0, 1, 2}), b.broadcast_in_dim(dist, full, {0, 1, 2}),
                        mode, in[4]);
    return Values{b.reshape(b.reduce(t, zero(b, e), {2}, BinaryOp::kAdd), od)};
  });
  return out;
}

// --- pdist -------------------------------------------------------------------------------

void check_pdist(const at::Tensor& self, double p) {
  TORCH_CHECK(self.dim() == 2, "pdist only supports 2D tensors, got: ", self.dim(), "D");
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), "pdist only supports floating-point dtypes");
  TORCH_CHECK(p >= 0, "pdist only supports non-negative p values");
}

// Row indices (i, j), i < j, of every pair, as a tpu tensor [K, 2].
at::Tensor pair_indices(int64_t n, c10::Device dev) {
  std::vector<int64_t> host;
  host.reserve(n * (n - 1));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = i + 1; j < n; ++j) {
      host.push_back(i);
      host.push_back(j);
    }
  int64_t k = static_cast<int64_t>(host.size()) / 2;
  at::Tensor t = empty_tpu({k, 2}, c10::kLong, dev);
  record::copy_from_host(t, host.data(), host.size() * sizeof(int64_t));
  return t;
}

Value column(Builder& b, Value ij, int64_t c) {
  int64_t k = b.dims(ij)[0];
  return b.reshape(b.slice(ij, {0, c}, {k, c + 1}, {1, 1}), {k});
}

at::Tensor pdist_forward(const at::Tensor& self, double p) {
  check_pdist(self, p);
  int64_t N = self.size(0), M = self.size(1);
  int64_t K = N * (N - 1) / 2;
  at::Tensor out = empty_tpu({K}, self.scalar_type(), self.device());
  if (K == 0) return out;
  int64_t mode = p_mode(p);
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  at::Tensor ij = pair_indices(N, self.device());
  record::OpCall call("_pdist_forward");
  call.attr(mode).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(ij);
  call.scalar(p, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    if (M == 0) return Values{zero(b, e, {K})};
    Value x = b.convert(in[0], e);
    Value diff = b.sub(gather_rows(b, x, column(b, in[1], 0)), gather_rows(b, x, column(b, in[1], 1)));
    return Values{norm_over(b, diff, 1, mode, in[2])};
  });
  return out;
}

at::Tensor pdist_backward(const at::Tensor& grad, const at::Tensor& self, double p, const at::Tensor& pdist) {
  check_pdist(self, p);
  int64_t N = self.size(0), M = self.size(1);
  int64_t K = N * (N - 1) / 2;
  at::Tensor out = empty_like_tpu(self);
  if (out.numel() == 0) return out;
  int64_t mode = p_mode(p);
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  if (K == 0 || mode == kZero) {
    record::OpCall call("_pdist_backward_zeros");
    call.output(out);
    call.run([&](Builder& b, const Values&) { return Values{zero(b, e, {N, M})}; });
    return out;
  }
  at::Tensor ij = pair_indices(N, self.device());
  record::OpCall call("_pdist_backward");
  call.attr(mode).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(self);
  call.input(pdist);
  call.input(ij);
  call.scalar(p, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[1], e);
    Value i = column(b, in[3], 0), j = column(b, in[3], 1);
    Value diff = b.sub(gather_rows(b, x, i), gather_rows(b, x, j));
    Dims kd = {K, M};
    Value g = b.broadcast_in_dim(b.convert(in[0], e), kd, {0});
    Value dist = b.broadcast_in_dim(b.convert(in[2], e), kd, {0});
    Value t = dist_grad(b, diff, g, dist, mode, in[4]);
    Value r = scatter_rows(b, zero(b, e, {N, M}), i, t, BinaryOp::kAdd);
    r = scatter_rows(b, r, j, b.neg(t), BinaryOp::kAdd);
    return Values{r};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_cdist_forward", cdist_forward);
  m.impl("_cdist_backward", cdist_backward);
  m.impl("_pdist_forward", pdist_forward);
  m.impl("_pdist_backward", pdist_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
