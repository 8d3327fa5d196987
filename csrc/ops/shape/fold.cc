// im2col / col2im (F.unfold / F.fold; each is the other's backward).
// im2col pads once and takes one strided slice per kernel offset; col2im
// places each kernel offset's block back with interior padding (stride)
// and sums, then crops the padding. Both unroll kh * kw slices.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

struct Geo {
  int64_t kh, kw, dh, dw, ph, pw, sh, sw;
};

Geo geo(c10::IntArrayRef k, c10::IntArrayRef dil, c10::IntArrayRef pad, c10::IntArrayRef st) {
  TORCH_CHECK(k.size() == 2 && dil.size() == 2 && pad.size() == 2 && st.size() == 2,
              "It is expected kernel_size, dilation, padding and stride to have 2 elements each");
  Geo g{k[0], k[1], dil[0], dil[1], pad[0], pad[1], st[0], st[1]};
  TORCH_CHECK(g.kh > 0 && g.kw > 0, "kernel size should be greater than zero, but got kernel_height: ", g.kh,
              " kernel_width: ", g.kw);
  TORCH_CHECK(g.dh > 0 && g.dw > 0, "dilation should be greater than zero, but got dilation_height: ", g.dh,
              " dilation_width: ", g.dw);
  TORCH_CHECK(g.ph >= 0 && g.pw >= 0, "padding should be non-negative, but got pad_height: ", g.ph,
              " pad_width: ", g.pw);
  TORCH_CHECK(g.sh > 0 && g.sw > 0, "stride should be greater than zero, but got stride_height: ", g.sh,
              " stride_width: ", g.sw);
  return g;
}

std::pair<int64_t, int64_t> blocks(const Geo& g, int64_t h, int64_t w) {
  return {(h + 2 * g.ph - (g.dh * (g.kh - 1) + 1)) / g.sh + 1, (w + 2 * g.pw - (g.dw * (g.kw - 1) + 1)) / g.sw + 1};
}

at::Tensor& im2col_out(const at::Tensor& self, c10::IntArrayRef k, c10::IntArrayRef dil, c10::IntArrayRef pad,
                       c10::IntArrayRef st, at::Tensor& out) {
  Geo g = geo(k, dil, pad, st);
  bool batched = self.dim() == 4;
  TORCH_CHECK((self.dim() == 3 && self.size(0) != 0 && self.size(1) != 0 && self.size(2) != 0) ||
                  (batched && self.size(1) != 0 && self.size(2) != 0 && self.size(3) != 0),
              "Expected 3D or 4D (batch mode) tensor with possibly 0 batch size and other non-zero dimensions for "
              "input, but got: ",
              self.sizes());
  at::Tensor x = batched ? self : self.unsqueeze(0);
  int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
  auto [oh, ow] = blocks(g, h, w);
  TORCH_CHECK(oh >= 1 && ow >= 1, "Given input with spatial size (", h, ", ", w, "), kernel_size=(", g.kh, ", ", g.kw,
              "), dilation=(", g.dh, ", ", g.dw, "), padding=(", g.ph, ", ", g.pw,
              "), calculated shape of the array of sliding blocks as (", oh, ", ", ow,
              "), but its components must be at least one.");
  std::vector<int64_t> oshape{n, c * g.kh * g.kw, oh * ow};
  if (!batched) oshape.erase(oshape.begin());
  prepare_out(out, oshape, self.scalar_type(), "im2col");
  record::OpCall call("im2col");
  call.attr(k).attr(dil).attr(pad).attr(st).attr(batched);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value v = b.reshape(in[0], {n, c, h, w});
    Value p = b.pad(v, zero(b, b.elem(v)), {0, 0, g.ph, g.pw}, {0, 0, g.ph, g.pw}, {0, 0, 0, 0});
    Values parts;
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t r0 = i * g.dh, c0 = j * g.dw;
        Value s =
            b.slice(p, {0, 0, r0, c0}, {n, c, r0 + (oh - 1) * g.sh + 1, c0 + (ow - 1) * g.sw + 1}, {1, 1, g.sh, g.sw});
        parts.push_back(b.reshape(s, {n, c, 1, oh * ow}));
      }
    Value cat = b.concatenate(parts, 2);  // [n, c, kh*kw, L]: channel-major like ATen
    return Values{b.reshape(cat, Dims(oshape.begin(), oshape.end()))};
  });
  return out;
}
at::Tensor im2col(const at::Tensor& self, c10::IntArrayRef k, c10::IntArrayRef dil, c10::IntArrayRef pad,
                  c10::IntArrayRef st) {
  at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device());
  return im2col_out(self, k, dil, pad, st, out);
}

at::Tensor& col2im_out(const at::Tensor& self, c10::SymIntArrayRef output_size, c10::IntArrayRef k,
                       c10::IntArrayRef dil, c10::IntArrayRef pad, c10::IntArrayRef st, at::Tensor& out) {
  TORCH_CHECK(output_size.size() == 2, "It is expected output_size equals to 2, but got size ", output_size.size());
  Geo g = geo(k, dil, pad, st);
  int64_t h = output_size[0].expect_int(), w = output_size[1].expect_int();
  TORCH_CHECK(h > 0 && w > 0, "output_size should be greater than zero, but got output_height: ", h,
              " output_width: ", w);
  bool batched = self.dim() == 3;
  TORCH_CHECK((self.dim() == 2 && self.size(0) != 0 && self.size(1) != 0) ||
                  (batched && self.size(1) != 0 && self.size(2) != 0),
              "Expected 2D or 3D (batch mode) tensor for input with possibly 0 batch size and non-zero dimensions for "
              "input, but got: ",
              self.sizes());
  at::Tensor x = batched ? self : self.unsqueeze(0);
  int64_t n = x.size(0), ck = x.size(1), l = x.size(2);
  TORCH_CHECK(ck % (g.kh * g.kw) == 0,
              "Expected size of input's dimension 1 to be divisible by the product of "
              "kernel_size, but got input.size(1)=",
              ck, " and kernel_size=(", g.kh, ", ", g.kw, ")");
  auto [oh, ow] = blocks(g, h, w);
  TORCH_CHECK(oh >= 1 && ow >= 1 && oh * ow == l, "Given output_size=(", h, ", ", w, "), kernel_size=(", g.kh, ", ",
              g.kw, "), dilation=(", g.dh, ", ", g.dw, "), padding=(", g.ph, ", ", g.pw, "), stride=(", g.sh, ", ",
              g.sw, "), expected size of input's dimension 2 to match the calculated number of sliding blocks ", oh,
              " * ", ow, " = ", oh * ow, ", but got input.size(2)=", l, ".");
  int64_t c = ck / (g.kh * g.kw);
  std::vector<int64_t> oshape{n, c, h, w};
  if (!batched) oshape.erase(oshape.begin());
  prepare_out(out, oshape, self.scalar_type(), "col2im");
  record::OpCall call("col2im");
  call.attr(h).attr(w).attr(k).attr(dil).attr(pad).attr(st).attr(batched);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = b.elem(in[0]);
    // bf16/f16 blocks are summed in f32.
    ElemType acc_t = (e == ElemType::kBF16 || e == ElemType::kF16) ? ElemType::kF32 : e;
    Value v = b.convert(b.reshape(in[0], {n, c, g.kh * g.kw, oh, ow}), acc_t);
    int64_t hp = h + 2 * g.ph, wp = w + 2 * g.pw;
    Value acc = zero(b, acc_t, {n, c, hp, wp});
    Value z = zero(b, acc_t);
    for (int64_t i = 0; i < g.kh; ++i)
      for (int64_t j = 0; j < g.kw; ++j) {
        int64_t kk = i * g.kw + j;
        Value s = b.reshape(b.slice(v, {0, 0, kk, 0, 0}, {n, c, kk + 1, oh, ow}, {1, 1, 1, 1, 1}), {n, c, oh, ow});
        int64_t r0 = i * g.dh, c0 = j * g.dw;
        int64_t rh = hp - (r0 + (oh - 1) * g.sh + 1), rw = wp - (c0 + (ow - 1) * g.sw + 1);
        acc = b.add(acc, b.pad(s, z, {0, 0, r0, c0}, {0, 0, rh, rw}, {0, 0, g.sh - 1, g.sw - 1}));
      }
    Value crop = b.slice(acc, {0, 0, g.ph, g.pw}, {n, c, g.ph + h, g.pw + w}, {1, 1, 1, 1});
    return Values{b.reshape(b.convert(crop, e), Dims(oshape.begin(), oshape.end()))};
  });
  return out;
}
at::Tensor col2im(const at::Tensor& self, c10::SymIntArrayRef output_size, c10::IntArrayRef k, c10::IntArrayRef dil,
                  c10::IntArrayRef pad, c10::IntArrayRef st) {
  at::Tensor out = empty_tpu({0}, self.scalar_type(), self.device());
  return col2im_out(self, output_size, k, dil, pad, st, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("im2col", im2col);
  m.impl("im2col.out", im2col_out);
  m.impl("col2im", col2im);
  m.impl("col2im.out", col2im_out);
}

}  // namespace
}  // namespace torch_tpu::ops
