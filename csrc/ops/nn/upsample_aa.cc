// Antialiased resampling: _upsample_bilinear2d_aa and _upsample_bicubic2d_aa
// (+ backward). When downsampling, the filter support widens with the scale,
// so each output pixel reads a variable number of inputs. The weights depend
// only on sizes and scales: they are built on the host as dense [out, in]
// matrices with PyTorch CPU's rules and passed as runtime inputs, and the
// program is two matmuls (rows then columns); backward uses the transposes.
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

float bilinear_filter(float x) {
  x = std::fabs(x);
  return x < 1.0f ? 1.0f - x : 0.0f;
}
// Keys cubic with a = -0.5, as PyTorch's antialiased bicubic uses.
float bicubic_filter(float x) {
  constexpr float a = -0.5f;
  x = std::fabs(x);
  if (x < 1.0f) return ((a + 2.0f) * x - (a + 3.0f)) * x * x + 1.0f;
  if (x < 2.0f) return (((x - 5.0f) * x + 8.0f) * x - 4.0f) * a;
  return 0.0f;
}

float aa_scale(int64_t in, int64_t out, bool align, std::optional<double> s) {
  if (align) return out > 1 ? static_cast<float>(in - 1) / (out - 1) : 0.0f;
  return (s.has_value() && *s > 0.) ? static_cast<float>(1.0 / *s) : static_cast<float>(in) / out;
}

// Row-major [out, in] interpolation weights along one dim.
std::vector<float> aa_weights(int64_t in, int64_t out, bool align, std::optional<double> s, bool cubic) {
  float scale = aa_scale(in, out, align, s);
  float interp = cubic ? 4.0f : 2.0f;
  float support = scale >= 1.0f ? interp * 0.5f * scale : interp * 0.5f;
  float invscale = scale >= 1.0f ? 1.0f / scale : 1.0f;
  std::vector<float> w(out * in, 0.0f);
  for (int64_t i = 0; i < out; ++i) {
    float center = scale * (i + 0.5f);
    int64_t xmin = std::max<int64_t>(static_cast<int64_t>(center - support + 0.5f), 0);
    int64_t xmax = std::min<int64_t>(static_cast<int64_t>(center + support + 0.5f), in);
    float total = 0.0f;
    for (int64_t j = xmin; j < xmax; ++j) {
      float v = (cubic ? bicubic_filter : bilinear_filter)((j - center + 0.5f) * invscale);
      w[i * in + j] = v;
      total += v;
    }
    if (total != 0.0f)
      for (int64_t j = xmin; j < xmax; ++j) w[i * in + j] /= total;
  }
  return w;
}

at::Tensor host_matrix(const std::vector<float>& w, int64_t rows, int64_t cols, c10::Device dev) {
  at::Tensor t = empty_tpu({rows, cols}, c10::kFloat, dev);
  if (!w.empty()) record::copy_from_host(t, w.data(), w.size() * sizeof(float));
  return t;
}

void check_sizes(c10::IntArrayRef in4, c10::IntArrayRef os) {
  TORCH_CHECK(os.size() == 2, "It is expected output_size equals to 2, but got size ", os.size());
  TORCH_CHECK(in4.size() == 4, "It is expected input_size equals to 4, but got size ", in4.size());
  TORCH_CHECK(in4[2] > 0 && in4[3] > 0 && os[0] > 0 && os[1] > 0,
              "Input and output sizes should be greater than 0, but got input (H: ", in4[2], ", W: ", in4[3],
              ") output (H: ", os[0], ", W: ", os[1], ")");
}

// out [B, OH, OW] = Wh [OH, H] . x [B, H, W] . Ww^T; backward with transposes.
void aa_into(const char* name, const at::Tensor& x, c10::IntArrayRef os, c10::IntArrayRef is, bool align,
             std::optional<double> sh, std::optional<double> sw, bool cubic, bool backward, const at::Tensor& out) {
  int64_t n = is[0], c = is[1], h = is[2], w = is[3], oh = os[0], ow = os[1];
  if (out.numel() == 0) return;
  at::Tensor wh = host_matrix(aa_weights(h, oh, align, sh, cubic), oh, h, x.device());
  at::Tensor ww = host_matrix(aa_weights(w, ow, align, sw, cubic), ow, w, x.device());
  auto ct = opmath(x.scalar_type());
  ElemType e = to_elem(ct);
  const char* prec = precision_for(c10::kFloat);
  record::OpCall call(name);
  call.attr(static_cast<int64_t>(ct)).attr(std::string_view(prec));
  call.input(x);
  call.input(wh);
  call.input(ww);
  call.output(out);
  int64_t bsz = n * c;
  call.run([&](Builder& b, const Values& in) {
    Value mh = b.convert(in[1], e), mw = b.convert(in[2], e);
    if (!backward) {
      Value v = b.reshape(b.convert(in[0], e), {bsz, h, w});
      Value y = b.dot_general(v, mw, {}, {}, {2}, {1}, e, prec);  // [B, H, OW]
      Value z = b.dot_general(y, mh, {}, {}, {1}, {1}, e, prec);  // [B, OW, OH]
      return Values{b.reshape(b.transpose(z, {0, 2, 1}), {n, c, oh, ow})};
    }
    Value g = b.reshape(b.convert(in[0], e), {bsz, oh, ow});
    Value y = b.dot_general(g, mw, {}, {}, {2}, {0}, e, prec);  // [B, OH, W]
    Value z = b.dot_general(y, mh, {}, {}, {1}, {0}, e, prec);  // [B, W, H]
    return Values{b.reshape(b.transpose(z, {0, 2, 1}), {n, c, h, w})};
  });
}

// Forward and backward, each declared once for its functional and out=
// forms. As CPU's structured kernels: out= has exactly the result's dtype,
// and results keep a channels-last input's (gradient's) layout.
template <bool kCubic>
struct UpsampleAA {
  static constexpr const char* kName = kCubic ? "_upsample_bicubic2d_aa" : "_upsample_bilinear2d_aa";
  static OutMeta meta(const at::Tensor& self, c10::IntArrayRef os, bool, std::optional<double>, std::optional<double>) {
    TORCH_CHECK(self.dim() == 4, "Non-empty 4D data tensor expected but got a tensor with sizes ", self.sizes());
    check_sizes(self.sizes(), os);
    TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"upsample_aa\" not implemented for '",
                                c10::toString(self.scalar_type()), "'");
    OutMeta m{{self.size(0), self.size(1), os[0], os[1]}, self.scalar_type(), self.device(), OutDtype::kExact, false};
    m.strides = strides_in(m.sizes, self.suggest_memory_format());
    return m;
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, c10::IntArrayRef os, bool align,
                   std::optional<double> sh, std::optional<double> sw) {
    aa_into(kName, self, os, self.sizes(), align, sh, sw, kCubic, false, out);
  }
};

template <bool kCubic>
struct UpsampleAABackward {
  static constexpr const char* kName = kCubic ? "_upsample_bicubic2d_aa_backward" : "_upsample_bilinear2d_aa_backward";
  static OutMeta meta(const at::Tensor& grad, c10::IntArrayRef os, c10::IntArrayRef is, bool, std::optional<double>,
                      std::optional<double>) {
    check_sizes(is, os);
    TORCH_CHECK(grad.dim() == 4 && grad.size(0) == is[0] && grad.size(1) == is[1] && grad.size(2) == os[0] &&
                    grad.size(3) == os[1],
                "Expected grad_output to have the shape [", is[0], ", ", is[1], ", ", os[0], ", ", os[1], "] but got ",
                grad.sizes());
    OutMeta m{is.vec(), grad.scalar_type(), grad.device(), OutDtype::kExact, false};
    m.strides = strides_in(m.sizes, grad.suggest_memory_format());
    return m;
  }
  static void impl(const at::Tensor& gi, const OutMeta&, const at::Tensor& grad, c10::IntArrayRef os,
                   c10::IntArrayRef is, bool align, std::optional<double> sh, std::optional<double> sw) {
    aa_into(kName, grad, os, is, align, sh, sw, kCubic, true, gi);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<UpsampleAA<false>>(m, {"_upsample_bilinear2d_aa", "", "_upsample_bilinear2d_aa.out"});
  register_variants<UpsampleAABackward<false>>(
      m, {"_upsample_bilinear2d_aa_backward", "", "_upsample_bilinear2d_aa_backward.grad_input"});
  register_variants<UpsampleAA<true>>(m, {"_upsample_bicubic2d_aa", "", "_upsample_bicubic2d_aa.out"});
  register_variants<UpsampleAABackward<true>>(
      m, {"_upsample_bicubic2d_aa_backward", "", "_upsample_bicubic2d_aa_backward.grad_input"});
}

}  // namespace
}  // namespace torch_tpu::ops
