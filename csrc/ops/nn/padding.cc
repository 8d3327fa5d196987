// Padding: constant_pad_nd (negative pads crop), reflection_pad{1,2,3}d and
// replication_pad{1,2,3}d with their backward kernels (functional and out=).
// Circular padding is CompositeImplicit in ATen (slices + cat).
//
// Reflect/replicate are a gather along each padded dim with an index
// computed from iota in the program (pure integer arithmetic, exact);
// backward scatter-adds the gradient through the same indices.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <sstream>
#include <string>

#include "ops/common.h"
#include "ops/variants.h"
#include "ops/shape/append.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

// --- constant_pad_nd ------------------------------------------------------------

at::Tensor constant_pad_nd(const at::Tensor& self, c10::IntArrayRef pad, const c10::Scalar& value) {
  TORCH_CHECK(pad.size() % 2 == 0, "Length of pad must be even but instead it equals ", pad.size());
  int64_t rank = self.dim();
  int64_t npad = static_cast<int64_t>(pad.size() / 2);
  TORCH_CHECK(rank >= npad, "Length of pad should be no more than twice the number of dimensions of the input. ",
              "Pad length is ", pad.size(), "while the input has ", rank, "dimensions.");
  Dims lo(rank, 0), hi(rank, 0);
  std::vector<int64_t> out_size(self.sizes().begin(), self.sizes().end());
  for (int64_t i = 0; i < npad; ++i) {
    // pad lists the last dim first.
    int64_t d = rank - 1 - i;
    lo[d] = pad[2 * i];
    hi[d] = pad[2 * i + 1];
    int64_t n = self.size(d) + lo[d] + hi[d];
    TORCH_CHECK(n >= 0, "The input size ", self.size(d), ", plus negative padding ", lo[d], " and ", hi[d],
                " resulted in a negative output size, which is invalid. Check dimension ", d, " of your input.");
    out_size[d] = n;
  }
  bool last_only = true;
  for (int64_t d = 0; d + 1 < rank; ++d) last_only = last_only && lo[d] == 0 && hi[d] == 0;
  if (last_only && rank > 0) {
    if (auto grown = pad_with_room(self, lo[rank - 1], hi[rank - 1], value)) return *grown;
  }
  at::Tensor out = empty_tpu(out_size, self.scalar_type(), self.device());
  if (out.numel() == 0) return out;
  if (self.numel() == 0) return out.fill_(value);
  // Cropping past an edge of a dim with a positive pad on the other side
  // can leave nothing of the input in the result: all fill.
  for (int64_t d = 0; d < rank; ++d) {
    if (self.size(d) + std::min<int64_t>(lo[d], 0) + std::min<int64_t>(hi[d], 0) <= 0) return out.fill_(value);
  }

  record::OpCall call("constant_pad_nd");
  call.attr(c10::IntArrayRef(lo)).attr(c10::IntArrayRef(hi));
  call.input(self);
  call.scalar(value, self.scalar_type());
  call.output(out);
  call.run([&](Builder& b, const Values& in) { return Values{b.pad(in[0], in[1], lo, hi, Dims(rank, 0))}; });
  return out;
}

// --- reflection / replication ----------------------------------------------------

enum class PadMode : int64_t { kReflect, kReplicate };

const char* mode_name(PadMode m) { return m == PadMode::kReflect ? "reflection_pad" : "replication_pad"; }

// Checks input and padding as ATen does; returns the output sizes.
std::vector<int64_t> pad_output_size(PadMode mode, const at::Tensor& input, c10::IntArrayRef padding, int64_t nsp) {
  TORCH_CHECK(static_cast<int64_t>(padding.size()) == 2 * nsp, "padding size is expected to be ", 2 * nsp,
              ", but got: ", padding.size());
  int64_t rank = input.dim();
  bool batch = rank == nsp + 2;
  bool ok = rank == nsp + 1 || batch;
  for (int64_t i = batch ? 1 : 0; ok && i < rank; ++i) ok = input.size(i) != 0;
  TORCH_CHECK(ok, "Expected ", nsp + 1, "D or ", nsp + 2,
              "D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for input, but got: ",
              input.sizes());
  std::vector<int64_t> out(input.sizes().begin(), input.sizes().end());
  static const char* names[] = {"D", "H", "W"};
  std::ostringstream in_s, out_s;
  bool positive = true;
  for (int64_t k = 0; k < nsp; ++k) {
    int64_t d = rank - nsp + k;
    int64_t p = nsp - 1 - k;  // pair index: padding lists the last dim first
    int64_t l = padding[2 * p], r = padding[2 * p + 1], n = input.size(d);
    if (mode == PadMode::kReflect) {
      TORCH_CHECK(l < n && r < n, "Argument #", 4 + 2 * p,
                  ": Padding size should be less than the corresponding input dimension, but got: padding (", l, ", ",
                  r, ") at dimension ", d, " of input ", input.sizes());
    }
    out[d] = n + l + r;
    positive = positive && out[d] >= 1;
    const char* nm = names[3 - nsp + k];
    in_s << (k ? ", " : "") << nm << ": " << n;
    out_s << (k ? " " : "") << nm << ": " << out[d];
  }
  TORCH_CHECK(positive, "input (", in_s.str(), ") is too small. Calculated output ", out_s.str());
  return out;
}

// Source index along one padded dim for output positions [0, out).
Value source_index(Builder& b, PadMode mode, int64_t in, int64_t out, int64_t lo) {
  ElemType s32 = ElemType::kS32;
  Value j = b.sub(b.iota({out}, 0, s32), b.constant(static_cast<double>(lo), s32, {out}));
  Value last = b.constant(static_cast<double>(in - 1), s32, {out});
  if (mode == PadMode::kReplicate) return b.clamp(b.constant(0, s32), j, b.constant(static_cast<double>(in - 1), s32));
  // Mirror about 0, then about in-1 (pads are < in, so one fold each suffices).
  j = b.abs(j);
  return b.sub(last, b.abs(b.sub(last, j)));
}

Value scatter_add_dim(Builder& b, Value acc, int64_t d, Value idx, Value upd) {
  Dims wins;
  for (int64_t i = 0; i < static_cast<int64_t>(b.dims(upd).size()); ++i)
    if (i != d) wins.push_back(i);
  int64_t n = b.dims(idx)[0];
  return b.scatter(acc, b.reshape(idx, {n, 1}), upd, wins, {d}, {d}, 1, BinaryOp::kAdd);
}

// reflection_pad{1,2,3}d: the result keeps a channels-last input's layout,
// and out= must have the input's dtype, as on CPU.
OutMeta pad_meta(PadMode mode, int64_t nsp, const at::Tensor& input, c10::IntArrayRef padding) {
  auto osize = pad_output_size(mode, input, padding, nsp);
  TORCH_CHECK_NOT_IMPLEMENTED(input.scalar_type() != c10::kBool, "\"", mode_name(mode), nsp,
                              "d\" not implemented for 'Bool'");
  OutMeta m{osize, input.scalar_type(), input.device(), OutDtype::kExact, false};
  m.strides = strides_in(m.sizes, input.suggest_memory_format());
  return m;
}

void pad_into(PadMode mode, int64_t nsp, const at::Tensor& input, c10::IntArrayRef padding, const at::Tensor& out) {
  std::vector<int64_t> osize(out.sizes().begin(), out.sizes().end());
  if (out.numel() == 0) return;
  int64_t rank = input.dim();
  std::vector<int64_t> in_size(input.sizes().begin(), input.sizes().end());
  std::vector<int64_t> pads(padding.begin(), padding.end());

  record::OpCall call(mode == PadMode::kReflect ? "reflection_pad" : "replication_pad");
  call.attr(static_cast<int64_t>(mode)).attr(nsp).attr(c10::IntArrayRef(pads));
  call.input(input);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    for (int64_t k = nsp - 1; k >= 0; --k) {
      int64_t d = rank - nsp + k, p = nsp - 1 - k;
      x = gather_along(b, x, d, source_index(b, mode, in_size[d], osize[d], pads[2 * p]));
    }
    return Values{x};
  });
}

// The gradient keeps the input's layout (CPU's zeros_like(input)); its out=
// must have the gradient's dtype.
OutMeta pad_backward_meta(PadMode mode, int64_t nsp, const at::Tensor& grad, const at::Tensor& input,
                          c10::IntArrayRef padding) {
  auto osize = pad_output_size(mode, input, padding, nsp);
  TORCH_CHECK(grad.sizes().equals(osize), "grad_output size unexpected. Expected: ", c10::IntArrayRef(osize),
              ", Got: ", grad.sizes());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(grad.scalar_type()), "\"", mode_name(mode), nsp,
                              "d_backward\" not implemented for '", c10::toString(grad.scalar_type()), "'");
  OutMeta m{input.sizes().vec(), grad.scalar_type(), grad.device(), OutDtype::kExact, false};
  m.strides = strides_in(m.sizes, input.suggest_memory_format());
  return m;
}

void pad_backward_into(PadMode mode, int64_t nsp, const at::Tensor& grad, const at::Tensor& input,
                       c10::IntArrayRef padding, const at::Tensor& grad_input) {
  std::vector<int64_t> osize(grad.sizes().begin(), grad.sizes().end());
  if (grad_input.numel() == 0) return;
  int64_t rank = input.dim();
  std::vector<int64_t> in_size(input.sizes().begin(), input.sizes().end());
  std::vector<int64_t> pads(padding.begin(), padding.end());
  auto ct = grad.scalar_type() == c10::kDouble ? c10::kDouble : c10::kFloat;

  record::OpCall call(mode == PadMode::kReflect ? "reflection_pad_backward" : "replication_pad_backward");
  call.attr(static_cast<int64_t>(mode)).attr(nsp).attr(c10::IntArrayRef(pads)).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.output(grad_input);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.convert(in[0], e);
    for (int64_t k = 0; k < nsp; ++k) {
      int64_t d = rank - nsp + k, p = nsp - 1 - k;
      Dims ad = b.dims(g);
      ad[d] = in_size[d];
      g = scatter_add_dim(b, zero(b, e, ad), d, source_index(b, mode, in_size[d], osize[d], pads[2 * p]), g);
    }
    return Values{g};
  });
}

// One reflection/replication pad op's forward and backward, each declared
// once for its functional and out= forms.
template <PadMode M, int64_t N>
struct PadFwd {
  static constexpr const char* kName = M == PadMode::kReflect ? "reflection_pad" : "replication_pad";
  static OutMeta meta(const at::Tensor& self, c10::IntArrayRef padding) { return pad_meta(M, N, self, padding); }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, c10::IntArrayRef padding) {
    pad_into(M, N, self, padding, out);
  }
};
template <PadMode M, int64_t N>
struct PadBwd {
  static constexpr const char* kName = M == PadMode::kReflect ? "reflection_pad_backward" : "replication_pad_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, c10::IntArrayRef padding) {
    return pad_backward_meta(M, N, grad, self, padding);
  }
  static void impl(const at::Tensor& gi, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   c10::IntArrayRef padding) {
    pad_backward_into(M, N, grad, self, padding, gi);
  }
};
template <PadMode M, int64_t N>
void register_pad(torch::Library& m) {
  std::string name = mode_name(M) + std::to_string(N) + "d";
  register_variants<PadFwd<M, N>>(m, {name, "", name + ".out"});
  register_variants<PadBwd<M, N>>(m, {name + "_backward", "", name + "_backward.grad_input"});
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("constant_pad_nd", constant_pad_nd);
  register_pad<PadMode::kReflect, 1>(m);
  register_pad<PadMode::kReflect, 2>(m);
  register_pad<PadMode::kReflect, 3>(m);
  register_pad<PadMode::kReplicate, 1>(m);
  register_pad<PadMode::kReplicate, 2>(m);
  register_pad<PadMode::kReplicate, 3>(m);
}

}  // namespace
}  // namespace torch_tpu::ops
