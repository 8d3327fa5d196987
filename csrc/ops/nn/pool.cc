// Pooling: max (with indices), average and adaptive average/max pooling in
// 1-3 spatial dimensions, forward and backward. The 1-d forms and the
// index-free max_pool / adaptive_avg_pool wrappers are composite in ATen
// and reach the kernels here.
//
// Every pooling window is a product of 1-d windows, one per spatial dim, so
// the lowerings are separable: each spatial dim is reduced in turn by
// gathering one window slot at a time (pos = o*stride - pad + j*dilation,
// or the adaptive start(o) + j) and combining, with a validity mask for
// padding and ragged adaptive windows. Max keeps PyTorch CPU's choice
// among ties (the first maximum in row-major order, a NaN always wins) by
// reducing the innermost dim first. Backward passes scatter-add: by the
// flat per-plane indices for max, slot by slot for average.
//
// Argument checks and output shapes come from ATen's own meta kernels, run
// on meta tensors, so errors and ceil_mode sizes match PyTorch exactly.
#include <ATen/ops/_adaptive_avg_pool2d.h>
#include <ATen/ops/_adaptive_avg_pool2d_backward.h>
#include <ATen/ops/_adaptive_avg_pool3d.h>
#include <ATen/ops/_adaptive_avg_pool3d_backward.h>
#include <ATen/ops/adaptive_max_pool2d.h>
#include <ATen/ops/adaptive_max_pool2d_backward.h>
#include <ATen/ops/adaptive_max_pool3d.h>
#include <ATen/ops/adaptive_max_pool3d_backward.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool2d_backward.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/avg_pool3d_backward.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/max_pool2d_with_indices.h>
#include <ATen/ops/max_pool2d_with_indices_backward.h>
#include <ATen/ops/max_pool3d_with_indices.h>
#include <ATen/ops/max_pool3d_with_indices_backward.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

// A 1-d window family along one spatial dim.
struct Win {
  int64_t in, out, slots;
  bool adaptive;
  int64_t s = 1, p = 0, d = 1;  // regular windows: slot j of output o is at o*s - p + j*d
};

Win regular_win(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
  return Win{in, out, k, false, s, p, d};
}

// Adaptive windows: [floor(o*in/out), ceil((o+1)*in/out)).
Win adaptive_win(int64_t in, int64_t out) {
  // Evenly dividing windows are regular ones (cheaper: slices, not gathers).
  if (out > 0 && in % out == 0) return regular_win(in, out, in / out, in / out, 0, 1);
  int64_t slots = 0;
  for (int64_t o = 0; o < out; ++o) {
    int64_t start = o * in / out, end = ((o + 1) * in + out - 1) / out;
    slots = std::max(slots, end - start);
  }
  return Win{in, out, slots, true};
}

void key_wins(record::OpCall& call, const std::vector<Win>& wins) {
  for (const Win& w : wins) call.attr(c10::IntArrayRef({w.in, w.out, w.slots, (int64_t)w.adaptive, w.s, w.p, w.d}));
}

Value i64c(Builder& b, int64_t v, const Dims& dims) { return b.constant((double)v, ElemType::kS64, dims); }

// Window starts (regular: unclipped o*s - p) and ends (exclusive), i64 [out].
Value win_start(Builder& b, const Win& w) {
  Value o = b.iota({w.out}, 0, ElemType::kS64);
  if (w.adaptive) return b.div(b.mul(o, i64c(b, w.in, {w.out})), i64c(b, w.out, {w.out}));
  return b.sub(b.mul(o, i64c(b, w.s, {w.out})), i64c(b, w.p, {w.out}));
}
Value adaptive_end(Builder& b, const Win& w) {
  Value o1 = b.add(b.iota({w.out}, 0, ElemType::kS64), i64c(b, 1, {w.out}));
  Value num = b.add(b.mul(o1, i64c(b, w.in, {w.out})), i64c(b, w.out - 1, {w.out}));
  return b.div(num, i64c(b, w.out, {w.out}));
}

// Position of slot j for every output, and whether it lies in the window.
std::pair<Value, Value> slot(Builder& b, const Win& w, int64_t j) {
  Value start = win_start(b, w);
  Value pos = b.add(start, i64c(b, j * (w.adaptive ? 1 : w.d), {w.out}));
  Value valid;
  if (w.adaptive) {
    valid = b.compare(pos, adaptive_end(b, w), Direction::kLt);
  } else {
    valid = b.and_(b.compare(pos, i64c(b, 0, {w.out}), Direction::kGe),
                   b.compare(pos, i64c(b, w.in, {w.out}), Direction::kLt));
  }
  Value clamped = b.clamp(i64c(b, 0, {}), pos, i64c(b, w.in - 1, {}));
  return {clamped, valid};
}

// Elements per window along one dim (the average's divisor factor).
Value win_count(Builder& b, const Win& w, bool include_pad) {
  Value start = win_start(b, w);
  if (w.adaptive) return b.sub(adaptive_end(b, w), start);
  Value end = b.add(start, i64c(b, (w.slots - 1) * w.d + 1, {w.out}));
  if (include_pad) {
    Value lim = b.min(end, i64c(b, w.in + w.p, {w.out}));
    return b.sub(lim, start);
  }
  Value hi = b.min(end, i64c(b, w.in, {w.out}));
  Value lo = b.max(start, i64c(b, 0, {w.out}));
  return b.sub(hi, lo);
}

// x with dim `dim` replaced by x[..., pos[o], ...] (pos in range).
Value take(Builder& b, Value x, Value pos, int64_t dim) {
  Dims shape = b.dims(x), sizes = shape, out = shape;
  int64_t n = b.dims(pos)[0];
  sizes[dim] = 1;
  out[dim] = n;
  Dims offs;
  for (int64_t i = 0; i < (int64_t)shape.size(); ++i)
    if (i != dim) offs.push_back(i);
  return b.gather(x, b.reshape(pos, {n, 1}), offs, {dim}, {dim}, 1, sizes, out);
}

// acc[..., pos[o], ...] += upd[..., o, ...].
Value put_add(Builder& b, Value acc, Value pos, Value upd, int64_t dim) {
  int64_t n = b.dims(pos)[0];
  Dims win;
  for (int64_t i = 0; i < b.type(acc).rank(); ++i)
    if (i != dim) win.push_back(i);
  return b.scatter(acc, b.reshape(pos, {n, 1}), upd, win, {dim}, {dim}, 1, BinaryOp::kAdd);
}

// Regular windows read a padded copy with strided slices (far cheaper to
// compile than gathers): padded length along the dim and its low padding.
int64_t padded_len(const Win& w) {
  int64_t need = (w.out - 1) * w.s + (w.slots - 1) * w.d + 1;
  return w.p + std::max(w.in, need - w.p);
}

// The source a window dim reads slots from: x itself for adaptive windows,
// else x padded (with anything: padded slots are masked) along `dim`.
Value window_source(Builder& b, Value x, const Win& w, int64_t dim) {
  if (w.adaptive) return x;
  int64_t r = b.type(x).rank();
  Dims lo(r, 0), hi(r, 0);
  lo[dim] = w.p;
  hi[dim] = padded_len(w) - w.p - w.in;
  if (lo[dim] == 0 && hi[dim] == 0) return x;
  return b.pad(x, zero(b, b.elem(x)), lo, hi, Dims(r, 0));
}

// Slot j of every window along `dim` (pos: clamped positions, adaptive only).
Value pick(Builder& b, Value src, const Win& w, int64_t j, Value pos, int64_t dim) {
  if (w.adaptive) return take(b, src, pos, dim);
  Dims d = b.dims(src);
  int64_t r = d.size();
  Dims start(r, 0), limit = d, strides(r, 1);
  start[dim] = j * w.d;
  limit[dim] = start[dim] + (w.out - 1) * w.s + 1;
  strides[dim] = w.s;
  return b.slice(src, start, limit, strides);
}

// Adjoint of pick: adds upd (slot j of each window) into acc, which has
// the source's shape along `dim` (padded_len for regular windows).
Value unpick_add(Builder& b, Value acc, Value upd, const Win& w, int64_t j, Value pos, int64_t dim) {
  if (w.adaptive) return put_add(b, acc, pos, upd, dim);
  int64_t r = b.type(upd).rank();
  Dims lo(r, 0), hi(r, 0), interior(r, 0);
  lo[dim] = j * w.d;
  interior[dim] = w.s - 1;
  hi[dim] = b.dims(acc)[dim] - lo[dim] - ((w.out - 1) * w.s + 1);
  return b.add(acc, b.pad(upd, zero(b, b.elem(upd)), lo, hi, interior));
}

Value along(Builder& b, Value v, const Dims& shape, int64_t dim) { return b.broadcast_in_dim(v, shape, {dim}); }

ElemType acc_elem(c10::ScalarType t) {
  if (t == c10::kHalf || t == c10::kBFloat16) return ElemType::kF32;
  if (c10::isIntegralType(t, false)) return ElemType::kS64;
  return to_elem(t);
}

// Product of per-dim window counts over the output shape `shape` (spatial
// dims last), in `t`.
Value divisor(Builder& b, const std::vector<Win>& wins, bool include_pad, const Dims& shape, ElemType t) {
  int64_t lead = shape.size() - wins.size();
  Value div;
  for (size_t i = 0; i < wins.size(); ++i) {
    Value c = along(b, b.convert(win_count(b, wins[i], include_pad), t), shape, lead + i);
    div = i == 0 ? c : b.mul(div, c);
  }
  return div;
}

// --- lowerings ---------------------------------------------------------------

// Returns {values, flat per-plane indices (i64)}.
Values max_pool_lower(Builder& b, Value x, const std::vector<Win>& wins) {
  int64_t ns = wins.size(), lead = b.type(x).rank() - ns;
  Value v = x;
  std::vector<Value> idx(ns);  // per spatial dim, once reduced
  for (int64_t k = ns - 1; k >= 0; --k) {
    const Win& w = wins[k];
    int64_t dim = lead + k;
    Dims shape = b.dims(v);
    shape[dim] = w.out;
    ElemType t = b.elem(v);
    Value cur = b.broadcast_to(lowest(b, t), shape);
    Value found = b.constant(0, ElemType::kPred, shape);
    std::vector<Value> cur_idx(ns), src_idx(ns);
    for (int64_t m = k; m < ns; ++m) cur_idx[m] = i64c(b, 0, shape);
    Value src = window_source(b, v, w, dim);
    for (int64_t m = k + 1; m < ns; ++m) src_idx[m] = window_source(b, idx[m], w, dim);
    for (int64_t j = 0; j < w.slots; ++j) {
      auto [pos, valid] = slot(b, w, j);
      Value cand = pick(b, src, w, j, pos, dim);
      Value vb = along(b, valid, shape, dim);
      Value better = b.or_(b.compare(cand, cur, Direction::kGt), b.compare(cand, cand, Direction::kNe));
      better = b.or_(better, b.not_(found));
      Value sel = b.and_(vb, better);
      cur = b.select(sel, cand, cur);
      cur_idx[k] = b.select(sel, along(b, pos, shape, dim), cur_idx[k]);
      for (int64_t m = k + 1; m < ns; ++m) cur_idx[m] = b.select(sel, pick(b, src_idx[m], w, j, pos, dim), cur_idx[m]);
      found = b.or_(found, vb);
    }
    v = cur;
    for (int64_t m = k; m < ns; ++m) idx[m] = cur_idx[m];
  }
  Value flat = idx[0];
  for (int64_t m = 1; m < ns; ++m) flat = b.add(b.mul(flat, i64c(b, wins[m].in, b.dims(v))), idx[m]);
  return {v, flat};
}

Value avg_pool_lower(Builder& b, Value x, const std::vector<Win>& wins, bool include_pad,
                     std::optional<int64_t> div_override, ElemType acc) {
  int64_t ns = wins.size(), lead = b.type(x).rank() - ns;
  Value v = b.convert(x, acc);
  for (int64_t k = 0; k < ns; ++k) {
    const Win& w = wins[k];
    int64_t dim = lead + k;
    Dims shape = b.dims(v);
    shape[dim] = w.out;
    Value sum = zero(b, acc, shape);
    Value src = window_source(b, v, w, dim);
    for (int64_t j = 0; j < w.slots; ++j) {
      auto [pos, valid] = slot(b, w, j);
      sum = b.add(sum, b.select(along(b, valid, shape, dim), pick(b, src, w, j, pos, dim), zero(b, acc, shape)));
    }
    v = sum;
  }
  Value div =
      div_override ? b.constant((double)*div_override, acc, b.dims(v)) : divisor(b, wins, include_pad, b.dims(v), acc);
  return b.div(v, div);
}

Value avg_pool_backward_lower(Builder& b, Value gy, const std::vector<Win>& wins, bool include_pad,
                              std::optional<int64_t> div_override, ElemType acc) {
  int64_t ns = wins.size(), lead = b.type(gy).rank() - ns;
  Value g = b.convert(gy, acc);
  Value div =
      div_override ? b.constant((double)*div_override, acc, b.dims(g)) : divisor(b, wins, include_pad, b.dims(g), acc);
  g = b.div(g, div);
  for (int64_t k = 0; k < ns; ++k) {
    const Win& w = wins[k];
    int64_t dim = lead + k;
    Dims shape = b.dims(g);
    shape[dim] = w.adaptive ? w.in : padded_len(w);
    Value res = zero(b, acc, shape);
    for (int64_t j = 0; j < w.slots; ++j) {
      auto [pos, valid] = slot(b, w, j);
      Value upd = b.select(along(b, valid, b.dims(g), dim), g, zero(b, acc, b.dims(g)));
      res = unpick_add(b, res, upd, w, j, pos, dim);
    }
    if (!w.adaptive) {  // drop the padding
      Dims start(shape.size(), 0), limit = shape;
      start[dim] = w.p;
      limit[dim] = w.p + w.in;
      res = b.slice(res, start, limit, Dims(shape.size(), 1));
    }
    g = res;
  }
  return g;
}

// Scatter-adds gy into each input plane at the flat indices `idx`.
Value max_pool_backward_lower(Builder& b, Value gy, Value idx, const Dims& in_shape, int64_t ns, ElemType acc) {
  int64_t lead = in_shape.size() - ns, B = 1, P = 1, Q = 1;
  for (int64_t i = 0; i < lead; ++i) B *= in_shape[i];
  for (int64_t i = lead; i < (int64_t)in_shape.size(); ++i) P *= in_shape[i];
  const Dims& gs = b.dims(gy);
  for (int64_t i = lead; i < (int64_t)gs.size(); ++i) Q *= gs[i];
  Value g = b.reshape(b.convert(gy, acc), {B, Q});
  Value ix = b.reshape(b.convert(idx, ElemType::kS64), {B, Q, 1});
  Value bi = b.iota({B, Q, 1}, 0, ElemType::kS64);
  Value coords = b.concatenate({bi, ix}, 2);
  Value res = b.scatter(zero(b, acc, {B, P}), coords, g, {}, {0, 1}, {0, 1}, 2, BinaryOp::kAdd);
  return b.reshape(res, in_shape);
}

// --- ATen glue -----------------------------------------------------------------

std::vector<int64_t> expand(c10::IntArrayRef a, int64_t n, c10::IntArrayRef dflt) {
  if (a.empty()) a = dflt;
  std::vector<int64_t> v(a.begin(), a.end());
  if (v.size() == 1) v.assign(n, v[0]);
  TORCH_CHECK((int64_t)v.size() == n, "expected ", n, " values, got ", a);
  return v;
}

std::vector<Win> regular_wins(const at::Tensor& self, c10::IntArrayRef out_sizes, int64_t ns, c10::IntArrayRef kernel,
                              c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation) {
  auto k = expand(kernel, ns, kernel), s = expand(stride, ns, kernel), p = expand(padding, ns, padding);
  std::vector<int64_t> one(ns, 1);
  auto d = dilation.empty() ? one : expand(dilation, ns, dilation);
  std::vector<Win> wins;
  int64_t lead = self.dim() - ns;
  for (int64_t i = 0; i < ns; ++i)
    wins.push_back(regular_win(self.size(lead + i), out_sizes[out_sizes.size() - ns + i], k[i], s[i], p[i], d[i]));
  return wins;
}

std::vector<Win> adaptive_wins(const at::Tensor& self, c10::IntArrayRef out_sizes, int64_t ns) {
  std::vector<Win> wins;
  int64_t lead = self.dim() - ns;
  for (int64_t i = 0; i < ns; ++i)
    wins.push_back(adaptive_win(self.size(lead + i), out_sizes[out_sizes.size() - ns + i]));
  return wins;
}

// Dtypes as CPU supports them: max pooling takes every integer type,
// average pooling int64, adaptive pooling floats only.
enum class Ints { kNone, kLong, kAll };
void check_dtype(const at::Tensor& t, const char* op, Ints ints) {
  auto st = t.scalar_type();
  bool ok = c10::isFloatingType(st) || (ints == Ints::kAll && c10::isIntegralType(st, false)) ||
            (ints == Ints::kLong && st == c10::kLong);
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", op, "\" not implemented for '", c10::toString(st), "'");
}

void run_max(const char* name, const at::Tensor& self, const std::vector<Win>& wins, const at::Tensor& out,
             const at::Tensor& indices) {
  if (out.numel() == 0) return;
  record::OpCall call(name);
  key_wins(call, wins);
  call.input(self);
  call.output(out);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) { return max_pool_lower(b, in[0], wins); });
}

void run_max_backward(const char* name, const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices,
                      int64_t ns, const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  if (grad.numel() == 0) {
    grad_input.zero_();
    return;
  }
  record::OpCall call(name);
  call.attr(ns);
  call.input(grad);
  call.input(indices);
  call.output(grad_input);
  Dims in_shape(self.sizes().begin(), self.sizes().end());
  ElemType acc = acc_elem(grad.scalar_type());
  call.run([&](Builder& b, const Values& in) {
    return Values{max_pool_backward_lower(b, in[0], in[1], in_shape, ns, acc)};
  });
}

void run_avg(const char* name, const at::Tensor& self, const std::vector<Win>& wins, bool include_pad,
             std::optional<int64_t> div, const at::Tensor& out) {
  if (out.numel() == 0) return;
  record::OpCall call(name);
  key_wins(call, wins);
  call.attr(include_pad).attr(div.has_value()).attr(div.value_or(0));
  call.input(self);
  call.output(out);
  ElemType acc = acc_elem(self.scalar_type());
  call.run([&](Builder& b, const Values& in) { return Values{avg_pool_lower(b, in[0], wins, include_pad, div, acc)}; });
}

void run_avg_backward(const char* name, const at::Tensor& grad, const std::vector<Win>& wins, bool include_pad,
                      std::optional<int64_t> div, const at::Tensor& grad_input) {
  if (grad_input.numel() == 0) return;
  if (grad.numel() == 0) {
    grad_input.zero_();
    return;
  }
  record::OpCall call(name);
  key_wins(call, wins);
  call.attr(include_pad).attr(div.has_value()).attr(div.value_or(0));
  call.input(grad);
  call.output(grad_input);
  ElemType acc = acc_elem(grad.scalar_type());
  call.run([&](Builder& b, const Values& in) {
    return Values{avg_pool_backward_lower(b, in[0], wins, include_pad, div, acc)};
  });
}

// Results shaped and laid out as ATen's meta kernels give them (like_meta):
// CPU keeps a channels-last input's layout, and so does tpu.
OutMeta like(const at::Tensor& m, c10::ScalarType dtype, c10::Device device) { return like_meta(m, device, dtype); }

struct PoolMeta : OutMeta {
  std::vector<Win> wins;
};
struct PoolPairMeta : PairMeta {
  std::vector<Win> wins;
};

// --- max pool --------------------------------------------------------------

template <int N>
struct MaxPool {
  static constexpr const char* kName = N == 2 ? "max_pool2d" : "max_pool3d";
  static PoolPairMeta meta(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                           c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode) {
    check_dtype(self, kName, Ints::kAll);
    // Before the meta kernel, whose Python form indexes a low-rank input's
    // missing dims (IndexError) where CPU's kernel raises this.
    TORCH_CHECK(self.dim() == N + 1 || self.dim() == N + 2, "non-empty ", N + 1, "D or ", N + 2,
                "D (batch mode) tensor expected for input");
    auto [mo, mi] = N == 2 ? at::max_pool2d_with_indices(meta_of(self), kernel, stride, padding, dilation, ceil_mode)
                           : at::max_pool3d_with_indices(meta_of(self), kernel, stride, padding, dilation, ceil_mode);
    PoolPairMeta m;
    m.results[0] = like(mo, self.scalar_type(), self.device());
    m.results[1] = like(mi, c10::kLong, self.device());
    m.wins = regular_wins(self, mo.sizes(), N, kernel, stride, padding, dilation);
    return m;
  }
  static void impl(const at::Tensor& out, const at::Tensor& indices, const PoolPairMeta& m, const at::Tensor& self,
                   c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef, bool) {
    run_max(kName, self, m.wins, out, indices);
  }
};

template <int N>
struct MaxPoolBackward {
  static constexpr const char* kName = N == 2 ? "max_pool2d_with_indices_backward" : "max_pool3d_with_indices_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                      c10::IntArrayRef padding, c10::IntArrayRef dilation, bool ceil_mode, const at::Tensor& indices) {
    at::Tensor m = N == 2 ? at::max_pool2d_with_indices_backward(meta_of(grad), meta_of(self), kernel, stride, padding,
                                                                 dilation, ceil_mode, meta_of(indices))
                          : at::max_pool3d_with_indices_backward(meta_of(grad), meta_of(self), kernel, stride, padding,
                                                                 dilation, ceil_mode, meta_of(indices));
    return like(m, grad.scalar_type(), grad.device());
  }
  static void impl(const at::Tensor& grad_input, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef, bool,
                   const at::Tensor& indices) {
    run_max_backward("max_pool_backward", grad, self, indices, N, grad_input);
  }
};

// --- avg pool ----------------------------------------------------------------

template <int N>
struct AvgPool {
  static constexpr const char* kName = N == 2 ? "avg_pool2d" : "avg_pool3d";
  static PoolMeta meta(const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad, std::optional<int64_t> div) {
    check_dtype(self, kName, Ints::kLong);
    at::Tensor mo = N == 2 ? at::avg_pool2d(meta_of(self), kernel, stride, padding, ceil_mode, count_include_pad, div)
                           : at::avg_pool3d(meta_of(self), kernel, stride, padding, ceil_mode, count_include_pad, div);
    PoolMeta m;
    static_cast<OutMeta&>(m) = like(mo, self.scalar_type(), self.device());
    m.wins = regular_wins(self, mo.sizes(), N, kernel, stride, padding, {});
    return m;
  }
  static void impl(const at::Tensor& out, const PoolMeta& m, const at::Tensor& self, c10::IntArrayRef, c10::IntArrayRef,
                   c10::IntArrayRef, bool, bool count_include_pad, std::optional<int64_t> div) {
    run_avg("avg_pool", self, m.wins, count_include_pad, div, out);
  }
};

template <int N>
struct AvgPoolBackward {
  static constexpr const char* kName = N == 2 ? "avg_pool2d_backward" : "avg_pool3d_backward";
  static PoolMeta meta(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef kernel, c10::IntArrayRef stride,
                       c10::IntArrayRef padding, bool ceil_mode, bool count_include_pad, std::optional<int64_t> div) {
    at::Tensor mg = N == 2 ? at::avg_pool2d_backward(meta_of(grad), meta_of(self), kernel, stride, padding, ceil_mode,
                                                     count_include_pad, div)
                           : at::avg_pool3d_backward(meta_of(grad), meta_of(self), kernel, stride, padding, ceil_mode,
                                                     count_include_pad, div);
    PoolMeta m;
    static_cast<OutMeta&>(m) = like(mg, grad.scalar_type(), grad.device());
    m.wins = regular_wins(self, grad.sizes(), N, kernel, stride, padding, {});
    return m;
  }
  static void impl(const at::Tensor& grad_input, const PoolMeta& m, const at::Tensor& grad, const at::Tensor&,
                   c10::IntArrayRef, c10::IntArrayRef, c10::IntArrayRef, bool, bool count_include_pad,
                   std::optional<int64_t> div) {
    run_avg_backward("avg_pool_backward", grad, m.wins, count_include_pad, div, grad_input);
  }
};

// --- adaptive avg --------------------------------------------------------------

template <int N>
struct AdaptiveAvg {
  static constexpr const char* kName = N == 2 ? "adaptive_avg_pool2d" : "adaptive_avg_pool3d";
  static PoolMeta meta(const at::Tensor& self, c10::IntArrayRef output_size) {
    // The meta kernel lacks CPU's empty-dimension check.
    for (int64_t i = 1; i < self.dim(); ++i)
      TORCH_CHECK(self.size(i) > 0, kName,
                  "(): Expected input to have non-zero size for non-batch dimensions, but input has sizes ",
                  self.sizes(), " with dimension ", i, " being empty");
    check_dtype(self, kName, Ints::kNone);
    at::Tensor mo = N == 2 ? at::_adaptive_avg_pool2d(meta_of(self), output_size)
                           : at::_adaptive_avg_pool3d(meta_of(self), output_size);
    PoolMeta m;
    static_cast<OutMeta&>(m) = like(mo, self.scalar_type(), self.device());
    m.wins = adaptive_wins(self, mo.sizes(), N);
    return m;
  }
  static void impl(const at::Tensor& out, const PoolMeta& m, const at::Tensor& self, c10::IntArrayRef) {
    run_avg("adaptive_avg_pool", self, m.wins, true, std::nullopt, out);
  }
};

template <int N>
struct AdaptiveAvgBackward {
  static constexpr const char* kName = N == 2 ? "adaptive_avg_pool2d_backward" : "adaptive_avg_pool3d_backward";
  static PoolMeta meta(const at::Tensor& grad, const at::Tensor& self) {
    at::Tensor mg = N == 2 ? at::_adaptive_avg_pool2d_backward(meta_of(grad), meta_of(self))
                           : at::_adaptive_avg_pool3d_backward(meta_of(grad), meta_of(self));
    PoolMeta m;
    static_cast<OutMeta&>(m) = like(mg, grad.scalar_type(), grad.device());
    m.wins = adaptive_wins(self, grad.sizes(), N);
    return m;
  }
  static void impl(const at::Tensor& grad_input, const PoolMeta& m, const at::Tensor& grad, const at::Tensor&) {
    run_avg_backward("adaptive_avg_pool_backward", grad, m.wins, true, std::nullopt, grad_input);
  }
};

// --- adaptive max ----------------------------------------------------------------

template <int N>
struct AdaptiveMax {
  static constexpr const char* kName = N == 2 ? "adaptive_max_pool2d" : "adaptive_max_pool3d";
  static PoolPairMeta meta(const at::Tensor& self, c10::IntArrayRef output_size) {
    check_dtype(self, kName, Ints::kNone);
    auto [mo, mi] = N == 2 ? at::adaptive_max_pool2d(meta_of(self), output_size)
                           : at::adaptive_max_pool3d(meta_of(self), output_size);
    PoolPairMeta m;
    m.results[0] = like(mo, self.scalar_type(), self.device());
    m.results[1] = like(mi, c10::kLong, self.device());
    m.wins = adaptive_wins(self, mo.sizes(), N);
    return m;
  }
  static void impl(const at::Tensor& out, const at::Tensor& indices, const PoolPairMeta& m, const at::Tensor& self,
                   c10::IntArrayRef) {
    run_max("adaptive_max_pool", self, m.wins, out, indices);
  }
};

template <int N>
struct AdaptiveMaxBackward {
  static constexpr const char* kName = N == 2 ? "adaptive_max_pool2d_backward" : "adaptive_max_pool3d_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& indices) {
    at::Tensor mg = N == 2 ? at::adaptive_max_pool2d_backward(meta_of(grad), meta_of(self), meta_of(indices))
                           : at::adaptive_max_pool3d_backward(meta_of(grad), meta_of(self), meta_of(indices));
    return like(mg, grad.scalar_type(), grad.device());
  }
  static void impl(const at::Tensor& grad_input, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   const at::Tensor& indices) {
    run_max_backward("max_pool_backward", grad, self, indices, N, grad_input);
  }
};

}  // namespace

// Each op is one declaration giving its functional and out= forms
// (ops/variants.h); the 1-d forms and the index-free wrappers are composite
// in ATen and reach these.
TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<MaxPool<2>>(m, {"max_pool2d_with_indices", "", "max_pool2d_with_indices.out"});
  register_variants<MaxPool<3>>(m, {"max_pool3d_with_indices", "", "max_pool3d_with_indices.out"});
  register_variants<MaxPoolBackward<2>>(
      m, {"max_pool2d_with_indices_backward", "", "max_pool2d_with_indices_backward.grad_input"});
  register_variants<MaxPoolBackward<3>>(
      m, {"max_pool3d_with_indices_backward", "", "max_pool3d_with_indices_backward.grad_input"});
  register_variants<AvgPool<2>>(m, {"avg_pool2d", "", "avg_pool2d.out"});
  register_variants<AvgPool<3>>(m, {"avg_pool3d", "", "avg_pool3d.out"});
  register_variants<AvgPoolBackward<2>>(m, {"avg_pool2d_backward", "", "avg_pool2d_backward.grad_input"});
  register_variants<AvgPoolBackward<3>>(m, {"avg_pool3d_backward", "", "avg_pool3d_backward.grad_input"});
  register_variants<AdaptiveAvg<2>>(m, {"_adaptive_avg_pool2d", "", ""});
  register_variants<AdaptiveAvg<3>>(m, {"_adaptive_avg_pool3d", "", ""});
  register_variants<AdaptiveAvgBackward<2>>(m, {"_adaptive_avg_pool2d_backward", "", ""});
  register_variants<AdaptiveAvgBackward<3>>(m, {"_adaptive_avg_pool3d_backward", "", ""});
  register_variants<AdaptiveMax<2>>(m, {"adaptive_max_pool2d", "", "adaptive_max_pool2d.out"});
  register_variants<AdaptiveMax<3>>(m, {"adaptive_max_pool3d", "", "adaptive_max_pool3d.out"});
  register_variants<AdaptiveMaxBackward<2>>(
      m, {"adaptive_max_pool2d_backward", "", "adaptive_max_pool2d_backward.grad_input"});
  register_variants<AdaptiveMaxBackward<3>>(
      m, {"adaptive_max_pool3d_backward", "", "adaptive_max_pool3d_backward.grad_input"});
}

}  // namespace torch_tpu::ops
