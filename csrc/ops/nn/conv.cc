// Convolution: every conv1d/2d/3d and conv_transpose form reaches
// at::native::_convolution (composite), which validates the arguments and,
// for a PrivateUse1 tensor, calls convolution_overrideable; autograd's
// convolution_backward likewise reaches convolution_backward_overrideable.
// Both lower to stablehlo.convolution:
//   forward          conv(x, w; stride, padding, dilation, groups)
//   transposed       conv with lhs_dilation = stride over a flipped,
//                    group-transposed kernel
//   grad_input       the transposed conv of grad_output (and vice versa)
//   grad_weight      a conv of input with grad_output as the kernel, the
//                    batch as the contracted feature and the groups as
//                    batch_group_count
//   grad_bias        a sum over all but the channel dimension.
// bf16/f16 convolve in f32 and round once, as CPU does.
#include <ATen/Context.h>
#include <torch/library.h>

#include "ir/lib/conv.h"
#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

// CPU's rule (ConvUtils' determine_backend_memory_format): channels-last
// when the input or the weight suggests it.
c10::MemoryFormat conv_memory_format(const at::Tensor& input, const at::Tensor& weight) {
  if (input.dim() != 4 && input.dim() != 5) return c10::MemoryFormat::Contiguous;
  const auto cl = input.dim() == 4 ? c10::MemoryFormat::ChannelsLast : c10::MemoryFormat::ChannelsLast3d;
  if (input.suggest_memory_format() == cl || weight.suggest_memory_format() == cl) return cl;
  return c10::MemoryFormat::Contiguous;
}

using ir::Dims;
using Pads = std::vector<std::pair<int64_t, int64_t>>;

// "bf012"-style layout with `ns` spatial dimensions after two named ones.
std::string layout(const char* head, int64_t ns) {
  std::string s = head;
  for (int64_t i = 0; i < ns; ++i) s += static_cast<char>('0' + i);
  return s;
}

// Slices the spatial dims (2..) of `v` to start at lo[i] with size n[i].
Value crop_spatial(Builder& b, Value v, const Dims& lo, const Dims& n) {
  Dims d = b.dims(v);
  Dims start(d.size(), 0), limit = d;
  for (size_t i = 0; i < lo.size(); ++i) {
    start[i + 2] = lo[i];
    limit[i + 2] = lo[i] + n[i];
  }
  return b.slice(v, start, limit, Dims(d.size(), 1));
}

struct Params {
  Dims stride, padding, dilation, output_padding;
  int64_t groups;
  const char* prec;
};

// Regular convolution: x [N, C, ...], w [O, C/g, ...] -> [N, O, ...].
Value conv_fwd(Builder& b, Value x, Value w, const Params& p, ElemType acc) {
  int64_t ns = b.type(x).rank() - 2;
  Pads pads;
  for (int64_t i = 0; i < ns; ++i) pads.push_back({p.padding[i], p.padding[i]});
  return ir::conv_general(b, x, w, layout("bf", ns), layout("oi", ns), layout("bf", ns), p.stride, pads, Dims(ns, 1),
                          p.dilation, p.groups, 1, acc, p.prec);
}

// Transposed convolution: x [N, C, ...], w [C, O/g, ...] -> [N, O, ...]
// with out = (in-1)*stride - 2*pad + dil*(k-1) + output_padding + 1, i.e.
// the input gradient of a regular conv. `out_sizes` (spatial) is the size
// wanted; the result is cropped/extended to it.
Value conv_transpose(Builder& b, Value x, Value w, const Params& p, const Dims& out_sizes, ElemType acc) {
  int64_t ns = b.type(x).rank() - 2;
  Dims wd = b.dims(w);
  int64_t g = p.groups, cin = wd[0], cog = wd[1];
  // [C, O/g, k...] -> [g, C/g, O/g, k...] -> [g, O/g, C/g, k...] -> [O, C/g, k...], flipped.
  Dims split{g, cin / g, cog};
  Dims perm{0, 2, 1};
  Dims merged{g * cog, cin / g};
  Dims flip;
  for (int64_t i = 0; i < ns; ++i) {
    split.push_back(wd[2 + i]);
    perm.push_back(3 + i);
    merged.push_back(wd[2 + i]);
    flip.push_back(2 + i);
  }
  Value k = b.reshape(b.transpose(b.reshape(w, split), perm), merged);
  k = b.reverse(k, flip);
  Pads pads;
  Dims crop_lo, zero_lo;
  for (int64_t i = 0; i < ns; ++i) {
    int64_t span = p.dilation[i] * (wd[2 + i] - 1);
    int64_t lo = span - p.padding[i];
    // High padding chosen so the result has at least out_sizes[i].
    int64_t in = b.dims(x)[2 + i];
    int64_t full = (in - 1) * p.stride[i] + 1 + lo;  // before high padding
    int64_t hi = out_sizes[i] + span - full;
    // Negative padding crops; do it as a slice of the result instead.
    crop_lo.push_back(lo < 0 ? -lo : 0);
    pads.push_back({std::max<int64_t>(lo, 0), std::max<int64_t>(hi, 0)});
  }
  Value y = ir::conv_general(b, x, k, layout("bf", ns), layout("oi", ns), layout("bf", ns), Dims(ns, 1), pads, p.stride,
                             p.dilation, g, 1, acc, p.prec);
  return crop_spatial(b, y, crop_lo, out_sizes);
}

// Weight gradient of a regular conv with input x [N, C, ...] and grad
// output gy [N, O, ...]: gw [O, C/g, k...].
Value conv_wgrad(Builder& b, Value x, Value gy, const Params& p, const Dims& ksize, ElemType acc) {
  int64_t ns = b.type(x).rank() - 2;
  Pads pads;
  for (int64_t i = 0; i < ns; ++i) pads.push_back({p.padding[i], p.padding[i]});
  // Batch N is the contracted feature; C (split into g groups) the batch.
  Value gw = ir::conv_general(b, x, gy, layout("fb", ns), layout("io", ns), layout("fb", ns), p.dilation, pads,
                              Dims(ns, 1), p.stride, 1, p.groups, acc, p.prec);
  return crop_spatial(b, gw, Dims(ns, 0), ksize);
}

Value add_bias(Builder& b, Value y, Value bias) {
  Value bb = b.broadcast_in_dim(b.convert(bias, b.elem(y)), b.dims(y), {1});
  return b.add(y, bb);
}

void check_dtypes(const at::Tensor& input, const at::Tensor& weight, const at::Tensor& bias) {
  TORCH_CHECK(input.scalar_type() == weight.scalar_type(), "Input type (", input.scalar_type(), ") and weight type (",
              weight.scalar_type(), ") should be the same");
  TORCH_CHECK(!bias.defined() || bias.scalar_type() == input.scalar_type(), "Input type (", input.scalar_type(),
              ") and bias type (", bias.scalar_type(), ") should be the same");
  auto t = input.scalar_type();
  // CPU convolves integers too (exactly, in the integer type); only bool is refused.
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t) || c10::isIntegralType(t, /*includeBool=*/false),
                              "\"slow_conv2d_cpu\" not implemented for '", c10::toString(t), "'");
}

std::vector<int64_t> vec(c10::IntArrayRef a) { return {a.begin(), a.end()}; }

Params make_params(c10::IntArrayRef stride, c10::IntArrayRef padding, c10::IntArrayRef dilation,
                   c10::IntArrayRef output_padding, int64_t groups, int64_t ns, c10::ScalarType t) {
  auto expand = [&](c10::IntArrayRef a, const char* what, int64_t dflt) {
    Dims v = vec(a);
    if (v.empty()) v.assign(ns, dflt);
    if (v.size() == 1 && ns > 1) v.assign(ns, v[0]);
    TORCH_CHECK((int64_t)v.size() == ns, "expected ", what, " to be a single integer value or a list of ", ns,
                " values to match the convolution dimensions, but got ", what, "=", a);
    return v;
  };
  Params p{expand(stride, "stride", 1),
           expand(padding, "padding", 0),
           expand(dilation, "dilation", 1),
           expand(output_padding, "output_padding", 0),
           groups,
           precision_for(t)};
  TORCH_CHECK(groups > 0, "non-positive groups is not supported");
  for (int64_t i = 0; i < ns; ++i) {
    TORCH_CHECK(p.stride[i] > 0, "non-positive stride is not supported");
    TORCH_CHECK(p.dilation[i] > 0, "dilation should be greater than zero");
    TORCH_CHECK(p.padding[i] >= 0, "negative padding is not supported");
    TORCH_CHECK(p.output_padding[i] >= 0, "negative output_padding is not supported");
  }
  return p;
}

void key_params(record::OpCall& call, const Params& p, bool transposed) {
  call.attr(c10::IntArrayRef(p.stride)).attr(c10::IntArrayRef(p.padding)).attr(c10::IntArrayRef(p.dilation));
  call.attr(c10::IntArrayRef(p.output_padding)).attr(p.groups).attr(transposed).attr(std::string_view(p.prec));
}

at::Tensor convolution_overrideable(const at::Tensor& input, const at::Tensor& weight,
                                    const std::optional<at::Tensor>& bias_opt, c10::IntArrayRef stride,
                                    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed,
                                    c10::IntArrayRef output_padding, int64_t groups) {
  at::Tensor bias = bias_opt.value_or(at::Tensor());
  check_dtypes(input, weight, bias);
  int64_t ns = input.dim() - 2;
  TORCH_CHECK(ns >= 1 && weight.dim() == input.dim(), "Expected ", weight.dim(), "-dimensional input for ",
              weight.dim(), "-dimensional weight ", weight.sizes(), ", but got ", input.dim(),
              "-dimensional input of size ", input.sizes(), " instead");
  Params p = make_params(stride, padding, dilation, output_padding, groups, ns, input.scalar_type());
  int64_t cin = input.size(1);
  std::vector<int64_t> out{input.size(0)};
  if (!transposed) {
    TORCH_CHECK(weight.size(0) % groups == 0, "Given groups=", groups, ", expected weight to be divisible by ", groups,
                " at dimension 0, but got weight of size ", weight.sizes(), " instead");
    TORCH_CHECK(cin == weight.size(1) * groups, "Given groups=", groups, ", weight of size ", weight.sizes(),
                ", expected input", input.sizes(), " to have ", weight.size(1) * groups, " channels, but got ", cin,
                " channels instead");
    out.push_back(weight.size(0));
  } else {
    // CPU's transposed kernels check this; at::_convolution does not.
    for (int64_t i = 0; i < ns; ++i)
      TORCH_CHECK(p.output_padding[i] < p.stride[i] || p.output_padding[i] < p.dilation[i],
                  "output padding must be smaller than either stride or dilation, but got output_padding: ",
                  output_padding, " stride: ", stride, " dilation: ", dilation);
    TORCH_CHECK(cin == weight.size(0) && cin % groups == 0, "Given transposed=1, weight of size ", weight.sizes(),
                ", expected input", input.sizes(), " to have ", weight.size(0), " channels, but got ", cin,
                " channels instead");
    out.push_back(weight.size(1) * groups);
  }
  TORCH_CHECK(!bias.defined() || (bias.dim() == 1 && bias.size(0) == out[1]), "Given weight of size ", weight.sizes(),
              ", expected bias to be 1-dimensional with ", out[1], " elements, but got bias of size ", bias.sizes(),
              " instead");
  for (int64_t i = 0; i < ns; ++i) {
    int64_t in = input.size(2 + i), k = weight.size(2 + i);
    int64_t o = transposed
                    ? (in - 1) * p.stride[i] - 2 * p.padding[i] + p.dilation[i] * (k - 1) + p.output_padding[i] + 1
                    : (in + 2 * p.padding[i] - p.dilation[i] * (k - 1) - 1) / p.stride[i] + 1;
    TORCH_CHECK(o > 0 && (transposed || in + 2 * p.padding[i] >= p.dilation[i] * (k - 1) + 1),
                "Calculated output size is too small (input ", input.sizes(), ", kernel ", weight.sizes(), ")");
    out.push_back(o);
  }
  // The output keeps a channels-last input's (or weight's) layout, as CPU.
  at::Tensor result = at::empty(out, input.options().memory_format(conv_memory_format(input, weight)));
  if (result.numel() == 0) return result;
  record::OpCall call("convolution");
  key_params(call, p, transposed);
  call.attr(bias.defined());
  call.input(input);
  call.input(weight);
  if (bias.defined()) call.input(bias);
  call.output(result);
  ElemType acc = opmath_elem(input.scalar_type());
  Dims spatial(out.begin() + 2, out.end());
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], acc), w = b.convert(in[1], acc);
    Value y = transposed ? conv_transpose(b, x, w, p, spatial, acc) : conv_fwd(b, x, w, p, acc);
    if (bias.defined()) y = add_bias(b, y, in[2]);
    return Values{y};
  });
  return result;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> convolution_backward_overrideable(
    const at::Tensor& grad_output, const at::Tensor& input, const at::Tensor& weight, c10::IntArrayRef stride,
    c10::IntArrayRef padding, c10::IntArrayRef dilation, bool transposed, c10::IntArrayRef output_padding,
    int64_t groups, std::array<bool, 3> mask) {
  check_dtypes(input, weight, at::Tensor());
  TORCH_CHECK(grad_output.scalar_type() == input.scalar_type(), "Input type (", input.scalar_type(),
              ") and grad_output type (", grad_output.scalar_type(), ") should be the same");
  int64_t ns = input.dim() - 2;
  TORCH_CHECK(ns >= 1 && weight.dim() == input.dim() && grad_output.dim() == input.dim(),
              "convolution_backward: expected input, weight and grad_output of the same rank");
  Params p = make_params(stride, padding, dilation, output_padding, groups, ns, input.scalar_type());
  at::Tensor gi, gw, gb;
  const auto fmt = conv_memory_format(input, weight);
  if (mask[0]) gi = at::empty(input.sizes(), input.options().memory_format(fmt));
  if (mask[1]) gw = at::empty(weight.sizes(), weight.options().memory_format(fmt));
  int64_t cout = grad_output.size(1);
  if (mask[2]) gb = empty_tpu({cout}, grad_output.scalar_type(), grad_output.device());
  if (!mask[0] && !mask[1] && !mask[2]) return {gi, gw, gb};
  record::OpCall call("convolution_backward");
  key_params(call, p, transposed);
  call.attr(mask[0]).attr(mask[1]).attr(mask[2]);
  call.input(grad_output);
  call.input(input);
  call.input(weight);
  for (auto* t : {&gi, &gw, &gb})
    if (t->defined()) call.output(*t);
  ElemType acc = opmath_elem(input.scalar_type());
  Dims in_sp = vec(input.sizes().slice(2)), k_sp = vec(weight.sizes().slice(2));
  call.run([&](Builder& b, const Values& in) {
    Value gy = b.convert(in[0], acc), x = b.convert(in[1], acc), w = b.convert(in[2], acc);
    Values res;
    if (mask[0]) {
      if (!transposed) {
        res.push_back(conv_transpose(b, gy, w, p, in_sp, acc));
      } else {
        // Regular conv of gy; output_padding may leave it longer than x.
        res.push_back(crop_spatial(b, conv_fwd(b, gy, w, p, acc), Dims(ns, 0), in_sp));
      }
    }
    if (mask[1]) {
      // For transposed convs the roles of input and grad_output swap.
      res.push_back(transposed ? conv_wgrad(b, gy, x, p, k_sp, acc) : conv_wgrad(b, x, gy, p, k_sp, acc));
    }
    if (mask[2]) {
      Dims rd{0};
      for (int64_t i = 0; i < ns; ++i) rd.push_back(2 + i);
      res.push_back(b.reduce(gy, zero(b, acc), rd, BinaryOp::kAdd));
    }
    return res;
  });
  return {gi, gw, gb};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_overrideable", convolution_overrideable);
  m.impl("convolution_backward_overrideable", convolution_backward_overrideable);
}

}  // namespace torch_tpu::ops
