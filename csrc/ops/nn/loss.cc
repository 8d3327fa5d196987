// Losses: nll_loss / nll_loss2d (forward + backward), mse_loss,
// smooth_l1_loss, huber_loss and binary_cross_entropy (+ backward).
// cross_entropy is composite (log_softmax + nll_loss) and reaches these;
// kl_div, cosine_embedding_loss and binary_cross_entropy_with_logits are
// composite too.
//
// nll_loss picks the target class with an iota == target one-hot and a
// select (not a multiply: log-probabilities may be -inf), so an ignored or
// out-of-range target contributes nothing. Target values are not range
// checked: that would need a device->host sync on every call.
//
// Like ATen's CPU kernel, binary_cross_entropy clamps the logs at -100 so
// that x = 0 or 1 gives a finite loss. CPU also checks that every input
// lies in [0, 1]; that would need a device->host sync per call, so it is
// not done here.
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/index/checks.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

Value sum_all(Builder& b, Value x) {
  Dims all;
  for (int64_t i = 0; i < (int64_t)b.dims(x).size(); ++i) all.push_back(i);
  return b.reduce(x, zero(b, b.elem(x)), all, BinaryOp::kAdd);
}

Dims except(int64_t rank, int64_t dim) {
  Dims m;
  for (int64_t i = 0; i < rank; ++i)
    if (i != dim) m.push_back(i);
  return m;
}

// --- nll_loss -------------------------------------------------------------------

void check_nll_common(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(target.scalar_type() == c10::kLong || target.scalar_type() == c10::kByte,
              "expected target dtype to be Long or Byte, but got ", target.scalar_type());
  int64_t n_classes = self.dim() == 1 ? self.size(0) : self.size(1);
  TORCH_CHECK(!weight.defined() || (weight.dim() == 1 && weight.numel() == n_classes),
              "weight tensor should be defined either for all ", n_classes,
              " classes or no classes but got weight tensor of shape: ", weight.sizes());
  TORCH_CHECK(!weight.defined() || weight.scalar_type() == self.scalar_type(), "expected scalar type ",
              self.scalar_type(), " but found ", weight.scalar_type());
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"nll_loss_out_frame\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
}

// The one-hot pick gives 0 for a class index outside [0, C): a wrong loss,
// silently. TORCH_TPU_DEBUG_CHECKS=1 reads the targets on the host and
// raises CPU's IndexError instead (a sync, so it is opt-in).
void check_nll_targets(const at::Tensor& self, const at::Tensor& target, int64_t ignore_index) {
  if (!debug_checks() || target.numel() == 0) return;
  int64_t n_classes = self.dim() == 1 ? self.size(0) : self.size(1);
  at::Tensor h = target.to(c10::kCPU).to(c10::kLong).contiguous();
  const int64_t* p = h.const_data_ptr<int64_t>();
  for (int64_t i = 0, n = h.numel(); i < n; ++i)
    TORCH_CHECK_INDEX(p[i] == ignore_index || (p[i] >= 0 && p[i] < n_classes), "Target ", p[i], " is out of bounds.");
}

void check_nll(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "input tensor should be 1D or 2D");
  TORCH_CHECK(target.dim() <= 1, "0D or 1D target tensor expected, multi-target not supported");
  bool no_batch = self.dim() == 1 && target.dim() == 0;
  TORCH_CHECK(no_batch || self.size(0) == target.size(0), "size mismatch (got input: ", self.sizes(),
              ", target: ", target.sizes(), ")");
  check_nll_common(self, target, weight);
}

void check_nll2d(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(target.dim() == 3,
              "only batches of spatial targets supported (3D tensors) but got targets of dimension: ", target.dim());
  TORCH_CHECK(self.dim() == 4,
              "only batches of spatial inputs supported (4D tensors), but got input of dimension: ", self.dim());
  TORCH_CHECK(self.size(0) == target.size(0) && self.size(2) == target.size(1) && self.size(3) == target.size(2),
              "input and target batch or spatial sizes don't match: target ", target.sizes(), ", input ", self.sizes());
  check_nll_common(self, target, weight);
}

// Shared pieces of the nll lowering: the one-hot of the target class along
// the class dim, and the per-element weight (0 where ignored).
struct NllParts {
  Value onehot;  // pred, input's shape
  Value valid;   // pred, target's shape
  Value w;       // compute type, target's shape
};

NllParts nll_parts(Builder& b, Value x, Value target, Value weight, bool has_weight, Value ignore, ElemType e) {
  const Dims& xd = b.dims(x);
  int64_t rank = xd.size();
  int64_t cdim = rank == 1 ? 0 : 1;
  Value t = b.convert(target, ElemType::kS64);
  const Dims& td = b.dims(t);
  Value tb = b.broadcast_in_dim(t, xd, except(rank, cdim));
  NllParts p;
  p.onehot = b.compare(b.iota(xd, cdim, ElemType::kS64), tb, Direction::kEq);
  p.valid = b.compare(t, b.broadcast_to(ignore, td), Direction::kNe);
  Value w;
  if (has_weight) {
    Value wb = b.broadcast_in_dim(b.convert(weight, e), xd, {cdim});
    w = b.reduce(b.select(p.onehot, wb, zero(b, e, xd)), zero(b, e), {cdim}, BinaryOp::kAdd);
  } else {
    w = b.constant(1.0, e, td);
  }
  p.w = b.select(p.valid, w, zero(b, e, td));
  return p;
}

void nll_forward_into(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight, int64_t reduction,
                      int64_t ignore_index, const at::Tensor& out, const at::Tensor& total_weight) {
  auto ct = opmath(self.scalar_type());
  record::OpCall call("nll_loss_forward");
  call.attr(reduction).attr(weight.defined()).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(target);
  call.scalar(ignore_index, c10::kLong);
  if (weight.defined()) call.input(weight);
  call.output(out);
  call.output(total_weight);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[0], e);
    NllParts p = nll_parts(b, x, in[1], weight.defined() ? in[3] : in[0], weight.defined(), in[2], e);
    int64_t cdim = b.dims(x).size() == 1 ? 0 : 1;
    Value picked = b.reduce(b.select(p.onehot, x, zero(b, e, b.dims(x))), zero(b, e), {cdim}, BinaryOp::kAdd);
    Value loss = b.select(p.valid, b.neg(b.mul(p.w, picked)), zero(b, e, b.dims(picked)));
    if (reduction == kNone) return Values{loss, zero(b, e)};
    Value total = sum_all(b, p.w);
    Value s = sum_all(b, loss);
    if (reduction == kMean) s = b.div(s, total);
    return Values{s, total};
  });
}

std::vector<int64_t> nll_out_shape(const at::Tensor& target, int64_t reduction) {
  if (reduction != kNone) return {};
  return target.sizes().vec();
}

// nll_loss_forward (k2d: nll_loss2d_forward): the loss and the total weight.
template <bool k2d>
struct NllForward {
  static constexpr const char* kName = "nll_loss";
  static PairMeta meta(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight_opt,
                       int64_t reduction, int64_t ignore_index) {
    at::Tensor weight = weight_opt.value_or(at::Tensor());
    k2d ? check_nll2d(self, target, weight) : check_nll(self, target, weight);
    check_nll_targets(self, target, ignore_index);
    PairMeta m;
    m.results[0] =
        OutMeta{nll_out_shape(target, reduction), self.scalar_type(), self.device(), OutDtype::kCastable, false};
    m.results[1] = OutMeta{{}, self.scalar_type(), self.device(), OutDtype::kCastable, false};
    return m;
  }
  static void impl(const at::Tensor& out, const at::Tensor& total_weight, const PairMeta&, const at::Tensor& self,
                   const at::Tensor& target, const std::optional<at::Tensor>& weight_opt, int64_t reduction,
                   int64_t ignore_index) {
    nll_forward_into(self, target, weight_opt.value_or(at::Tensor()), reduction, ignore_index, out, total_weight);
  }
};

void nll_backward_into(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                       const at::Tensor& weight, int64_t reduction, int64_t ignore_index,
                       const at::Tensor& total_weight, const at::Tensor& out) {
  auto ct = opmath(self.scalar_type());
  record::OpCall call("nll_loss_backward");
  call.attr(reduction).attr(weight.defined()).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(self);
  call.input(target);
  call.scalar(ignore_index, c10::kLong);
  call.input(total_weight);
  if (weight.defined()) call.input(weight);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[1], e);
    const Dims& xd = b.dims(x);
    int64_t rank = xd.size();
    int64_t cdim = rank == 1 ? 0 : 1;
    NllParts p = nll_parts(b, x, in[2], weight.defined() ? in[5] : in[1], weight.defined(), in[3], e);
    const Dims& td = b.dims(p.w);
    Value g = b.convert(in[0], e);
    if (reduction == kNone) {
      g = b.reshape(g, td);
    } else {
      g = b.broadcast_to(b.reshape(g, {}), td);
      if (reduction == kMean) g = b.div(g, b.broadcast_to(b.convert(in[4], e), td));
    }
    Value per = b.neg(b.mul(p.w, g));  // target's shape
    Value pb = b.broadcast_in_dim(per, xd, except(rank, cdim));
    Value hit = b.and_(p.onehot, b.broadcast_in_dim(p.valid, xd, except(rank, cdim)));
    return Values{b.select(hit, pb, zero(b, e, xd))};
  });
}

// nll_loss(2d)_backward: functional and .grad_input forms.
template <bool k2d>
struct NllBackward {
  static constexpr const char* kName = "nll_loss_backward";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                      const std::optional<at::Tensor>& weight, int64_t reduction, int64_t,
                      const at::Tensor& total_weight) {
    k2d ? check_nll2d(self, target, weight.value_or(at::Tensor()))
        : check_nll(self, target, weight.value_or(at::Tensor()));
    TORCH_CHECK(total_weight.numel() == 1,
                "expected total_weight to be a single element tensor, got: ", total_weight.sizes(), " (",
                total_weight.numel(), " elements)");
    if (reduction == kNone) {
      TORCH_CHECK(grad.sizes().equals(target.sizes()), "Expected a tensor of dimension ", target.dim(),
                  " and tensor.size[0] == ", target.dim() > 0 ? target.size(0) : 1, " but got: dimension ", grad.dim(),
                  " and tensor.size[0] == ", grad.dim() > 0 ? grad.size(0) : 1);
    } else {
      TORCH_CHECK(grad.numel() == 1, "Expected a single element grad_output tensor, but got: ", grad.sizes());
    }
    return {self.sizes().vec(), self.scalar_type(), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   const at::Tensor& target, const std::optional<at::Tensor>& weight, int64_t reduction,
                   int64_t ignore_index, const at::Tensor& total_weight) {
    nll_backward_into(grad, self, target, weight.value_or(at::Tensor()), reduction, ignore_index, total_weight, out);
  }
};

// --- pointwise regression losses: mse, smooth_l1, huber ------------------------------

enum LossKind : int64_t { kMse = 0, kSmoothL1 = 1, kHuber = 2 };
constexpr const char* loss_name(int64_t k) {
  return k == kMse ? "mse_loss" : k == kSmoothL1 ? "smooth_l1_loss" : "huber_loss";
}

// Per-element loss of d = x - t with parameter `p` (beta or delta).
Value loss_fwd(Builder& b, int64_t kind, Value d, Value p) {
  if (kind == kMse) return b.mul(d, d);
  Value ad = b.abs(d);
  Value half = full_like(b, 0.5, d);
  Value small = b.compare(ad, p, Direction::kLt);
  if (kind == kSmoothL1) {
    Value quad = b.div(b.mul(half, b.mul(d, d)), p);
    return b.select(small, quad, b.sub(ad, b.mul(half, p)));
  }
  return b.select(small, b.mul(half, b.mul(d, d)), b.mul(p, b.sub(ad, b.mul(half, p))));
}

// d loss / d x (before the grad and mean scaling), PyTorch CPU's formulas.
Value loss_bwd(Builder& b, int64_t kind, Value d, Value p) {
  if (kind == kMse) return b.mul(full_like(b, 2.0, d), d);
  Value neg_p = b.neg(p);
  Value lo = b.compare(d, neg_p, Direction::kLt);
  Value hi = b.compare(d, p, Direction::kGt);
  if (kind == kSmoothL1) {
    Value mid = b.div(d, p);
    return b.select(lo, full_like(b, -1.0, d), b.select(hi, full_like(b, 1.0, d), mid));
  }
  return b.select(lo, neg_p, b.select(hi, p, d));
}

c10::ScalarType check_loss(int64_t kind, const at::Tensor& self, const at::Tensor& target, double param) {
  if (kind == kSmoothL1) TORCH_CHECK(param >= 0, "smooth_l1_loss does not support negative values for beta.");
  if (kind == kHuber) TORCH_CHECK(param > 0, "huber_loss does not support non-positive values for delta.");
  auto dtype = at::result_type(self, target);
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(dtype), "\"", loss_name(kind), "\" not implemented for '",
                              c10::toString(dtype), "'");
  return dtype;
}

void loss_into(int64_t kind, const at::Tensor& self, const at::Tensor& target, int64_t reduction, double param,
               c10::ScalarType dtype, const at::Tensor& out) {
  auto ct = opmath(dtype);
  auto shape = broadcast_shape({self, target});
  int64_t n = c10::multiply_integers(shape);
  record::OpCall call(loss_name(kind));
  call.attr(reduction).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(target);
  call.scalar(param, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Dims d(shape.begin(), shape.end());
    Value diff = b.sub(b.broadcast_to(b.convert(in[0], e), d), b.broadcast_to(b.convert(in[1], e), d));
    Value l = loss_fwd(b, kind, diff, b.broadcast_to(b.convert(in[2], e), d));
    if (reduction == kNone) return Values{l};
    Value s = sum_all(b, l);
    if (reduction == kMean) s = b.div(s, b.constant(static_cast<double>(n), e));
    return Values{s};
  });
}

int64_t check_reduction(int64_t r) {
  TORCH_CHECK(r >= kNone && r <= kSum, r, " is not a valid value for reduction");
  return r;
}

std::vector<int64_t> loss_shape(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
  return reduction == kNone ? broadcast_shape({self, target}) : std::vector<int64_t>{};
}

// mse_loss, smooth_l1_loss and huber_loss: functional and out= forms.
template <int64_t K>
struct Loss {
  static constexpr const char* kName = loss_name(K);
  static OutMeta meta(const at::Tensor& self, const at::Tensor& target, int64_t reduction, double param) {
    check_reduction(reduction);
    return {loss_shape(self, target, reduction), check_loss(K, self, target, param), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& target,
                   int64_t reduction, double param) {
    loss_into(K, self, target, reduction, param, m.dtype, out);
  }
};
// mse has no parameter in its schema.
struct MseLoss {
  static constexpr const char* kName = "mse_loss";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
    return Loss<kMse>::meta(self, target, reduction, 0);
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, const at::Tensor& target,
                   int64_t reduction) {
    Loss<kMse>::impl(out, m, self, target, reduction, 0);
  }
};

void loss_backward_into(int64_t kind, const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                        int64_t reduction, double param, const at::Tensor& out) {
  auto ct = opmath(out.scalar_type());
  std::vector<int64_t> shape(out.sizes().begin(), out.sizes().end());
  int64_t n = c10::multiply_integers(broadcast_shape({self, target}));
  record::OpCall call(loss_name(kind));
  call.attr(reduction).attr(static_cast<int64_t>(ct)).attr(int64_t{1});  // 1: backward
  call.input(grad);
  call.input(self);
  call.input(target);
  call.scalar(param, ct);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Dims d(shape.begin(), shape.end());
    Value diff = b.sub(b.broadcast_to(b.convert(in[1], e), d), b.broadcast_to(b.convert(in[2], e), d));
    Value dl = loss_bwd(b, kind, diff, b.broadcast_to(b.convert(in[3], e), d));
    Value g = b.broadcast_to(b.convert(in[0], e), d);
    if (reduction == kMean) g = b.div(g, b.constant(static_cast<double>(n), e, d));
    return Values{b.mul(dl, g)};
  });
}

std::vector<int64_t> loss_grad_shape(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target) {
  return broadcast_shape({grad, self, target});
}

template <int64_t K>
struct LossBackward {
  static constexpr const char* kName = loss_name(K);
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target, int64_t reduction,
                      double param) {
    check_reduction(reduction);
    return {loss_grad_shape(grad, self, target), check_loss(K, self, target, param), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   const at::Tensor& target, int64_t reduction, double param) {
    loss_backward_into(K, grad, self, target, reduction, param, out);
  }
};
struct MseLossBackward {
  static constexpr const char* kName = "mse_loss";
  static OutMeta meta(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target, int64_t reduction) {
    return LossBackward<kMse>::meta(grad, self, target, reduction, 0);
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& grad, const at::Tensor& self,
                   const at::Tensor& target, int64_t reduction) {
    LossBackward<kMse>::impl(out, m, grad, self, target, reduction, 0);
  }
};

// --- binary_cross_entropy ---------------------------------------------------------

void check_bce(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(self.sizes().equals(target.sizes()), "Using a target size (", target.sizes(),
              ") that is different to the input size (", self.sizes(), ") is deprecated. ",
              "Please ensure they have the same size.");
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"binary_cross_entropy\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  if (weight.defined()) broadcast_shape({self, weight});  // raises like CPU on mismatch
}

void bce_into(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight, int64_t reduction,
              const at::Tensor& out) {
  auto ct = opmath(self.scalar_type());
  record::OpCall call("binary_cross_entropy");
  call.attr(reduction).attr(weight.defined()).attr(static_cast<int64_t>(ct));
  call.input(self);
  call.input(target);
  if (weight.defined()) call.input(weight);
  call.output(out);
  Dims shape = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[0], e), t = b.convert(in[1], e);
    Value floor = b.constant(-100.0, e, shape);
    Value lx = b.max(b.log(x), floor);
    Value l1x = b.max(b.log1p(b.neg(x)), floor);
    Value onem = b.sub(one(b, e, shape), t);
    Value loss = b.neg(b.add(b.mul(t, lx), b.mul(onem, l1x)));
    if (weight.defined()) loss = b.mul(loss, b.broadcast_to(b.convert(in[2], e), shape));
    if (reduction == kNone) return Values{loss};
    Value s = sum_all(b, loss);
    if (reduction == kMean) s = b.div(s, b.constant(static_cast<double>(b.type(loss).numel()), e));
    return Values{s};
  });
}

struct Bce {
  static constexpr const char* kName = "binary_cross_entropy";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
                      int64_t reduction) {
    check_bce(self, target, weight.value_or(at::Tensor()));
    return {reduction == kNone ? self.sizes().vec() : std::vector<int64_t>{}, self.scalar_type(), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const at::Tensor& target,
                   const std::optional<at::Tensor>& weight, int64_t reduction) {
    bce_into(self, target, weight.value_or(at::Tensor()), reduction, out);
  }
};

// d/dx = w * (x - t) / max(x (1 - x), 1e-12), as ATen.
void bce_backward_into(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                       const at::Tensor& weight, int64_t reduction, const at::Tensor& grad_input) {
  auto ct = opmath(self.scalar_type());
  record::OpCall call("binary_cross_entropy_backward");
  call.attr(reduction).attr(weight.defined()).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(self);
  call.input(target);
  if (weight.defined()) call.input(weight);
  call.output(grad_input);
  Dims shape = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.broadcast_to(b.convert(in[0], e), shape);
    Value x = b.convert(in[1], e), t = b.convert(in[2], e);
    Value denom = b.max(b.mul(x, b.sub(one(b, e, shape), x)), b.constant(1e-12, e, shape));
    Value r = b.mul(g, b.div(b.sub(x, t), denom));
    if (weight.defined()) r = b.mul(r, b.broadcast_to(b.convert(in[3], e), shape));
    if (reduction == kMean) r = b.div(r, b.constant(static_cast<double>(b.type(x).numel()), e, shape));
    return Values{r};
  });
}
struct BceBackward {
  static constexpr const char* kName = "binary_cross_entropy_backward";
  static OutMeta meta(const at::Tensor&, const at::Tensor& self, const at::Tensor& target,
                      const std::optional<at::Tensor>& weight, int64_t) {
    check_bce(self, target, weight.value_or(at::Tensor()));
    return {self.sizes().vec(), self.scalar_type(), self.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& grad, const at::Tensor& self,
                   const at::Tensor& target, const std::optional<at::Tensor>& weight, int64_t reduction) {
    bce_backward_into(grad, self, target, weight.value_or(at::Tensor()), reduction, out);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<NllForward<false>>(m, {"nll_loss_forward", "", "nll_loss_forward.output"});
  register_variants<NllBackward<false>>(m, {"nll_loss_backward", "", "nll_loss_backward.grad_input"});
  register_variants<NllForward<true>>(m, {"nll_loss2d_forward", "", "nll_loss2d_forward.output"});
  register_variants<NllBackward<true>>(m, {"nll_loss2d_backward", "", "nll_loss2d_backward.grad_input"});
  register_variants<MseLoss>(m, {"mse_loss", "", "mse_loss.out"});
  register_variants<MseLossBackward>(m, {"mse_loss_backward", "", "mse_loss_backward.grad_input"});
  register_variants<Loss<kSmoothL1>>(m, {"smooth_l1_loss", "", "smooth_l1_loss.out"});
  register_variants<LossBackward<kSmoothL1>>(m, {"smooth_l1_loss_backward", "", "smooth_l1_loss_backward.grad_input"});
  register_variants<Loss<kHuber>>(m, {"huber_loss", "", "huber_loss.out"});
  register_variants<LossBackward<kHuber>>(m, {"huber_loss_backward", "", "huber_loss_backward.out"});
  register_variants<Bce>(m, {"binary_cross_entropy", "", "binary_cross_entropy.out"});
  register_variants<BceBackward>(m, {"binary_cross_entropy_backward", "", "binary_cross_entropy_backward.grad_input"});
}

}  // namespace
}  // namespace torch_tpu::ops
