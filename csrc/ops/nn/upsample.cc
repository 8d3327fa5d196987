// Resampling: upsample_{nearest,_nearest_exact}{1,2,3}d, upsample_linear1d,
// upsample_bilinear2d, upsample_trilinear3d, upsample_bicubic2d and their
// backward kernels (functional and out= forms).
//
// Every mode is separable, so each spatial dim is resampled on its own:
// output[o] = sum_t w[o, t] * input[idx[o, t]] (1 tap for nearest, 2 for
// linear, 4 for cubic). The (idx, w) tables are computed on the host with
// PyTorch CPU's coordinate rules and float types, then passed as runtime
// inputs: the program depends only on shapes, and the floor()/lambda values
// match CPU bit for bit (no risk of the compiler contracting the index
// arithmetic differently). Backward scatter-adds with the same tables.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;
using Scales = std::vector<std::optional<double>>;

enum class Mode : int64_t { kNearest, kNearestExact, kLinear, kCubic };

int taps_of(Mode m) { return m == Mode::kLinear ? 2 : m == Mode::kCubic ? 4 : 1; }

// --- host-side coordinate rules (PyTorch's UpSample.h semantics) -------------

template <typename T>
T scales_value(std::optional<double> s, int64_t in, int64_t out) {
  // A non-positive scale means "not given" (old serialized models use -1).
  return (s.has_value() && *s > 0.) ? static_cast<T>(1.0 / *s) : static_cast<T>(in) / out;
}

template <typename T>
T area_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> s) {
  if (align_corners) return out > 1 ? static_cast<T>(in - 1) / (out - 1) : T(0);
  return scales_value<T>(s, in, out);
}

template <typename T>
T source_index(T scale, int64_t dst, bool align_corners, bool cubic) {
  if (align_corners) return scale * dst;
  T src = scale * (dst + static_cast<T>(0.5)) - static_cast<T>(0.5);
  return (!cubic && src < T(0)) ? T(0) : src;
}

int64_t nearest_index(int64_t o, int64_t in, int64_t out, std::optional<double> s, bool exact) {
  if (!exact) {
    if (out == in) return o;
    if (out == 2 * in) return o >> 1;
  }
  float scale = scales_value<float>(s, in, out);
  float f = exact ? floorf((o + 0.5) * scale) : floorf(o * scale);
  return std::min(static_cast<int64_t>(f), in - 1);
}

template <typename T>
T cubic1(T x, T a) {
  return ((a + 2) * x - (a + 3)) * x * x + 1;
}
template <typename T>
T cubic2(T x, T a) {
  return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
}

// Appends the [out, taps] index/weight table of one spatial dim.
template <typename T>
void build_table(Mode mode, int64_t in, int64_t out, bool align_corners, std::optional<double> s,
                 std::vector<int32_t>& idx, std::vector<T>& w) {
  for (int64_t o = 0; o < out; ++o) {
    switch (mode) {
      case Mode::kNearest:
      case Mode::kNearestExact:
        idx.push_back(static_cast<int32_t>(nearest_index(o, in, out, s, mode == Mode::kNearestExact)));
        w.push_back(T(1));
        break;
      case Mode::kLinear: {
        if (in == out) {  // scale 1: plain copy, whatever the given scale
          idx.insert(idx.end(), {static_cast<int32_t>(o), static_cast<int32_t>(o)});
          w.insert(w.end(), {T(1), T(0)});
          break;
        }
        T ratio = area_scale<T>(in, out, align_corners, s);
        T real = source_index<T>(ratio, o, align_corners, false);
        int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
        T l1 = std::min(std::max(real - static_cast<T>(i0), T(0)), T(1));
        int64_t i1 = i0 + (i0 < in - 1 ? 1 : 0);
        idx.insert(idx.end(), {static_cast<int32_t>(i0), static_cast<int32_t>(i1)});
        w.insert(w.end(), {T(1) - l1, l1});
        break;
      }
      case Mode::kCubic: {
        T scale = area_scale<T>(in, out, align_corners, s);
        T real = source_index<T>(scale, o, align_corners, true);
        int64_t i0 = std::min(static_cast<int64_t>(std::floor(real)), in - 1);
        T t = std::min(std::max(real - static_cast<T>(i0), T(0)), T(1));
        const T a = T(-0.75);
        T c[4] = {cubic2<T>(t + T(1), a), cubic1<T>(t, a), cubic1<T>(T(1) - t, a), cubic2<T>(T(1) - t + T(1), a)};
        for (int k = 0; k < 4; ++k) {
          // Taps outside the input read the border pixel.
          int64_t j = std::max<int64_t>(std::min<int64_t>(i0 - 1 + k, in - 1), 0);
          idx.push_back(static_cast<int32_t>(j));
          w.push_back(c[k]);
        }
        break;
      }
    }
  }
}

// Host tables for all spatial dims, concatenated, as tpu tensors.
struct Tables {
  at::Tensor idx, w;
};

template <typename T>
Tables make_tables_t(Mode mode, c10::IntArrayRef in, c10::IntArrayRef out, bool ac, const Scales& s,
                     c10::ScalarType wdtype, c10::Device dev) {
  std::vector<int32_t> idx;
  std::vector<T> w;
  for (size_t k = 0; k < in.size(); ++k) build_table<T>(mode, in[k], out[k], ac, s[k], idx, w);
  Tables t;
  t.idx = empty_tpu({static_cast<int64_t>(idx.size())}, c10::kInt, dev);
  record::copy_from_host(t.idx, idx.data(), idx.size() * sizeof(int32_t));
  if (mode == Mode::kLinear || mode == Mode::kCubic) {
    t.w = empty_tpu({static_cast<int64_t>(w.size())}, wdtype, dev);
    record::copy_from_host(t.w, w.data(), w.size() * sizeof(T));
  }
  return t;
}

// Resampling weights are float32 (float64 for double), integers included.
c10::ScalarType resample_math(c10::ScalarType t) { return t == c10::kDouble ? c10::kDouble : c10::kFloat; }

Tables make_tables(Mode mode, c10::IntArrayRef in, c10::IntArrayRef out, bool ac, const Scales& s, c10::ScalarType ct,
                   c10::Device dev) {
  if (ct == c10::kDouble) return make_tables_t<double>(mode, in, out, ac, s, ct, dev);
  return make_tables_t<float>(mode, in, out, ac, s, ct, dev);
}

// --- lowering helpers -------------------------------------------------------------

// acc[..., idx[o], ...] += upd[..., o, ...] along dim d.
Value scatter_add_dim(Builder& b, Value acc, int64_t d, Value idx, Value upd) {
  Dims wins;
  for (int64_t i = 0; i < static_cast<int64_t>(b.dims(upd).size()); ++i)
    if (i != d) wins.push_back(i);
  return b.scatter(acc, idx, upd, wins, {d}, {d}, 1, BinaryOp::kAdd);
}

// Tap t of the [out, taps] table stored at `off` in the flat table.
Value table_col(Builder& b, Value flat, int64_t off, int64_t out, int taps, int t) {
  Value tab = b.reshape(b.slice(flat, {off}, {off + out * taps}, {1}), {out, taps});
  return b.slice(tab, {0, t}, {out, t + 1}, {1, 1});  // [out, 1]
}

// --- checks -------------------------------------------------------------------------

const char* dim_names(size_t k, size_t n) {
  static const char* names3[] = {"D", "H", "W"};
  return names3[3 - n + k];
}

void common_check(c10::IntArrayRef input_size, c10::IntArrayRef output_size, size_t nsp) {
  TORCH_CHECK(output_size.size() == nsp, "It is expected output_size equals to ", nsp, ", but got size ",
              output_size.size());
  TORCH_CHECK(input_size.size() == nsp + 2, "It is expected input_size equals to ", nsp + 2, ", but got size ",
              input_size.size());
  bool ok = true;
  for (size_t k = 0; k < nsp; ++k) ok = ok && input_size[k + 2] > 0 && output_size[k] > 0;
  if (!ok) {
    std::ostringstream ss;
    ss << "Input and output sizes should be greater than 0, but got input (";
    for (size_t k = 0; k < nsp; ++k) ss << (k ? ", " : "") << dim_names(k, nsp) << ": " << input_size[k + 2];
    ss << ") output (";
    for (size_t k = 0; k < nsp; ++k) ss << (k ? ", " : "") << dim_names(k, nsp) << ": " << output_size[k];
    ss << ")";
    TORCH_CHECK(false, ss.str());
  }
}

void check_dtype(const char* name, Mode mode, c10::ScalarType t) {
  bool ok = c10::isFloatingType(t) || ((mode == Mode::kNearest || mode == Mode::kNearestExact) && t == c10::kByte);
  TORCH_CHECK_NOT_IMPLEMENTED(ok, "\"", name, "\" not implemented for '", c10::toString(t), "'");
}

// --- kernels ------------------------------------------------------------------------

// Checks of an upsample call; the result's sizes.
std::vector<int64_t> upsample_sizes(const char* name, Mode mode, const at::Tensor& input, c10::IntArrayRef output_size,
                                    size_t nsp) {
  common_check(input.sizes(), output_size, nsp);
  int64_t tail = 1;
  for (int64_t i = 1; i < input.dim(); ++i) tail *= input.size(i);
  TORCH_CHECK(input.numel() != 0 || tail != 0, "Non-empty ", nsp + 2,
              "D data tensor expected but got a tensor with sizes ", input.sizes());
  check_dtype(name, mode, input.scalar_type());
  std::vector<int64_t> osize{input.size(0), input.size(1)};
  osize.insert(osize.end(), output_size.begin(), output_size.end());
  return osize;
}

void upsample_into(Mode mode, const at::Tensor& input, c10::IntArrayRef output_size, bool align_corners,
                   const Scales& scales, const at::Tensor& out) {
  size_t nsp = scales.size();
  if (out.numel() == 0) return;

  bool weighted = mode == Mode::kLinear || mode == Mode::kCubic;
  auto ct = resample_math(input.scalar_type());
  Tables tab = make_tables(mode, input.sizes().slice(2), output_size, align_corners, scales, ct, input.device());
  int taps = taps_of(mode);

  // Keyed by tap count, not op name: nearest and nearest-exact (and the
  // 1d/2d/3d variants of one shape) share executables; tables differ only.
  record::OpCall call("upsample");
  call.attr(static_cast<int64_t>(taps)).attr(weighted);
  call.input(input);
  call.input(tab.idx);
  if (weighted) call.input(tab.w);
  call.output(out);
  std::vector<int64_t> in_sp(input.sizes().begin() + 2, input.sizes().end());
  std::vector<int64_t> out_sp(output_size.begin(), output_size.end());
  call.run([&](Builder& b, const Values& in) {
    // Nearest copies values exactly (any dtype); interpolation runs in opmath.
    Value x = weighted ? b.convert(in[0], to_elem(ct)) : in[0];
    // Offsets of each dim's table; dims go last to first, like CPU's
    // innermost-first accumulation order.
    std::vector<int64_t> offs(nsp, 0);
    for (size_t k = 1; k < nsp; ++k) offs[k] = offs[k - 1] + out_sp[k - 1] * taps;
    for (int64_t k = static_cast<int64_t>(nsp) - 1; k >= 0; --k) {
      int64_t d = k + 2, o = out_sp[k];
      Value acc;
      for (int t = 0; t < taps; ++t) {
        Value g = gather_along(b, x, d, table_col(b, in[1], offs[k], o, taps, t));
        if (weighted) {
          Value wt = b.reshape(table_col(b, in[2], offs[k], o, taps, t), {o});
          g = b.mul(g, b.broadcast_in_dim(wt, b.dims(g), {d}));
        }
        acc = t == 0 ? g : b.add(acc, g);
      }
      x = acc;
    }
    return Values{x};
  });
}

// Checks of an upsample backward call.
void upsample_backward_check(const char* name, const at::Tensor& grad, c10::IntArrayRef output_size,
                             c10::IntArrayRef input_size, size_t nsp) {
  common_check(input_size, output_size, nsp);
  TORCH_CHECK(grad.dim() == static_cast<int64_t>(nsp + 2), "Expected grad_output to be a tensor of dimension ", nsp + 2,
              " but got: dimension ", grad.dim());
  for (size_t i = 0; i < nsp + 2; ++i) {
    int64_t want = i < 2 ? input_size[i] : output_size[i - 2];
    TORCH_CHECK(grad.size(i) == want, "Expected grad_output to have the same shape as output; output.size(", i,
                ") = ", want, " but got grad_output.size(", i, ") = ", grad.size(i));
  }
  check_dtype(name, Mode::kLinear, grad.scalar_type());  // backward: floating types only
}

void upsample_backward_into(Mode mode, const at::Tensor& grad, c10::IntArrayRef output_size,
                            c10::IntArrayRef input_size, bool align_corners, const Scales& scales,
                            const at::Tensor& grad_input) {
  size_t nsp = scales.size();
  if (grad_input.numel() == 0) return;
  if (grad.numel() == 0) {
    grad_input.zero_();
    return;
  }

  auto ct = resample_math(grad.scalar_type());
  Tables tab = make_tables(mode, input_size.slice(2), output_size, align_corners, scales, ct, grad.device());
  bool weighted = mode == Mode::kLinear || mode == Mode::kCubic;
  int taps = taps_of(mode);

  record::OpCall call("upsample_backward");
  call.attr(static_cast<int64_t>(taps)).attr(weighted);
  call.input(grad);
  call.input(tab.idx);
  if (weighted) call.input(tab.w);
  call.output(grad_input);
  std::vector<int64_t> in_sp(input_size.begin() + 2, input_size.end());
  std::vector<int64_t> out_sp(output_size.begin(), output_size.end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.convert(in[0], e);  // accumulate in opmath, as CPU does
    std::vector<int64_t> offs(nsp, 0);
    for (size_t k = 1; k < nsp; ++k) offs[k] = offs[k - 1] + out_sp[k - 1] * taps;
    for (size_t k = 0; k < nsp; ++k) {
      int64_t d = k + 2, o = out_sp[k];
      Dims ad = b.dims(g);
      ad[d] = in_sp[k];
      Value acc = zero(b, e, ad);
      for (int t = 0; t < taps; ++t) {
        Value upd = g;
        if (weighted) {
          Value wt = b.reshape(table_col(b, in[2], offs[k], o, taps, t), {o});
          upd = b.mul(g, b.broadcast_in_dim(wt, b.dims(g), {d}));
        }
        acc = scatter_add_dim(b, acc, d, table_col(b, in[1], offs[k], o, taps, t), upd);
      }
      g = acc;
    }
    return Values{g};
  });
}

// --- ATen wrappers ------------------------------------------------------------------

using OptD = std::optional<double>;

// align_corners and the scales from the tail of a schema's arguments:
// nearest ops take one optional scale per dim, the others align_corners first.
struct Tail {
  bool ac;
  Scales s;
};
template <class... S>
Tail tail(bool ac, S... s) {
  return {ac, {s...}};
}
template <class... S>
Tail tail(OptD first, S... s) {
  return {false, {first, s...}};
}

struct UpsampleOp {
  const char* name;  // the schema's, also in dtype errors
  Mode mode;
};

// out= and grad_input= must have the input's (the gradient's) dtype, with
// CPU's message.
void check_same_dtype(const at::Tensor& out, c10::ScalarType want, const char* what) {
  TORCH_CHECK(out.scalar_type() == want, "expected dtype ", want, " for `", what, "` but got dtype ",
              out.scalar_type());
}

// One upsample op's forward and backward, each declared once for its
// functional and out= forms; `A` is the schema's arguments after
// output_size (and input_size), see Tail. Results keep a channels-last
// input's (gradient's) layout, as on CPU.
template <const UpsampleOp& D, class... A>
struct UpsampleFwd {
  static constexpr const char* kName = D.name;
  static OutMeta meta(const at::Tensor& x, c10::IntArrayRef os, A... a) {
    Tail t = tail(a...);
    OutMeta m{upsample_sizes(D.name, D.mode, x, os, t.s.size()), x.scalar_type(), x.device(), OutDtype::kOwn, false};
    m.strides = strides_in(m.sizes, x.suggest_memory_format());
    return m;
  }
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor& x, c10::IntArrayRef, A...) {
    check_same_dtype(out, x.scalar_type(), "output");
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& x, c10::IntArrayRef os, A... a) {
    Tail t = tail(a...);
    upsample_into(D.mode, x, os, t.ac, t.s, out);
  }
};

template <const UpsampleOp& D, class... A>
struct UpsampleBwd {
  static constexpr const char* kName = D.name;
  static OutMeta meta(const at::Tensor& g, c10::IntArrayRef os, c10::IntArrayRef is, A... a) {
    Tail t = tail(a...);
    std::string name = std::string(D.name) + "_backward";
    upsample_backward_check(name.c_str(), g, os, is, t.s.size());
    OutMeta m{is.vec(), g.scalar_type(), g.device(), OutDtype::kOwn, false};
    m.strides = strides_in(m.sizes, g.suggest_memory_format());
    return m;
  }
  static void check_out(const at::Tensor& gi, const OutMeta&, const at::Tensor& g, c10::IntArrayRef, c10::IntArrayRef,
                        A...) {
    check_same_dtype(gi, g.scalar_type(), "grad_input");
  }
  static void impl(const at::Tensor& gi, const OutMeta&, const at::Tensor& g, c10::IntArrayRef os, c10::IntArrayRef is,
                   A... a) {
    Tail t = tail(a...);
    upsample_backward_into(D.mode, g, os, is, t.ac, t.s, gi);
  }
};

template <const UpsampleOp& D, class... A>
void register_upsample(torch::Library& m) {
  std::string name = D.name;
  register_variants<UpsampleFwd<D, A...>>(m, {name, "", name + ".out"});
  register_variants<UpsampleBwd<D, A...>>(m, {name + "_backward", "", name + "_backward.grad_input"});
}

constexpr UpsampleOp kNearest1d{"upsample_nearest1d", Mode::kNearest};
constexpr UpsampleOp kNearest2d{"upsample_nearest2d", Mode::kNearest};
constexpr UpsampleOp kNearest3d{"upsample_nearest3d", Mode::kNearest};
constexpr UpsampleOp kExact1d{"_upsample_nearest_exact1d", Mode::kNearestExact};
constexpr UpsampleOp kExact2d{"_upsample_nearest_exact2d", Mode::kNearestExact};
constexpr UpsampleOp kExact3d{"_upsample_nearest_exact3d", Mode::kNearestExact};
constexpr UpsampleOp kLinear1d{"upsample_linear1d", Mode::kLinear};
constexpr UpsampleOp kBilinear2d{"upsample_bilinear2d", Mode::kLinear};
constexpr UpsampleOp kTrilinear3d{"upsample_trilinear3d", Mode::kLinear};
constexpr UpsampleOp kBicubic2d{"upsample_bicubic2d", Mode::kCubic};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_upsample<kNearest1d, OptD>(m);
  register_upsample<kNearest2d, OptD, OptD>(m);
  register_upsample<kNearest3d, OptD, OptD, OptD>(m);
  register_upsample<kExact1d, OptD>(m);
  register_upsample<kExact2d, OptD, OptD>(m);
  register_upsample<kExact3d, OptD, OptD, OptD>(m);
  register_upsample<kLinear1d, bool, OptD>(m);
  register_upsample<kBilinear2d, bool, OptD, OptD>(m);
  register_upsample<kTrilinear3d, bool, OptD, OptD, OptD>(m);
  register_upsample<kBicubic2d, bool, OptD, OptD>(m);
}

}  // namespace
}  // namespace torch_tpu::ops
