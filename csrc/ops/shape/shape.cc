// Shape ops that move data: cat, flip, roll, triu/tril, channel_shuffle (a
// reshape-transpose-reshape) and unfold_backward (a scatter-add of the
// windows; unfold itself is a strided view, registered here too). (stack
// and repeat are composite in ATen and reach these; pure views live in
// aten/.)
#include <ATen/ops/cat.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/WrapDimUtilsMulti.h>
#include <ATen/ops/unfold_native.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"
#include "ops/shape/append.h"

namespace torch_tpu::ops {
using ir::Dims;

namespace {

Dims to_dims(c10::IntArrayRef a) { return Dims(a.begin(), a.end()); }
Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

// --- cat -----------------------------------------------------------------------

at::Tensor& cat_out(const at::ITensorListRef& tensors, int64_t dim, at::Tensor& out) {
  // Shape/dtype rules and error messages come from ATen's meta kernel.
  std::vector<at::Tensor> metas;
  std::vector<at::Tensor> ins;
  for (const at::Tensor& t : tensors) {
    metas.push_back(meta_of(t));
    ins.push_back(t);
  }
  at::Tensor r = at::cat(metas, dim);
  // CPU raises TypeError here, not prepare_out's RuntimeError.
  if (!c10::canCast(r.scalar_type(), out.scalar_type()))
    throw c10::TypeError(
        {__func__, __FILE__, static_cast<uint32_t>(__LINE__)},
        c10::str("torch.cat(): input types can't be cast to the desired output type ", out.scalar_type()));
  prepare_out(out, r.sizes(), r.scalar_type(), "cat");
  if (out.numel() == 0) return out;
  // Legacy rule: 1-d empty tensors are skipped whatever their rank.
  std::vector<at::Tensor> used;
  int64_t rank = r.dim();
  for (const at::Tensor& t : ins)
    if (!(t.dim() == 1 && t.size(0) == 0) && t.numel() > 0) used.push_back(t);
  int64_t d = wrap_dim(dim, rank);
  ElemType e = to_elem(r.scalar_type());
  record::OpCall call("cat");
  call.attr(d).attr(static_cast<int64_t>(e));
  for (const at::Tensor& t : used) call.input(t);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Values xs;
    for (Value v : in) xs.push_back(b.convert(v, e));
    return Values{b.concatenate(xs, d)};
  });
  return out;
}

at::Tensor cat(const at::ITensorListRef& tensors, int64_t dim) {
  std::vector<at::Tensor> metas;
  c10::Device dev(c10::DeviceType::PrivateUse1, 0);
  bool found = false;
  for (const at::Tensor& t : tensors) {
    metas.push_back(meta_of(t));
    if (!found && t.device().type() == c10::DeviceType::PrivateUse1) dev = t.device(), found = true;
  }
  at::Tensor r = at::cat(metas, dim);
  std::vector<at::Tensor> ins(tensors.begin(), tensors.end());
  if (auto room = cat_with_room(ins, wrap_dim(dim, r.dim()), r.sizes(), r.scalar_type()))
    return room->filled ? room->out : cat_out(tensors, dim, room->out);
  at::Tensor out = empty_tpu(r.sizes(), r.scalar_type(), dev);
  return cat_out(tensors, dim, out);
}

// --- flip / roll ---------------------------------------------------------------

// flip: the result takes self's layout, as CPU's empty_like(self) gives it.
struct FlipMeta : OutMeta {
  Dims dims;
};
struct Flip {
  static constexpr const char* kName = "flip";
  static FlipMeta meta(const at::Tensor& self, c10::IntArrayRef dims) {
    int64_t rank = self.dim();
    auto mask = at::dim_list_to_bitset(dims, rank);  // checks range and repeats
    FlipMeta m;
    static_cast<OutMeta&>(m) = OutMeta{self.sizes().vec(), self.scalar_type(), self.device()};
    for (int64_t i = 0; i < rank; ++i)
      if (mask[i]) m.dims.push_back(i);
    return m;
  }
  static void impl(const at::Tensor& out, const FlipMeta& m, const at::Tensor& self, c10::IntArrayRef) {
    const Dims& ds = m.dims;
    record::OpCall call("flip");
    call.attr(c10::IntArrayRef(ds));
    call.input(self);
    call.output(out);
    call.run([&](Builder& b, const Values& in) { return Values{b.reverse(in[0], ds)}; });
  }
};

Value roll_dim(Builder& b, Value x, int64_t dim, int64_t shift) {
  Dims sz = b.dims(x);
  int64_t n = sz[dim];
  if (n == 0) return x;
  int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  Dims start(sz.size(), 0), lim = sz, st(sz.size(), 1);
  start[dim] = n - s;
  Value tail = b.slice(x, start, lim, st);
  start[dim] = 0;
  lim[dim] = n - s;
  Value head = b.slice(x, start, lim, st);
  return b.concatenate({tail, head}, dim);
}

at::Tensor roll(const at::Tensor& self, c10::SymIntArrayRef shifts_s, c10::IntArrayRef dimsr) {
  auto shifts = C10_AS_INTARRAYREF_SLOW(shifts_s);
  TORCH_CHECK(!shifts.empty(), "`shifts` required");
  size_t want = dimsr.empty() ? 1 : dimsr.size();
  TORCH_CHECK(shifts.size() == want, "shifts and dimensions must align. shifts: ", shifts.size(),
              ", dims:", dimsr.size());
  Dims ds, ss(shifts.begin(), shifts.end());
  // As CPU: explicit dims on a 0-d tensor name a dimension it does not have.
  TORCH_CHECK_INDEX(self.dim() > 0 || dimsr.empty(), "Dimension specified as ", dimsr.empty() ? 0 : dimsr[0],
                    " but tensor has no dimensions");
  for (int64_t d : dimsr) ds.push_back(wrap_dim(d, self.dim()));
  at::Tensor out = empty_like_tpu(self);
  record::OpCall call("roll");
  call.attr(c10::IntArrayRef(ds)).attr(c10::IntArrayRef(ss));
  call.input(self);
  call.output(out);
  Dims shape = to_dims(self.sizes());
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    if (ds.empty()) {
      Value flat = b.reshape(x, {b.type(x).numel()});
      return Values{b.reshape(roll_dim(b, flat, 0, ss[0]), shape)};
    }
    for (size_t i = 0; i < ds.size(); ++i) x = roll_dim(b, x, ds[i], ss[i]);
    return Values{x};
  });
  return out;
}

// --- triu / tril -----------------------------------------------------------------

template <bool kUpper>
struct Tri {
  static constexpr const char* kName = kUpper ? "triu" : "tril";
  static OutMeta meta(const at::Tensor& self, c10::SymInt) {
    TORCH_CHECK(self.dim() >= 2, kName, ": input tensor must have at least 2 dimensions");
    return OutMeta{self.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kExact, false};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, c10::SymInt diagonal_s) {
    int64_t diagonal = diagonal_s.expect_int();
    Dims shape = to_dims(self.sizes());
    int64_t r = self.dim();
    record::OpCall call(kName);
    call.input(self);
    call.scalar(diagonal, c10::kLong);
    call.output(out);
    call.run([&](Builder& b, const Values& in) {
      Value row = b.iota(shape, r - 2, ElemType::kS64);
      Value col = b.iota(shape, r - 1, ElemType::kS64);
      Value diff = b.sub(col, row);
      Value k = b.broadcast_to(in[1], shape);
      Value keep = b.compare(diff, k, kUpper ? Direction::kGe : Direction::kLe);
      return Values{b.select(keep, in[0], zero(b, b.elem(in[0]), shape))};
    });
  }
};

// --- unfold_backward --------------------------------------------------------

at::Tensor unfold_backward(const at::Tensor& grad, c10::SymIntArrayRef input_sizes_s, int64_t dim, int64_t size,
                           int64_t step) {
  std::vector<int64_t> in_sizes;
  for (const auto& s : input_sizes_s) in_sizes.push_back(s.expect_int());
  int64_t r = in_sizes.size();
  int64_t d = r == 0 ? 0 : wrap_dim(dim, r);
  at::Tensor out = empty_tpu(in_sizes, grad.scalar_type(), grad.device());
  Dims shape(in_sizes.begin(), in_sizes.end());
  Dims gshape(grad.sizes().begin(), grad.sizes().end());
  record::OpCall call("unfold_backward");
  call.attr(d).attr(size).attr(step).attr(c10::IntArrayRef(in_sizes));
  call.input(grad);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = b.elem(in[0]);
    // unfold of a 0-d tensor has at most one window of one element.
    if (r == 0) return Values{b.type(in[0]).numel() == 1 ? b.reshape(in[0], {}) : zero(b, e)};
    Value z = zero(b, e, shape);
    int64_t nw = gshape[d];
    if (nw == 0 || size == 0 || b.type(in[0]).numel() == 0) return Values{z};
    // grad: [..., nw (at d), ..., size] -> [nw, size, other dims...].
    Dims perm{d, r};
    for (int64_t i = 0; i < r; ++i)
      if (i != d) perm.push_back(i);
    Value g = b.transpose(in[0], perm);
    Value w = b.iota({nw, size, 1}, 0, kS64), j = b.iota({nw, size, 1}, 1, kS64);
    Value idx = b.add(b.mul(w, b.constant(static_cast<double>(step), kS64, {nw, size, 1})), j);
    Dims win;
    for (int64_t i = 2; i < r + 1; ++i) win.push_back(i);
    return Values{b.scatter(z, idx, g, win, {d}, {d}, 2, e == ElemType::kPred ? BinaryOp::kOr : BinaryOp::kAdd)};
  });
  return out;
}

// --- channel_shuffle ---------------------------------------------------------------------
at::Tensor channel_shuffle(const at::Tensor& self, int64_t groups) {
  TORCH_CHECK(self.dim() > 2, "channel_shuffle expects input to have at least 3 dimensions, but got input with sizes ",
              self.sizes());
  TORCH_CHECK(groups > 0, "Number of groups to divide channels in must be positive.", " Value of groups:", groups);
  int64_t c = self.size(1);
  TORCH_CHECK((c % groups) == 0, "Number of channels must be divisible by groups. Got ", c, " channels and ", groups,
              " groups.");
  at::Tensor out = empty_like_tpu(self);
  if (self.numel() == 0) return out;
  Dims d = dims_of(self);
  record::OpCall call("channel_shuffle");
  call.attr(groups);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Dims split = {d[0], groups, c / groups};
    for (size_t i = 2; i < d.size(); ++i) split.push_back(d[i]);
    Dims perm = {0, 2, 1};
    for (size_t i = 3; i < split.size(); ++i) perm.push_back(i);
    return Values{b.reshape(b.transpose(b.reshape(in[0], split), perm), d)};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  // A pure strided view; repeat (composite) is built on it.
  m.impl("unfold", at::native::unfold);
  m.impl("cat", cat);
  m.impl("cat.out", cat_out);
  register_variants<Flip>(m, {"flip", "", ""});
  m.impl("roll", roll);
  register_variants<Tri<true>>(m, {"triu", "triu_", "triu.out"});
  register_variants<Tri<false>>(m, {"tril", "tril_", "tril.out"});
  m.impl("unfold_backward", unfold_backward);
  m.impl("channel_shuffle", channel_shuffle);
}

}  // namespace
}  // namespace torch_tpu::ops
