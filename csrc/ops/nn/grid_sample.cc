// grid_sampler_2d / grid_sampler_3d and their backward kernels.
//
// Every interpolation mode is separable: along each spatial dim a sample
// reads K taps (nearest 1, bilinear 2, bicubic 4) with weights w_k(coord)
// whose derivatives dw_k are known in closed form. The lowering walks the
// K^nd tap combinations: the forward gathers input rows at the flat tap
// index and sums value * prod(w); the input gradient scatter-adds
// grad * prod(w) back; the grid gradient sums grad * value * dw_d * prod(w
// of the other dims), times d coord / d grid. Taps outside the input read
// as zero (they are clamped for the gather and masked out).
#include <torch/library.h>

#include <array>
#include <functional>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

enum Interp : int64_t { kBilinear = 0, kNearest = 1, kBicubic = 2 };
enum Padding : int64_t { kZeros = 0, kBorder = 1, kReflection = 2 };
constexpr double kCubicA = -0.75;

Value floor_(Builder& b, Value x) { return b.floor(x); }

struct Coord {
  Value x;     // source coordinate (float, [NO])
  Value mult;  // d x / d grid ([NO])
};

// clip to [0, size - 1]; gradient 1 inside (inclusive), 0 outside.
Coord clip(Builder& b, Coord c, int64_t size) {
  Value lo = full_like(b, 0, c.x), hi = full_like(b, static_cast<double>(size - 1), c.x);
  Value inside = b.and_(b.compare(c.x, lo, Direction::kGe), b.compare(c.x, hi, Direction::kLe));
  return {b.clamp(lo, c.x, hi), b.select(inside, c.mult, full_like(b, 0, c.x))};
}

// Reflects into [twice_low / 2, twice_high / 2], tracking the sign of the gradient.
Coord reflect(Builder& b, Coord c, int64_t twice_low, int64_t twice_high) {
  if (twice_low == twice_high) return {full_like(b, 0, c.x), full_like(b, 0, c.x)};
  double mn = twice_low / 2.0, span = (twice_high - twice_low) / 2.0;
  Value in = b.sub(c.x, full_like(b, mn, c.x));
  Value neg = b.compare(in, full_like(b, 0, in), Direction::kLt);
  Value sgn = b.select(neg, full_like(b, -1, in), full_like(b, 1, in));
  in = b.abs(in);
  Value spanv = full_like(b, span, in);
  Value extra = b.rem(in, spanv);
  Value flips = floor_(b, b.div(in, spanv));
  Value even = b.compare(b.rem(flips, full_like(b, 2, in)), full_like(b, 0, in), Direction::kEq);
  Value x = b.select(even, b.add(extra, full_like(b, mn, in)), b.add(b.sub(spanv, extra), full_like(b, mn, in)));
  Value m = b.select(even, sgn, b.neg(sgn));
  return {x, b.mul(c.mult, m)};
}

Coord pad_coord(Builder& b, Coord c, int64_t size, int64_t padding, bool align) {
  if (padding == kBorder) return clip(b, c, size);
  if (padding == kReflection) {
    c = align ? reflect(b, c, 0, 2 * (size - 1)) : reflect(b, c, -1, 2 * size - 1);
    return clip(b, c, size);
  }
  return c;
}

struct Tap {
  Value pos;    // integer-valued float position
  Value w, dw;  // weight and d weight / d coord
};

// cubic convolution kernels (PyTorch's A = -0.75) and their derivatives.
Value cc1(Builder& b, Value x) {  // |x| <= 1
  Value a2 = full_like(b, kCubicA + 2, x), a3 = full_like(b, kCubicA + 3, x);
  return b.add(b.mul(b.sub(b.mul(a2, x), a3), b.mul(x, x)), full_like(b, 1, x));
}
Value dcc1(Builder& b, Value x) {
  return b.sub(b.mul(full_like(b, 3 * (kCubicA + 2), x), b.mul(x, x)), b.mul(full_like(b, 2 * (kCubicA + 3), x), x));
}
Value cc2(Builder& b, Value x) {  // 1 < |x| < 2
  Value a = full_like(b, kCubicA, x);
  Value t = b.add(b.mul(b.sub(b.mul(a, x), full_like(b, 5 * kCubicA, x)), x), full_like(b, 8 * kCubicA, x));
  return b.sub(b.mul(t, x), full_like(b, 4 * kCubicA, x));
}
Value dcc2(Builder& b, Value x) {
  return b.add(b.sub(b.mul(full_like(b, 3 * kCubicA, x), b.mul(x, x)), b.mul(full_like(b, 10 * kCubicA, x), x)),
               full_like(b, 8 * kCubicA, x));
}

// Taps of one spatial dim for grid component `g` ([NO]); `mult` receives d coord / d grid.
std::vector<Tap> taps_for(Builder& b, Value g, int64_t size, int64_t interp, int64_t padding, bool align, Value* mult) {
  // Unnormalize from [-1, 1] to pixel coordinates.
  double scale = align ? (size - 1) / 2.0 : size / 2.0;
  Value x = align ? b.mul(b.add(g, full_like(b, 1, g)), full_like(b, scale, g))
                  : b.div(b.sub(b.mul(b.add(g, full_like(b, 1, g)), full_like(b, static_cast<double>(size), g)),
                                full_like(b, 1, g)),
                          full_like(b, 2, g));
  Coord c{x, full_like(b, scale, g)};
  if (interp != kBicubic) c = pad_coord(b, c, size, padding, align);
  *mult = c.mult;
  Value one_v = full_like(b, 1, g), zero_v = full_like(b, 0, g);
  if (interp == kNearest) return {{b.round_even(c.x), one_v, zero_v}};
  Value x0 = floor_(b, c.x);
  Value t = b.sub(c.x, x0);
  if (interp == kBilinear) return {{x0, b.sub(one_v, t), full_like(b, -1, g)}, {b.add(x0, one_v), t, one_v}};
  // Bicubic: taps x0-1..x0+2; the padding mode applies to each tap position.
  Value s = b.sub(one_v, t);
  Value tp1 = b.add(t, one_v), sp1 = b.add(s, one_v);
  std::vector<Value> w = {cc2(b, tp1), cc1(b, t), cc1(b, s), cc2(b, sp1)};
  std::vector<Value> dw = {dcc2(b, tp1), dcc1(b, t), b.neg(dcc1(b, s)), b.neg(dcc2(b, sp1))};
  std::vector<Tap> out;
  for (int k = 0; k < 4; ++k) {
    Value p = b.add(x0, full_like(b, k - 1, g));
    if (padding != kZeros) p = pad_coord(b, {p, one_v}, size, padding, align).x;
    // Truncate toward zero like CPU's integer cast.
    p = b.mul(b.sign(p), floor_(b, b.abs(p)));
    out.push_back({p, w[k], dw[k]});
  }
  return out;
}

struct Combo {
  Value idx;              // s64 flat row index into [N * S, C]
  Value valid;            // pred
  Value w;                // prod of weights
  std::vector<Value> dw;  // per spatial dim: dw_d * prod of the other weights
};

// All tap combinations for grid [NO, nd] over spatial sizes `sp` (D, H, W order).
std::vector<Combo> combos(Builder& b, Value grid, int64_t n, int64_t o, const Dims& sp, int64_t interp, int64_t padding,
                          bool align, std::vector<Value>* mults) {
  int64_t nd = sp.size(), no = n * o;
  int64_t st = 1;
  for (int64_t s : sp) st *= s;
  std::vector<std::vector<Tap>> taps(nd);
  mults->assign(nd, Value{});
  for (int64_t d = 0; d < nd; ++d) {
    int64_t comp = nd - 1 - d;  // grid's last dim is (x, y[, z]) = (W, H[, D])
    Value g = b.reshape(b.slice(grid, {0, comp}, {no, comp + 1}, {1, 1}), {no});
    taps[d] = taps_for(b, g, sp[d], interp, padding, align, &(*mults)[d]);
  }
  Value base = b.reshape(
      b.mul(b.iota({n, o}, 0, ElemType::kS64), b.constant(static_cast<double>(st), ElemType::kS64, {n, o})), {no});
  std::vector<Combo> out;
  std::vector<size_t> k(nd, 0);
  while (true) {
    Combo c;
    Value idx = base;
    Value valid;
    int64_t stride = st;
    for (int64_t d = 0; d < nd; ++d) {
      stride /= sp[d];
      Value p = taps[d][k[d]].pos;
      Value hi = full_like(b, static_cast<double>(sp[d] - 1), p), lo = full_like(b, 0, p);
      Value ok = b.and_(b.compare(p, lo, Direction::kGe), b.compare(p, hi, Direction::kLe));
      valid = d == 0 ? ok : b.and_(valid, ok);
      Value pi = b.convert(b.clamp(lo, p, hi), ElemType::kS64);
      idx = b.add(idx, b.mul(pi, b.constant(static_cast<double>(stride), ElemType::kS64, {no})));
    }
    c.idx = idx;
    c.valid = valid;
    for (int64_t d = 0; d < nd; ++d) {
      Value w = taps[d][k[d]].w;
      c.w = d == 0 ? w : b.mul(c.w, w);
      Value dd = taps[d][k[d]].dw;
      for (int64_t e = 0; e < nd; ++e)
        if (e != d) dd = b.mul(dd, taps[e][k[e]].w);
      c.dw.push_back(dd);
    }
    out.push_back(c);
    int64_t d = nd - 1;
    while (d >= 0 && ++k[d] == taps[d].size()) k[d--] = 0;
    if (d < 0) break;
  }
  return out;
}

struct Shapes {
  int64_t n, c, o, st;
  Dims sp, osp;
};
Shapes shapes_of(const at::Tensor& input, const at::Tensor& grid) {
  Shapes s;
  s.n = input.size(0);
  s.c = input.size(1);
  s.sp = Dims(input.sizes().begin() + 2, input.sizes().end());
  s.osp = Dims(grid.sizes().begin() + 1, grid.sizes().end() - 1);
  s.o = 1;
  for (int64_t v : s.osp) s.o *= v;
  s.st = 1;
  for (int64_t v : s.sp) s.st *= v;
  return s;
}

// [N, C, S...] -> [N * S, C]
Value rows_of(Builder& b, Value x, const Shapes& s) {
  int64_t nd = s.sp.size();
  Dims perm = {0};
  for (int64_t i = 0; i < nd; ++i) perm.push_back(2 + i);
  perm.push_back(1);
  return b.reshape(b.transpose(x, perm), {s.n * s.st, s.c});
}
// [N * O, C] -> [N, C, O...]
Value from_rows(Builder& b, Value r, int64_t n, int64_t c, const Dims& osp) {
  int64_t nd = osp.size();
  Dims d = {n};
  d.insert(d.end(), osp.begin(), osp.end());
  d.push_back(c);
  Dims perm = {0, nd + 1};
  for (int64_t i = 0; i < nd; ++i) perm.push_back(1 + i);
  return b.transpose(b.reshape(r, d), perm);
}
// [N, C, O...] -> [N * O, C]
Value to_rows(Builder& b, Value x, int64_t no, int64_t c, int64_t nd) {
  Dims perm = {0};
  for (int64_t i = 0; i < nd; ++i) perm.push_back(2 + i);
  perm.push_back(1);
  return b.reshape(b.transpose(x, perm), {no, c});
}

void check_grid(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding, int64_t nd) {
  TORCH_CHECK(input.scalar_type() == grid.scalar_type(), "grid_sampler(): expected input and grid to have same dtype, ",
              "but input has ", input.scalar_type(), " and grid has ", grid.scalar_type());
  TORCH_CHECK(input.dim() == nd + 2 && input.dim() == grid.dim(), "grid_sampler(): expected ", nd + 2,
              "D input and grid with same number of dimensions, but got input with sizes ", input.sizes(),
              " and grid with sizes ", grid.sizes());
  TORCH_CHECK(input.size(0) == grid.size(0), "grid_sampler(): expected grid and input to have same batch size, ",
              "but got input with sizes ", input.sizes(), " and grid with sizes ", grid.sizes());
  TORCH_CHECK(grid.size(-1) == nd, "grid_sampler(): expected grid to have size ", nd, " in last dimension, ",
              "but got grid with sizes ", grid.sizes());
  for (int64_t i = 2; i < input.dim(); ++i)
    TORCH_CHECK(input.size(i) > 0, "grid_sampler(): expected input to have non-empty spatial dimensions, ",
                "but input has sizes ", input.sizes(), " with dimension ", i, " being empty");
  TORCH_CHECK(interp >= 0 && interp <= (nd == 2 ? 2 : 1), "grid_sampler(): ",
              interp == kBicubic ? "bicubic interpolation only supports 4D input" : "invalid interpolation mode");
  TORCH_CHECK(padding >= 0 && padding <= 2, "grid_sampler(): invalid padding mode ", padding);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(input.scalar_type()), "\"grid_sampler\" not implemented for '",
                              c10::toString(input.scalar_type()), "'");
}

template <int64_t kNd>
at::Tensor grid_sampler(const at::Tensor& input, const at::Tensor& grid, int64_t interp, int64_t padding, bool align) {
  check_grid(input, grid, interp, padding, kNd);
  Shapes s = shapes_of(input, grid);
  std::vector<int64_t> shape = {s.n, s.c};
  shape.insert(shape.end(), s.osp.begin(), s.osp.end());
  at::Tensor out = empty_tpu(shape, input.scalar_type(), input.device());
  if (out.numel() == 0) return out;
  auto ct = opmath(input.scalar_type());
  ElemType e = to_elem(ct);
  int64_t no = s.n * s.o;
  record::OpCall call(kNd == 2 ? "grid_sampler_2d" : "grid_sampler_3d");
  call.attr(interp).attr(padding).attr(align).attr(static_cast<int64_t>(ct));
  call.input(input);
  call.input(grid);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value rows = rows_of(b, b.convert(in[0], e), s);
    Value g = b.reshape(b.convert(in[1], e), {no, kNd});
    std::vector<Value> mults;
    auto cs = combos(b, g, s.n, s.o, s.sp, interp, padding, align, &mults);
    Dims rc = {no, s.c};
    Value acc = zero(b, e, rc);
    for (auto& c : cs) {
      Value v = gather_rows(b, rows, c.idx);
      Value w = b.broadcast_in_dim(b.select(c.valid, c.w, full_like(b, 0, c.w)), rc, {0});
      v = b.select(b.broadcast_in_dim(c.valid, rc, {0}), v, zero(b, e, rc));
      acc = b.add(acc, b.mul(v, w));
    }
    return Values{from_rows(b, acc, s.n, s.c, s.osp)};
  });
  return out;
}

template <int64_t kNd>
std::tuple<at::Tensor, at::Tensor> grid_sampler_backward(const at::Tensor& grad, const at::Tensor& input,
                                                         const at::Tensor& grid, int64_t interp, int64_t padding,
                                                         bool align, std::array<bool, 2> output_mask) {
  check_grid(input, grid, interp, padding, kNd);
  Shapes s = shapes_of(input, grid);
  bool want_input = output_mask[0];
  at::Tensor gi = want_input ? empty_like_tpu(input) : at::Tensor();
  at::Tensor gg = empty_like_tpu(grid);
  int64_t no = s.n * s.o;
  if (no == 0 || s.c == 0) {
    if (want_input) gi.zero_();
    gg.zero_();
    return {gi, gg};
  }
  auto ct = opmath(input.scalar_type());
  ElemType e = to_elem(ct);
  record::OpCall call(kNd == 2 ? "grid_sampler_2d_backward" : "grid_sampler_3d_backward");
  call.attr(interp).attr(padding).attr(align).attr(want_input).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(input);
  call.input(grid);
  if (want_input) call.output(gi);
  call.output(gg);
  Dims gd(grid.sizes().begin(), grid.sizes().end());
  Dims id(input.sizes().begin(), input.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    Dims rc = {no, s.c};
    Value go = to_rows(b, b.convert(in[0], e), no, s.c, kNd);
    Value rows = rows_of(b, b.convert(in[1], e), s);
    Value g = b.reshape(b.convert(in[2], e), {no, kNd});
    std::vector<Value> mults;
    auto cs = combos(b, g, s.n, s.o, s.sp, interp, padding, align, &mults);
    Value gin = zero(b, e, {s.n * s.st, s.c});
    std::vector<Value> ggd(kNd, zero(b, e, {no}));
    for (auto& c : cs) {
      Value validb = b.broadcast_in_dim(c.valid, rc, {0});
      if (want_input) {
        Value w = b.broadcast_in_dim(b.select(c.valid, c.w, full_like(b, 0, c.w)), rc, {0});
        gin = scatter_rows(b, gin, c.idx, b.mul(go, w), BinaryOp::kAdd);
      }
      if (interp == kNearest) continue;
      Value v = b.select(validb, gather_rows(b, rows, c.idx), zero(b, e, rc));
      Value gv = b.reduce(b.mul(go, v), zero(b, e), {1}, BinaryOp::kAdd);
      for (int64_t d = 0; d < kNd; ++d) ggd[d] = b.add(ggd[d], b.mul(gv, c.dw[d]));
    }
    std::vector<Value> comps(kNd);
    for (int64_t d = 0; d < kNd; ++d) comps[kNd - 1 - d] = b.reshape(b.mul(ggd[d], mults[d]), {no, 1});
    Value ggv = b.reshape(b.concatenate(comps, 1), gd);
    Values outs;
    if (want_input) {
      int64_t nd = kNd;
      Dims d = {s.n};
      d.insert(d.end(), s.sp.begin(), s.sp.end());
      d.push_back(s.c);
      Dims perm = {0, nd + 1};
      for (int64_t i = 0; i < nd; ++i) perm.push_back(1 + i);
      outs.push_back(b.transpose(b.reshape(gin, d), perm));
    }
    outs.push_back(ggv);
    return outs;
  });
  return {gi, gg};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("grid_sampler_2d", grid_sampler<2>);
  m.impl("grid_sampler_2d_backward", grid_sampler_backward<2>);
  m.impl("grid_sampler_3d", grid_sampler<3>);
  m.impl("grid_sampler_3d_backward", grid_sampler_backward<3>);
}

}  // namespace
}  // namespace torch_tpu::ops
