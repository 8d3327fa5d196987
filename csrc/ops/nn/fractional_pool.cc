// fractional_max_pool2d / fractional_max_pool3d (+ backward). Window starts
// come from the caller's random samples with CPU's interval rule
//   start[i] = int((i + u) * alpha) - int(u * alpha), alpha = (in - k) / (out - 1),
// the last window ending at the input edge. The lowering visits the k^nd
// window offsets, gathering each from the flattened input and keeping the
// first maximum (NaN wins, as on CPU) and its flat index in the plane.
// Backward scatter-adds the gradient at those indices.
#include <torch/library.h>

#include <limits>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

template <int64_t kNd>
const char* pool_name() {
  return kNd == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
}

template <int64_t kNd>
void check_args(const at::Tensor& self, c10::IntArrayRef k, c10::IntArrayRef os, const at::Tensor* samples) {
  const char* name = pool_name<kNd>();
  TORCH_CHECK(static_cast<int64_t>(k.size()) == kNd, name, ": kernel_size must either be a single Int or tuple of ",
              kNd, " Ints");
  TORCH_CHECK(static_cast<int64_t>(os.size()) == kNd, name, ": output_size must either be a single Int or tuple of ",
              kNd, " Ints");
  TORCH_CHECK(self.dim() == kNd + 1 || self.dim() == kNd + 2, name, "(): Expected ", kNd + 1, "D or ", kNd + 2,
              "D tensor, but got: ", self.sizes());
  for (int64_t i = self.dim() == kNd + 2 ? 1 : 0; i < self.dim(); ++i)
    TORCH_CHECK(self.size(i) > 0, name, "(): Expected input to have non-zero size for non-batch dimensions, but got",
                self.sizes(), " with dimension ", i, " being empty.");
  int64_t off = self.dim() - kNd;
  static const char* dim_names[3] = {"time", "height", "width"};
  for (int64_t d = 0; d < kNd; ++d) {
    const char* dn = dim_names[3 - kNd + d];
    TORCH_CHECK(k[d] > 0 && os[d] > 0, name, "(): kernel and output sizes must be positive");
    TORCH_CHECK(os[d] + k[d] - 1 <= self.size(off + d), name, "(): pool ", dn, " ", k[d],
                " too large relative to input ", dn, " ", self.size(off + d));
  }
  if (samples) {
    int64_t n = self.dim() == kNd + 2 ? self.size(0) : 1, c = self.size(off - 1);
    TORCH_CHECK(samples->scalar_type() == self.scalar_type(), "Expect _random_samples to have the same dtype as input");
    TORCH_CHECK(samples->dim() == 3, "Expect _random_samples to be 3D tensor, got: ", samples->dim(), "D");
    TORCH_CHECK(samples->size(0) >= n, "Expect _random_samples.size(0) no less then input batch size.");
    TORCH_CHECK(samples->size(1) == c, "Expect _random_samples.size(1) equals to input channel size.");
    TORCH_CHECK(samples->size(2) == kNd, "Expect _random_samples.size(2) equals to ", kNd, "; got ", samples->size(2),
                ".");
  }
}

struct Geometry {
  int64_t b, c, st, ot;
  Dims sp, osp, k;
};
template <int64_t kNd>
Geometry geometry(const at::Tensor& self, c10::IntArrayRef k, c10::IntArrayRef os) {
  Geometry g;
  bool batched = self.dim() == kNd + 2;
  g.b = batched ? self.size(0) : 1;
  g.c = self.size(self.dim() - kNd - 1);
  g.sp = Dims(self.sizes().end() - kNd, self.sizes().end());
  g.osp = Dims(os.begin(), os.end());
  g.k = Dims(k.begin(), k.end());
  g.st = g.ot = 1;
  for (int64_t v : g.sp) g.st *= v;
  for (int64_t v : g.osp) g.ot *= v;
  return g;
}

// Window starts along spatial dim d, shaped [B, C, O...] (s64).
template <int64_t kNd>
Value starts(Builder& b, Value samples, const Geometry& g, int64_t d) {
  Dims full = {g.b, g.c};
  full.insert(full.end(), g.osp.begin(), g.osp.end());
  int64_t in = g.sp[d], out = g.osp[d], k = g.k[d];
  Value last = b.constant(static_cast<double>(in - k), ElemType::kS64, full);
  if (out == 1) return last;
  // 2d samples are (w, h); 3d samples are (t, h, w).
  int64_t comp = kNd == 2 ? 1 - d : d;
  Value u = b.reshape(b.slice(samples, {0, 0, comp}, {g.b, g.c, comp + 1}, {1, 1, 1}), {g.b, g.c});
  u = b.broadcast_in_dim(u, full, {0, 1});
  Value alpha = b.constant(static_cast<float>(in - k) / static_cast<float>(out - 1), ElemType::kF32, full);
  Value i = b.iota(full, 2 + d, ElemType::kF32);
  Value a = b.convert(b.mul(b.add(i, u), alpha), ElemType::kS64);
  Value s = b.convert(b.mul(u, alpha), ElemType::kS64);
  Value seq = b.sub(a, s);
  return b.select(
      b.compare(b.iota(full, 2 + d, ElemType::kS64), b.constant(out - 1, ElemType::kS64, full), Direction::kEq), last,
      seq);
}

// The first maximum of each window (NaN wins) and its flat index in the plane.
template <int64_t kNd>
Values fractional_max_lower(Builder& b, Value x, Value samples, const Geometry& g, const Dims& od, ElemType e) {
  Dims full = {g.b, g.c};
  full.insert(full.end(), g.osp.begin(), g.osp.end());
  int64_t n = g.b * g.c * g.ot;
  Value flat = b.reshape(x, {g.b * g.c * g.st, 1});
  Value smp = b.convert(b.slice(samples, {0, 0, 0}, {g.b, g.c, kNd}, {1, 1, 1}), ElemType::kF32);
  std::vector<Value> st(kNd);
  for (int64_t d = 0; d < kNd; ++d) st[d] = starts<kNd>(b, smp, g, d);
  Value plane = b.mul(b.add(b.mul(b.iota(full, 0, ElemType::kS64), b.constant(g.c, ElemType::kS64, full)),
                            b.iota(full, 1, ElemType::kS64)),
                      b.constant(static_cast<double>(g.st), ElemType::kS64, full));
  Value best = b.constant(-std::numeric_limits<double>::infinity(), e, full);
  Value best_idx;
  std::vector<int64_t> off(kNd, 0);
  bool first = true;
  while (true) {
    Value idx = b.constant(0, ElemType::kS64, full);
    for (int64_t d = 0; d < kNd; ++d) {
      Value p = b.add(st[d], b.constant(off[d], ElemType::kS64, full));
      idx = b.add(b.mul(idx, b.constant(g.sp[d], ElemType::kS64, full)), p);
    }
    if (first) best_idx = idx;
    first = false;
    Value v = b.reshape(gather_rows(b, flat, b.reshape(b.add(plane, idx), {n})), full);
    Value take = b.or_(b.compare(v, best, Direction::kGt), b.compare(v, v, Direction::kNe));
    best = b.select(take, v, best);
    best_idx = b.select(take, idx, best_idx);
    int64_t d = kNd - 1;
    while (d >= 0 && ++off[d] == g.k[d]) off[d--] = 0;
    if (d < 0) break;
  }
  return Values{b.reshape(best, od), b.reshape(best_idx, od)};
}

struct FracMeta : PairMeta {
  Geometry g;
};

// Output and indices, each out= of exactly its dtype (CPU's structured kernel).
template <int64_t kNd>
struct FractionalMaxPool {
  static constexpr const char* kName = kNd == 2 ? "fractional_max_pool2d" : "fractional_max_pool3d";
  static FracMeta meta(const at::Tensor& self, c10::IntArrayRef k, c10::IntArrayRef os, const at::Tensor& samples) {
    check_args<kNd>(self, k, os, &samples);
    FracMeta m;
    m.g = geometry<kNd>(self, k, os);
    std::vector<int64_t> shape(self.sizes().begin(), self.sizes().end() - kNd);
    shape.insert(shape.end(), os.begin(), os.end());
    static_cast<PairMeta&>(m) = values_and_indices(self, shape);
    return m;
  }
  static void impl(const at::Tensor& out, const at::Tensor& indices, const FracMeta& m, const at::Tensor& self,
                   c10::IntArrayRef k, c10::IntArrayRef os, const at::Tensor& samples) {
    if (out.numel() == 0) return;
    const Geometry& g = m.g;
    const std::vector<int64_t>& shape = m.results[0].sizes;
    ElemType e = to_elem(self.scalar_type());
    record::OpCall call(pool_name<kNd>());
    call.attr(k).attr(os);
    call.input(self);
    call.input(samples);
    call.output(out);
    call.output(indices);
    Dims od(shape.begin(), shape.end());
    call.run([&](Builder& b, const Values& in) { return fractional_max_lower<kNd>(b, in[0], in[1], g, od, e); });
  }
};

struct FracBackwardMeta : OutMeta {
  Geometry g;
};

template <int64_t kNd>
struct FractionalMaxPoolBackward {
  static constexpr const char* kName = kNd == 2 ? "fractional_max_pool2d_backward" : "fractional_max_pool3d_backward";
  static FracBackwardMeta meta(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef k, c10::IntArrayRef os,
                               const at::Tensor& indices) {
    check_args<kNd>(self, k, os, nullptr);
    FracBackwardMeta m;
    m.g = geometry<kNd>(self, k, os);
    const Geometry& g = m.g;
    TORCH_CHECK(grad.numel() == g.b * g.c * g.ot && indices.numel() == grad.numel(), pool_name<kNd>(),
                "_backward(): gradOutput and indices must match the output size");
    static_cast<OutMeta&>(m) =
        OutMeta{self.sizes().vec(), grad.scalar_type(), grad.device(), OutDtype::kCastable, false};
    return m;
  }
  static void impl(const at::Tensor& gi, const FracBackwardMeta& m, const at::Tensor& grad, const at::Tensor& self,
                   c10::IntArrayRef k, c10::IntArrayRef os, const at::Tensor& indices) {
    if (gi.numel() == 0) return;
    const Geometry& g = m.g;
    auto ct = opmath(grad.scalar_type());
    ElemType e = to_elem(ct);
    record::OpCall call("fractional_max_pool_backward");
    call.attr(k).attr(os).attr(static_cast<int64_t>(ct));
    call.input(grad);
    call.input(indices);
    call.output(gi);
    Dims sd(self.sizes().begin(), self.sizes().end());
    call.run([&](Builder& b, const Values& in) {
      int64_t n = g.b * g.c * g.ot;
      Dims bco = {g.b * g.c, g.ot};
      Value plane = b.mul(b.iota(bco, 0, ElemType::kS64), b.constant(static_cast<double>(g.st), ElemType::kS64, bco));
      Value idx = b.reshape(b.add(plane, b.reshape(b.convert(in[1], ElemType::kS64), bco)), {n});
      Value upd = b.reshape(b.convert(in[0], e), {n, 1});
      Value r = scatter_rows(b, zero(b, e, {g.b * g.c * g.st, 1}), idx, upd, BinaryOp::kAdd);
      return Values{b.reshape(r, sd)};
    });
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<FractionalMaxPool<2>>(m, {"fractional_max_pool2d", "", "fractional_max_pool2d.output"});
  register_variants<FractionalMaxPool<3>>(m, {"fractional_max_pool3d", "", "fractional_max_pool3d.output"});
  register_variants<FractionalMaxPoolBackward<2>>(
      m, {"fractional_max_pool2d_backward", "", "fractional_max_pool2d_backward.grad_input"});
  register_variants<FractionalMaxPoolBackward<3>>(
      m, {"fractional_max_pool3d_backward", "", "fractional_max_pool3d_backward.grad_input"});
}

}  // namespace
}  // namespace torch_tpu::ops
