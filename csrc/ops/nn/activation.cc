// NN activations and their backward kernels: gelu (exact and tanh), silu,
// elu (celu/selu compose onto it), hardtanh, leaky_relu, softplus,
// hardsigmoid, hardswish, mish, glu, threshold, softshrink / hardshrink,
// prelu's kernels, rrelu_with_noise, log_sigmoid, and logit (+
// logit_backward). Python-number parameters are runtime scalars. bf16/f16
// compute in f32 (PyTorch's opmath type) and round once on the way out.
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;
using ir::Dims;

Value gt(Builder& b, Value x, Value y) { return b.compare(x, y, Direction::kGt); }

using S = const c10::Scalar&;
// The result of an activation: self's sizes, dtype and device.
OutMeta same_as(const at::Tensor& s) { return {s.sizes().vec(), s.scalar_type(), s.device()}; }

// Forward: out has self's dtype. Operands: {self, scalars...}.
void fwd(const char* name, std::vector<Operand> ins, const at::Tensor& out, const PointwiseFn& fn) {
  pointwise(name, ins, out, opmath(ins[0].t.scalar_type()), fn);
}
// Backward: operands {grad, self, scalars...}; result dtype of (grad, self).
OutMeta bwd_meta(const at::Tensor& g, const at::Tensor& s) {
  return {broadcast_shape({g, s}), at::result_type(g, s), g.device()};
}
void bwd(const char* name, std::vector<Operand> ins, const at::Tensor& out, const OutMeta& m, const PointwiseFn& fn) {
  pointwise(name, ins, out, opmath(m.dtype), fn);
}
// A backward kernel with a functional form only.
at::Tensor bwd_new(const char* name, std::vector<Operand> ins, const PointwiseFn& fn) {
  OutMeta m = bwd_meta(ins[0].t, ins[1].t);
  at::Tensor out = empty_tpu(m.sizes, m.dtype, m.device);
  bwd(name, std::move(ins), out, m, fn);
  return out;
}
// Backward kernels of the activations whose grad depends on self alone:
// the result has self's dtype (ATen's structured backward kernels).
OutMeta self_bwd_meta(const at::Tensor& g, const at::Tensor& s) {
  return {broadcast_shape({g, s}), s.scalar_type(), s.device()};
}
// Registers an op's functional and .grad_input (out=) forms.
template <class Op>
void register_backward(torch::Library& m, const char* name) {
  register_variants<Op>(m, {name, "", std::string(name) + ".grad_input"});
}

// --- gelu --------------------------------------------------------------------

int64_t gelu_mode(std::string_view approximate) {
  if (approximate == "none") return 0;
  if (approximate == "tanh") return 1;
  TORCH_CHECK(false, "approximate argument must be either none or tanh.");
}

constexpr double kSqrt2 = 1.4142135623730951;
constexpr double kSqrt2OverPi = 0.7978845608028654;  // sqrt(2/pi)
constexpr double kInvSqrt2Pi = 0.3989422804014327;   // 1/sqrt(2*pi)
constexpr double kGeluC = 0.044715;

Value gelu_fwd(Builder& b, Value x, int64_t mode) {
  Value half_x = b.mul(full_like(b, 0.5, x), x);
  Value one = full_like(b, 1.0, x);
  if (mode == 0) {
    Value e = b.erf(b.mul(x, full_like(b, 1.0 / kSqrt2, x)));
    return b.mul(half_x, b.add(one, e));
  }
  Value x3 = b.mul(b.mul(x, x), x);
  Value inner = b.mul(full_like(b, kSqrt2OverPi, x), b.add(x, b.mul(full_like(b, kGeluC, x), x3)));
  return b.mul(half_x, b.add(one, b.tanh(inner)));
}

// d gelu(x) / dx times grad.
Value gelu_bwd(Builder& b, Value g, Value x, int64_t mode) {
  Value one = full_like(b, 1.0, x);
  Value half = full_like(b, 0.5, x);
  if (mode == 0) {
    Value cdf = b.mul(half, b.add(one, b.erf(b.mul(x, full_like(b, 1.0 / kSqrt2, x)))));
    Value pdf = b.mul(full_like(b, kInvSqrt2Pi, x), b.exp(b.mul(full_like(b, -0.5, x), b.mul(x, x))));
    return b.mul(g, b.add(cdf, b.mul(x, pdf)));
  }
  Value x2 = b.mul(x, x);
  Value inner = b.mul(full_like(b, kSqrt2OverPi, x), b.add(x, b.mul(full_like(b, kGeluC, x), b.mul(x2, x))));
  Value t = b.tanh(inner);
  Value d_inner = b.mul(full_like(b, kSqrt2OverPi, x), b.add(one, b.mul(full_like(b, 3 * kGeluC, x), x2)));
  Value left = b.mul(half, b.add(one, t));
  Value right = b.mul(b.mul(b.mul(half, x), b.sub(one, b.mul(t, t))), d_inner);
  return b.mul(g, b.add(left, right));
}

void gelu_into(const at::Tensor& self, int64_t mode, const at::Tensor& out) {
  pointwise(
      "gelu", {self}, out, opmath(self.scalar_type()),
      [mode](Builder& b, const Values& x) { return gelu_fwd(b, x[0], mode); }, mode);
}

struct Gelu {
  static constexpr const char* kName = "gelu";
  static OutMeta meta(const at::Tensor& self, std::string_view approximate) {
    gelu_mode(approximate);  // validates
    check_float(self, "GeluKernelImpl");
    return same_as(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, std::string_view approximate) {
    gelu_into(self, gelu_mode(approximate), out);
  }
};
void gelu_backward_into(const at::Tensor& grad, const at::Tensor& self, int64_t mode, const at::Tensor& out) {
  pointwise(
      "gelu_backward", {grad, self}, out, opmath(self.scalar_type()),
      [mode](Builder& b, const Values& x) { return gelu_bwd(b, x[0], x[1], mode); }, mode);
}
struct GeluBackward {
  static constexpr const char* kName = "gelu_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, std::string_view approximate) {
    gelu_mode(approximate);
    check_float(self, "GeluBackwardKernelImpl");
    return self_bwd_meta(grad, self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   std::string_view approximate) {
    gelu_backward_into(grad, self, gelu_mode(approximate), out);
  }
};

// --- silu --------------------------------------------------------------------

Value silu_fn(Builder& b, const Values& x) { return b.mul(x[0], b.logistic(x[0])); }
// grad * s * (1 + x * (1 - s)), s = sigmoid(x)
Value silu_bwd_fn(Builder& b, const Values& x) {
  Value s = b.logistic(x[1]);
  Value one = full_like(b, 1.0, s);
  return b.mul(b.mul(x[0], s), b.add(one, b.mul(x[1], b.sub(one, s))));
}

struct Silu {
  static constexpr const char* kName = "silu";
  static OutMeta meta(const at::Tensor& self) {
    check_float(self, "silu");
    return same_as(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self) {
    pointwise("silu", {self}, out, opmath(self.scalar_type()), silu_fn);
  }
};
struct SiluBackward {
  static constexpr const char* kName = "silu_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self) {
    check_float(self, kName);
    return self_bwd_meta(grad, self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& grad, const at::Tensor& self) {
    pointwise(kName, {grad, self}, out, opmath(self.scalar_type()), silu_bwd_fn);
  }
};

// --- elu -------------------------------------------------------------------------
// x = {self, alpha, scale, input_scale}
Value elu_fn(Builder& b, const Values& x) {
  Value v = x[0];
  Value neg = b.mul(b.mul(b.expm1(b.mul(v, x[3])), x[1]), x[2]);
  return b.select(gt(b, v, full_like(b, 0, v)), b.mul(v, x[2]), neg);
}
struct Elu {
  static constexpr const char* kName = "elu";
  static OutMeta meta(const at::Tensor& s, S, S, S) {
    check_float(s, "elu_cpu");
    return same_as(s);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, S a, S sc, S is) {
    fwd(kName, {s, a, sc, is}, out, elu_fn);
  }
};  // x = {grad, self_or_result, alpha, scale, input_scale}
template <bool kIsResult>
Value elu_bwd_fn(Builder& b, const Values& x) {
  Value g = x[0], v = x[1];
  Value neg_coef = b.mul(x[2], x[3]);
  Value neg = kIsResult ? b.mul(b.mul(g, x[4]), b.add(v, neg_coef))
                        : b.mul(b.mul(b.mul(g, x[4]), neg_coef), b.exp(b.mul(v, x[4])));
  return b.select(b.compare(v, full_like(b, 0, v), Direction::kLe), neg, b.mul(g, x[3]));
}
void check_elu_bwd(const c10::Scalar& a, bool is_result) {
  TORCH_CHECK(!is_result || a.toDouble() >= 0.0,
              "In-place elu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call "
              "out-of-place version instead.");
}
struct EluBackward {
  static constexpr const char* kName = "elu_backward";
  static OutMeta meta(const at::Tensor& g, S a, S, S, bool is_result, const at::Tensor& s) {
    check_elu_bwd(a, is_result);
    return bwd_meta(g, s);
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& g, S a, S sc, S is, bool is_result,
                   const at::Tensor& s) {
    bwd(is_result ? "elu_backward_r" : kName, {g, s, a, sc, is}, out, m,
        is_result ? elu_bwd_fn<true> : elu_bwd_fn<false>);
  }
};

// --- hardtanh ------------------------------------------------------------------------
// Clamp that keeps NaN (as CPU's clamp does).
Value hardtanh_fn(Builder& b, const Values& x) {
  Value v = x[0];
  Value r = b.select(b.compare(v, x[1], Direction::kLt), x[1], v);
  return b.select(b.compare(v, x[2], Direction::kGt), x[2], r);
}
void check_hardtanh(const at::Tensor& s) {
  TORCH_CHECK(s.scalar_type() != c10::kBool, "Bool inputs not supported for hardtanh");
}
struct Hardtanh {
  static constexpr const char* kName = "hardtanh";
  static OutMeta meta(const at::Tensor& s, S, S) {
    check_hardtanh(s);
    return same_as(s);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, S lo, S hi) {
    fwd(kName, {s, lo, hi}, out, hardtanh_fn);
  }
};
Value hardtanh_bwd_fn(Builder& b, const Values& x) {
  Value v = x[1];
  Value outside = b.or_(b.compare(v, x[2], Direction::kLe), b.compare(v, x[3], Direction::kGe));
  return b.select(outside, full_like(b, 0, x[0]), x[0]);
}
struct HardtanhBackward {
  static constexpr const char* kName = "hardtanh_backward";
  static OutMeta meta(const at::Tensor& g, const at::Tensor& s, S, S) { return bwd_meta(g, s); }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& g, const at::Tensor& s, S lo, S hi) {
    bwd(kName, {g, s, lo, hi}, out, m, hardtanh_bwd_fn);
  }
};

// --- leaky_relu --------------------------------------------------------------------------
Value leaky_fn(Builder& b, const Values& x) {
  return b.select(gt(b, x[0], full_like(b, 0, x[0])), x[0], b.mul(x[0], x[1]));
}
struct LeakyRelu {
  static constexpr const char* kName = "leaky_relu";
  static OutMeta meta(const at::Tensor& s, S) {
    check_float(s, "leaky_relu_cpu");
    return same_as(s);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, S slope) {
    fwd(kName, {s, slope}, out, leaky_fn);
  }
};
Value leaky_bwd_fn(Builder& b, const Values& x) {
  return b.select(gt(b, x[1], full_like(b, 0, x[1])), x[0], b.mul(x[0], x[2]));
}
void check_leaky_bwd(const c10::Scalar& slope, bool self_is_result) {
  TORCH_CHECK(!self_is_result || slope.toDouble() >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported. "
              "This is caused by calling in-place forward function with a negative slope, please call "
              "out-of-place version instead. File an issue at https://github.com/pytorch/pytorch if you do "
              "require supporting in-place leakRelu backward calculation with negative slope");
}
struct LeakyReluBackward {
  static constexpr const char* kName = "leaky_relu_backward";
  static OutMeta meta(const at::Tensor& g, const at::Tensor& s, S slope, bool self_is_result) {
    check_leaky_bwd(slope, self_is_result);
    return bwd_meta(g, s);
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& g, const at::Tensor& s, S slope, bool) {
    bwd(kName, {g, s, slope}, out, m, leaky_bwd_fn);
  }
};

// --- softplus ------------------------------------------------------------------------------
// x = {self, beta, threshold}
Value softplus_fn(Builder& b, const Values& x) {
  Value bx = b.mul(x[0], x[1]);
  Value soft = b.div(b.log1p(b.exp(bx)), x[1]);
  return b.select(gt(b, bx, x[2]), x[0], soft);
}
struct Softplus {
  static constexpr const char* kName = "softplus";
  static OutMeta meta(const at::Tensor& s, S, S) {
    check_float(s, "softplus_cpu");
    return same_as(s);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, S beta, S th) {
    fwd(kName, {s, beta, th}, out, softplus_fn);
  }
};  // x = {grad, self, beta, threshold}
Value softplus_bwd_fn(Builder& b, const Values& x) {
  Value bx = b.mul(x[1], x[2]);
  Value z = b.exp(bx);
  Value soft = b.div(b.mul(x[0], z), b.add(z, full_like(b, 1.0, z)));
  return b.select(gt(b, bx, x[3]), x[0], soft);
}
struct SoftplusBackward {
  static constexpr const char* kName = "softplus_backward";
  static OutMeta meta(const at::Tensor& g, const at::Tensor& s, S, S) { return bwd_meta(g, s); }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& g, const at::Tensor& s, S beta, S th) {
    bwd(kName, {g, s, beta, th}, out, m, softplus_bwd_fn);
  }
};

// --- hardsigmoid / hardswish / mish ------------------------------------------------------------
Value relu6_of(Builder& b, Value v) {  // min(max(v, 0), 6)
  Value r = b.max(v, full_like(b, 0, v));
  return b.min(r, full_like(b, 6.0, v));
}
Value hardsigmoid_fn(Builder& b, const Values& x) {
  return b.div(relu6_of(b, b.add(x[0], full_like(b, 3.0, x[0]))), full_like(b, 6.0, x[0]));
}
Value hardswish_fn(Builder& b, const Values& x) { return b.mul(x[0], hardsigmoid_fn(b, x)); }
Value mish_fn(Builder& b, const Values& x) {
  Value sp = b.log1p(b.exp(x[0]));
  return b.mul(x[0], b.tanh(sp));
}
Value hardsigmoid_bwd_fn(Builder& b, const Values& x) {
  Value v = x[1];
  Value inside = b.and_(gt(b, v, full_like(b, -3.0, v)), b.compare(v, full_like(b, 3.0, v), Direction::kLt));
  return b.select(inside, b.div(x[0], full_like(b, 6.0, x[0])), full_like(b, 0, x[0]));
}
Value hardswish_bwd_fn(Builder& b, const Values& x) {
  Value g = x[0], v = x[1];
  Value mid = b.mul(g, b.add(b.div(v, full_like(b, 3.0, v)), full_like(b, 0.5, v)));
  // Boundaries as CPU: 0 at x <= -3, grad at x >= 3.
  Value r = b.select(b.compare(v, full_like(b, 3.0, v), Direction::kLt), mid, g);
  return b.select(b.compare(v, full_like(b, -3.0, v), Direction::kLe), full_like(b, 0, g), r);
}

// Float-only activations whose result has self's dtype, declared once for the
// variant mechanism (ops/variants.h), which registers f, f_ and f.out.
struct ActDef {
  const char* name;
  const char* cpu_kernel;  // CPU's kernel name, for its dtype error
  Value (*fn)(Builder&, const Values&);
};
template <const ActDef& D>
struct SimpleActivation {
  static constexpr const char* kName = D.name;
  static OutMeta meta(const at::Tensor& s) {
    check_float(s, D.cpu_kernel);
    return {s.sizes().vec(), s.scalar_type(), s.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s) { fwd(D.name, {s}, out, D.fn); }
};
constexpr ActDef d_hardsigmoid{"hardsigmoid", "hardsigmoid_cpu", hardsigmoid_fn};
constexpr ActDef d_hardswish{"hardswish", "hardswish_cpu", hardswish_fn};
constexpr ActDef d_mish{"mish", "mish_cpu", mish_fn};

struct HardsigmoidBackward {
  static constexpr const char* kName = "hardsigmoid_backward";
  static OutMeta meta(const at::Tensor& g, const at::Tensor& s) { return bwd_meta(g, s); }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& g, const at::Tensor& s) {
    bwd(kName, {g, s}, out, m, hardsigmoid_bwd_fn);
  }
};
struct HardswishBackward {
  static constexpr const char* kName = "hardswish_backward";
  static OutMeta meta(const at::Tensor& g, const at::Tensor& s) { return bwd_meta(g, s); }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& g, const at::Tensor& s) {
    bwd(kName, {g, s}, out, m, hardswish_bwd_fn);
  }
};

// --- glu ------------------------------------------------------------------------------------------
int64_t glu_dim(const at::Tensor& s, int64_t dim) {
  TORCH_CHECK(s.dim() > 0, "glu does not support scalars because halving size must be even");
  int64_t d = wrap_dim(dim, s.dim());
  TORCH_CHECK(s.size(d) % 2 == 0, "Halving dimension must be even, but dimension ", d, " is size ", s.size(d));
  return d;
}
std::pair<Value, Value> halves(Builder& b, Value v, int64_t d) {
  Dims sh = b.dims(v);
  Dims start(sh.size(), 0), mid = sh, strides(sh.size(), 1);
  mid[d] = sh[d] / 2;
  Dims start2 = start;
  start2[d] = sh[d] / 2;
  return {b.slice(v, start, mid, strides), b.slice(v, start2, sh, strides)};
}
void glu_into(const at::Tensor& s, int64_t d, const at::Tensor& out) {
  ScalarType ct = opmath(s.scalar_type());
  record::OpCall call("glu");
  call.attr(d).attr(static_cast<int64_t>(ct));
  call.input(s);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    auto [a, g] = halves(b, b.convert(in[0], to_elem(ct)), d);
    return Values{b.mul(a, b.logistic(g))};
  });
}
std::vector<int64_t> glu_shape(const at::Tensor& s, int64_t d) {
  auto sh = s.sizes().vec();
  sh[d] /= 2;
  return sh;
}
// The result of glu and its backward, with the wrapped halving dim.
struct GluMeta : OutMeta {
  int64_t d = 0;
};
struct Glu {
  static constexpr const char* kName = "glu";
  static GluMeta meta(const at::Tensor& s, int64_t dim) {
    check_float(s, "glu_cpu");
    GluMeta m;
    m.d = glu_dim(s, dim);
    m.sizes = glu_shape(s, m.d);
    m.dtype = s.scalar_type();
    m.device = s.device();
    return m;
  }
  static void impl(const at::Tensor& out, const GluMeta& m, const at::Tensor& s, int64_t) { glu_into(s, m.d, out); }
};
void glu_backward_into(const at::Tensor& g, const at::Tensor& s, int64_t d, const at::Tensor& out) {
  TORCH_CHECK(g.sizes().equals(glu_shape(s, d)), "glu_backward: grad_output has the wrong shape");
  ScalarType ct = opmath(s.scalar_type());
  record::OpCall call("glu_backward");
  call.attr(d).attr(static_cast<int64_t>(ct));
  call.input(g);
  call.input(s);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value gr = b.convert(in[0], e);
    auto [a, h] = halves(b, b.convert(in[1], e), d);
    Value sg = b.logistic(h);
    Value ga = b.mul(gr, sg);
    Value gb = b.mul(b.mul(ga, a), b.sub(full_like(b, 1.0, sg), sg));
    return Values{b.concatenate({ga, gb}, d)};
  });
}
struct GluBackward {
  static constexpr const char* kName = "glu_backward";
  static GluMeta meta(const at::Tensor&, const at::Tensor& s, int64_t dim) {
    GluMeta m;
    m.d = glu_dim(s, dim);
    m.sizes = s.sizes().vec();
    m.dtype = s.scalar_type();
    m.device = s.device();
    return m;
  }
  static void impl(const at::Tensor& out, const GluMeta& m, const at::Tensor& g, const at::Tensor& s, int64_t) {
    glu_backward_into(g, s, m.d, out);
  }
};

// --- threshold ---------------------------------------------------------------------
// x = {self, threshold, value}: x <= threshold ? value : x (NaN stays NaN).
Value threshold_fn(Builder& b, const Values& x) { return b.select(b.compare(x[0], x[1], Direction::kLe), x[2], x[0]); }
struct Threshold {
  static constexpr const char* kName = "threshold";
  static OutMeta meta(const at::Tensor& s, S, S) { return same_as(s); }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, S th, S v) {
    fwd(kName, {s, th, v}, out, threshold_fn);
  }
};
// --- softshrink / hardshrink ---------------------------------------------------------
void check_lambd(const c10::Scalar& l) {
  TORCH_CHECK(l.toDouble() >= 0, "lambda must be greater or equal to 0, but found to be ", l.toDouble(), ".");
}
// x = {self, lambd}
Value softshrink_fn(Builder& b, const Values& x) {
  Value v = x[0], l = x[1];
  Value nl = b.neg(l);
  Value r = b.select(b.compare(v, l, Direction::kGt), b.sub(v, l),
                     b.select(b.compare(v, nl, Direction::kLt), b.add(v, l), full_like(b, 0, v)));
  // NaN propagates like CPU.
  return b.select(b.compare(v, v, Direction::kNe), v, r);
}
// Backward of both shrinks: grad where |x| > lambd, else 0. x = {grad, self, lambd}
Value shrink_bwd_fn(Builder& b, const Values& x) {
  Value v = x[1], l = x[2];
  Value inside = b.and_(b.compare(v, b.neg(l), Direction::kGe), b.compare(v, l, Direction::kLe));
  return b.select(inside, full_like(b, 0, x[0]), x[0]);
}
Value hardshrink_fn(Builder& b, const Values& x) {
  Value v = x[0], l = x[1];
  Value inside = b.and_(b.compare(v, b.neg(l), Direction::kGe), b.compare(v, l, Direction::kLe));
  return b.select(inside, full_like(b, 0, v), v);
}
struct Softshrink {
  static constexpr const char* kName = "softshrink";
  static OutMeta meta(const at::Tensor& s, S l) {
    check_lambd(l);
    check_float(s, "softshrink_cpu");
    return same_as(s);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& s, S l) {
    fwd(kName, {s, l}, out, softshrink_fn);
  }
};
struct ShrinkBackward {
  static constexpr const char* kName = "shrink_backward";
  static OutMeta meta(const at::Tensor& g, const at::Tensor& s, S) { return bwd_meta(g, s); }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& g, const at::Tensor& s, S l) {
    pointwise(kName, {g, s, l}, out, m.dtype, shrink_bwd_fn);
  }
};
// CPU compares hardshrink (and both backward kernels) in the tensor's own
// dtype, with lambd rounded to it; no arithmetic happens, so no opmath.
struct Hardshrink {
  static constexpr const char* kName = "hardshrink";
  static OutMeta meta(const at::Tensor& s, S) {
    check_float(s, "hardshrink_cpu");
    return same_as(s);
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& s, S l) {
    pointwise(kName, {s, l}, out, m.dtype, hardshrink_fn);
  }
};

// --- prelu ------------------------------------------------------------------------------
// `weight` arrives already shaped to broadcast against self (prelu is composite).
struct PreluKernel {
  static constexpr const char* kName = "_prelu_kernel";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& weight) {
    return {broadcast_shape({self, weight}), at::result_type(self, weight), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& weight) {
    pointwise(kName, {self, weight}, out, opmath(m.dtype), [](Builder& b, const Values& x) {
      return b.select(b.compare(x[0], full_like(b, 0, x[0]), Direction::kGt), x[0], b.mul(x[1], x[0]));
    });
  }
};
// Both gradients come back in the broadcast shape; autograd sums grad_weight
// down to weight's shape.
struct PreluKernelBackward {
  static constexpr const char* kName = "_prelu_kernel_backward";
  static PairMeta meta(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& weight) {
    PairMeta m;
    m.results[0] = OutMeta{broadcast_shape({grad, self, weight}), at::result_type(self, weight), self.device()};
    m.results[1] = m.results[0];
    return m;
  }
  static void impl(const at::Tensor& gi, const at::Tensor& gw, const PairMeta& m, const at::Tensor& grad,
                   const at::Tensor& self, const at::Tensor& weight) {
    auto ct = opmath(m.results[0].dtype);
    ElemType e = to_elem(ct);
    Dims d(m.results[0].sizes.begin(), m.results[0].sizes.end());
    record::OpCall call(kName);
    call.attr(static_cast<int64_t>(ct));
    call.input(grad);
    call.input(self);
    call.input(weight);
    call.output(gi);
    call.output(gw);
    call.run([&](Builder& b, const Values& in) {
      Value g = b.broadcast_to(b.convert(in[0], e), d);
      Value x = b.broadcast_to(b.convert(in[1], e), d);
      Value w = b.broadcast_to(b.convert(in[2], e), d);
      Value pos = b.compare(x, full_like(b, 0, x), Direction::kGt);
      return Values{b.select(pos, g, b.mul(w, g)), b.select(pos, full_like(b, 0, x), b.mul(x, g))};
    });
  }
};

// --- rrelu_with_noise --------------------------------------------------------------------
// Training: noise ~ U(lower, upper) where x < 0 (1 elsewhere) is written into
// `noise` and out = x * noise. Eval: leaky relu with slope (lower + upper) / 2.
void rrelu_into(const at::Tensor& self, const at::Tensor& noise, const c10::Scalar& lower, const c10::Scalar& upper,
                bool training, std::optional<at::Generator> gen, const at::Tensor& out) {
  check_float(self, "rrelu_with_noise_out_cpu");
  if (!training) {
    double slope = (lower.toDouble() + upper.toDouble()) / 2;
    pointwise("rrelu_eval", {self, c10::Scalar(slope)}, out, opmath(self.scalar_type()),
              [](Builder& b, const Values& x) {
                return b.select(b.compare(x[0], full_like(b, 0, x[0]), Direction::kGe), x[0], b.mul(x[0], x[1]));
              });
    return;
  }
  TORCH_CHECK(noise.sizes().equals(self.sizes()), "rrelu_with_noise: noise must have the same shape as self");
  if (self.numel() == 0) return;
  // Uniform samples from the tpu generator, then masked in one program.
  at::Tensor u = at::empty(self.sizes(), self.options().dtype(opmath(self.scalar_type())));
  u.uniform_(lower.toDouble(), upper.toDouble(), gen);
  auto ct = opmath(self.scalar_type());
  ElemType e = to_elem(ct);
  record::OpCall call("rrelu_train");
  call.attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(u);
  call.output(out);
  call.output(noise);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], e), r = b.convert(in[1], e);
    Value n = b.select(b.compare(x, full_like(b, 0, x), Direction::kGe), full_like(b, 1.0, x), r);
    return Values{b.mul(x, n), n};
  });
}
// rrelu_with_noise, rrelu_with_noise_ and rrelu_with_noise.out; `noise` is
// written in training.
struct RreluWithNoise {
  static constexpr const char* kName = "rrelu_with_noise";
  static OutMeta meta(const at::Tensor& self, at::Tensor&, const c10::Scalar&, const c10::Scalar&, bool,
                      std::optional<at::Generator>) {
    check_float(self, "rrelu_with_noise_out_cpu");
    return OutMeta{self.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kCastable, false};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, at::Tensor& noise,
                   const c10::Scalar& lower, const c10::Scalar& upper, bool training,
                   std::optional<at::Generator> gen) {
    rrelu_into(self, noise, lower, upper, training, gen, out);
  }
};
at::Tensor rrelu_with_noise_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& noise,
                                     const c10::Scalar& lower, const c10::Scalar& upper, bool training,
                                     bool self_is_result) {
  double l = lower.toDouble(), u = upper.toDouble();
  if (training && u - l > 1e-6) {
    return bwd_new("rrelu_backward_train", {grad, noise},
                   [](Builder& b, const Values& x) { return b.mul(x[0], x[1]); });
  }
  TORCH_CHECK(!self_is_result || (l + u) / 2 >= 0.0,
              "In-place leakyReLu backward calculation is triggered with a negative slope which is not supported.");
  return bwd_new("rrelu_backward_eval", {grad, self, c10::Scalar((l + u) / 2)}, [](Builder& b, const Values& x) {
    return b.select(b.compare(x[1], full_like(b, 0, x[1]), Direction::kGt), x[0], b.mul(x[0], x[2]));
  });
}

// --- logit ------------------------------------------------------------------------------

// logit, which the target gradient of binary_cross_entropy uses.
struct Logit {
  static constexpr const char* kName = "logit";
  static OutMeta meta(const at::Tensor& self, std::optional<double>) {
    return {self.sizes().vec(), float_result(self.scalar_type()), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, std::optional<double> eps) {
    bool has_eps = eps.has_value() && *eps >= 0;
    double e = has_eps ? *eps : 0.0;
    pointwise(
        kName, {self, c10::Scalar(e)}, out, opmath(m.dtype),
        [has_eps](Builder& b, const Values& x) {
          Value v = x[0];
          if (has_eps) v = b.clamp(x[1], v, b.sub(one(b, b.elem(v), b.dims(v)), x[1]));
          return b.log(b.div(v, b.sub(one(b, b.elem(v), b.dims(v)), v)));
        },
        has_eps);
  }
};

// --- logit_backward ---------------------------------------------------------------------
// grad / (x (1 - x)); outside [eps, 1 - eps] the gradient is 0, and without
// eps it is NaN outside [0, 1].
struct LogitBackward {
  static constexpr const char* kName = "logit_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, std::optional<double>) {
    return bwd_meta(grad, self);
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& grad, const at::Tensor& self,
                   std::optional<double> eps) {
    bool has_eps = eps.has_value() && *eps >= 0;
    double lo = has_eps ? *eps : 0.0;
    pointwise(
        kName, {grad, self, c10::Scalar(lo), c10::Scalar(1.0 - lo)}, out, opmath(m.dtype),
        [has_eps](Builder& b, const Values& x) {
          Value g = x[0], v = x[1];
          Value r = b.div(g, b.mul(v, b.sub(full_like(b, 1.0, v), v)));
          Value outside = b.or_(b.compare(v, x[2], Direction::kLt), b.compare(v, x[3], Direction::kGt));
          Value fill = has_eps ? full_like(b, 0, v) : full_like(b, std::numeric_limits<double>::quiet_NaN(), v);
          return b.select(outside, fill, r);
        },
        has_eps);
  }
};

// --- log_sigmoid -------------------------------------------------------------------

// The buffer is unused (left empty, as on CUDA): the backward recomputes
// from self.
struct LogSigmoidForward {
  static constexpr const char* kName = "log_sigmoid_forward";
  static PairMeta meta(const at::Tensor& self) {
    check_float(self, "log_sigmoid_cpu");
    PairMeta m;
    m.results[0] = OutMeta{self.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kCastable, false};
    m.results[1] = OutMeta{{0}, self.scalar_type(), self.device(), OutDtype::kOwn, false};
    return m;
  }
  static void impl(const at::Tensor& output, const at::Tensor&, const PairMeta&, const at::Tensor& self) {
    // min(x, 0) - log1p(exp(-|x|)): stable for large |x|.
    pointwise(kName, {self}, output, opmath(self.scalar_type()), [](Builder& b, const Values& x) {
      Value z = zero(b, b.elem(x[0]), b.dims(x[0]));
      Value e = b.exp(b.neg(b.abs(x[0])));
      return b.sub(b.min(x[0], z), b.log1p(e));
    });
  }
};

struct LogSigmoidBackward {
  static constexpr const char* kName = "log_sigmoid_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, const at::Tensor&) {
    check_float(self, "log_sigmoid_backward_cpu");
    return self_bwd_meta(grad, self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   const at::Tensor&) {
    // d/dx log(sigmoid(x)) = sigmoid(-x) = 1 / (1 + exp(x)).
    pointwise(kName, {grad, self}, out, opmath(self.scalar_type()),
              [](Builder& b, const Values& x) { return b.mul(x[0], b.logistic(b.neg(x[1]))); });
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Gelu>(m, "gelu");
  register_backward<GeluBackward>(m, "gelu_backward");
  register_variants<Silu>(m, "silu");
  register_backward<SiluBackward>(m, "silu_backward");
  register_variants<Elu>(m, "elu");
  register_backward<EluBackward>(m, "elu_backward");
  register_variants<Hardtanh>(m, "hardtanh");
  register_backward<HardtanhBackward>(m, "hardtanh_backward");
  register_variants<LeakyRelu>(m, "leaky_relu");
  register_backward<LeakyReluBackward>(m, "leaky_relu_backward");
  register_variants<Softplus>(m, {"softplus", "", "softplus.out"});
  register_backward<SoftplusBackward>(m, "softplus_backward");
  register_variants<SimpleActivation<d_hardsigmoid>>(m, "hardsigmoid");
  register_backward<HardsigmoidBackward>(m, "hardsigmoid_backward");
  register_variants<SimpleActivation<d_hardswish>>(m, "hardswish");
  register_variants<HardswishBackward>(m, {"hardswish_backward", "", ""});
  register_variants<SimpleActivation<d_mish>>(m, "mish");
  register_variants<Glu>(m, {"glu", "", "glu.out"});
  register_backward<GluBackward>(m, "glu_backward");
  register_variants<Threshold>(m, "threshold");
  register_variants<Softshrink>(m, {"softshrink", "", "softshrink.out"});
  register_backward<ShrinkBackward>(m, "softshrink_backward");
  register_variants<Hardshrink>(m, {"hardshrink", "", "hardshrink.out"});
  register_backward<ShrinkBackward>(m, "hardshrink_backward");
  register_variants<PreluKernel>(m, {"_prelu_kernel", "", ""});
  register_variants<PreluKernelBackward>(m, {"_prelu_kernel_backward", "", ""});
  register_variants<RreluWithNoise>(m, "rrelu_with_noise");
  m.impl("rrelu_with_noise_backward", rrelu_with_noise_backward);
  register_backward<LogitBackward>(m, "logit_backward");
  register_variants<Logit>(m, {"logit", "", "logit.out"});
  register_variants<LogSigmoidForward>(m, {"log_sigmoid_forward", "", "log_sigmoid_forward.output"});
  register_backward<LogSigmoidBackward>(m, "log_sigmoid_backward");
}

}  // namespace
}  // namespace torch_tpu::ops
