// renorm: each slice along `dim` whose p-norm exceeds maxnorm is scaled by
// maxnorm / (norm + 1e-7), computed in the accumulate type (PyTorch keeps it
// with the normalization ops).
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

// --- renorm ------------------------------------------------------------------------------
// Each slice along `dim` whose p-norm exceeds maxnorm is scaled by
// maxnorm / (norm + 1e-7), computed in the accumulate type.
at::Tensor& renorm_out(const at::Tensor& self, const c10::Scalar& p_s, int64_t dim, const c10::Scalar& maxnorm_s,
                       at::Tensor& out) {
  double p = p_s.toDouble(), maxnorm = maxnorm_s.toDouble();
  TORCH_CHECK(!p_s.isComplex(), "renorm: p must be real-valued");
  TORCH_CHECK(p > 0, "renorm: non-positive-norm not supported");
  TORCH_CHECK(!maxnorm_s.isComplex(), "renorm: maxnorm must be real-valued");
  TORCH_CHECK(maxnorm >= 0, "renorm: expected maxnorm to be >= 0 but got ", maxnorm);
  TORCH_CHECK(self.dim() > 1, "renorm: input needs at least 2 dimensions, got ", self.dim(), " dimensions");
  check_float(self, "renorm_out");
  int64_t d0 = wrap_dim(dim, self.dim());
  prepare_out(out, self.sizes(), self.scalar_type(), "renorm");
  if (self.numel() == 0) return out;
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  Dims d = dims_of(self);
  int64_t mode = std::isinf(p) ? 0 : (p == 1 ? 1 : (p == 2 ? 2 : 3));
  record::OpCall call("renorm");
  call.attr(d0).attr(mode).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.scalar(p, ct);
  call.scalar(maxnorm, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], e);
    Value a = b.abs(x);
    Dims red;
    for (int64_t i = 0; i < (int64_t)d.size(); ++i)
      if (i != d0) red.push_back(i);
    Value n;
    if (mode == 0) {
      n = b.reduce(a, zero(b, e), red, BinaryOp::kMax);
    } else if (mode == 1) {
      n = b.reduce(a, zero(b, e), red, BinaryOp::kAdd);
    } else if (mode == 2) {
      n = b.sqrt(b.reduce(b.mul(x, x), zero(b, e), red, BinaryOp::kAdd));
    } else {
      Value pv = b.broadcast_to(in[1], d);
      Value s = b.reduce(b.pow(a, pv), zero(b, e), red, BinaryOp::kAdd);
      n = b.pow(s, b.div(one(b, e, b.dims(s)), b.broadcast_to(in[1], b.dims(s))));
    }
    Value mx = b.broadcast_to(in[2], b.dims(n));
    Value factor =
        b.select(b.compare(n, mx, Direction::kGt), b.div(mx, b.add(n, full_like(b, 1e-7, n))), one(b, e, b.dims(n)));
    return Values{b.mul(x, b.broadcast_in_dim(factor, d, {d0}))};
  });
  return out;
}
at::Tensor renorm(const at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  at::Tensor out = empty_like_tpu(self);
  return renorm_out(self, p, dim, maxnorm, out);
}
at::Tensor& renorm_(at::Tensor& self, const c10::Scalar& p, int64_t dim, const c10::Scalar& maxnorm) {
  return renorm_out(self, p, dim, maxnorm, self);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("renorm", renorm);
  m.impl("renorm.out", renorm_out);
  m.impl("renorm_", renorm_);
}

}  // namespace
}  // namespace torch_tpu::ops
