// binary_cross_entropy (+ backward) and log_sigmoid (+ backward), which
// binary_cross_entropy_with_logits and F.logsigmoid reach. kl_div,
// cosine_embedding_loss and cross_entropy are composite.
//
// Like ATen's CPU kernel the logs are clamped at -100 so that x = 0 or 1
// gives a finite loss. CPU also checks that every input lies in [0, 1];
// that would need a device->host sync per call, so it is not done here.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

enum Reduction : int64_t { kNone = 0, kMean = 1, kSum = 2 };

void check_bce(const at::Tensor& self, const at::Tensor& target, const at::Tensor& weight) {
  TORCH_CHECK(self.sizes().equals(target.sizes()), "Using a target size (", target.sizes(),
              ") that is different to the input size (", self.sizes(), ") is deprecated. ",
              "Please ensure they have the same size.");
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(self.scalar_type()), "\"binary_cross_entropy\" not implemented for '",
                              c10::toString(self.scalar_type()), "'");
  if (weight.defined()) broadcast_shape({self, weight});  // raises like CPU on mismatch
}

Value sum_all(Builder& b, Value x) {
  return b.reduce(x, zero(b, b.elem(x)), iota_dims(0, b.dims(x).size()), BinaryOp::kAdd);
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

at::Tensor& bce_out(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight_opt,
                    int64_t reduction, at::Tensor& out) {
  at::Tensor weight = weight_opt.value_or(at::Tensor());
  check_bce(self, target, weight);
  prepare_out(out, reduction == kNone ? self.sizes() : c10::IntArrayRef{}, self.scalar_type(), "binary_cross_entropy");
  bce_into(self, target, weight, reduction, out);
  return out;
}
at::Tensor bce(const at::Tensor& self, const at::Tensor& target, const std::optional<at::Tensor>& weight,
               int64_t reduction) {
  at::Tensor out = empty_tpu(reduction == kNone ? self.sizes() : c10::IntArrayRef{}, self.scalar_type(), self.device());
  return bce_out(self, target, weight, reduction, out);
}

// d/dx = w * (x - t) / max(x (1 - x), 1e-12), as ATen.
at::Tensor& bce_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                             const std::optional<at::Tensor>& weight_opt, int64_t reduction, at::Tensor& grad_input) {
  at::Tensor weight = weight_opt.value_or(at::Tensor());
  check_bce(self, target, weight);
  prepare_out(grad_input, self.sizes(), self.scalar_type(), "binary_cross_entropy_backward");
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
  return grad_input;
}
at::Tensor bce_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& target,
                        const std::optional<at::Tensor>& weight, int64_t reduction) {
  at::Tensor gi = empty_like_tpu(self);
  return bce_backward_out(grad, self, target, weight, reduction, gi);
}

// logit, which the target gradient of binary_cross_entropy uses.
at::Tensor& logit_out(const at::Tensor& self, std::optional<double> eps, at::Tensor& out) {
  auto dt = float_result(self.scalar_type());
  prepare_out(out, self.sizes(), dt, "logit");
  bool has_eps = eps.has_value() && *eps >= 0;
  double e = has_eps ? *eps : 0.0;
  pointwise(
      "logit", {self, c10::Scalar(e)}, out, opmath(dt),
      [has_eps](Builder& b, const Values& x) {
        Value v = x[0];
        if (has_eps) v = b.clamp(x[1], v, b.sub(one(b, b.elem(v), b.dims(v)), x[1]));
        return b.log(b.div(v, b.sub(one(b, b.elem(v), b.dims(v)), v)));
      },
      has_eps);
  return out;
}
at::Tensor logit(const at::Tensor& self, std::optional<double> eps) {
  at::Tensor out = empty_tpu(self.sizes(), float_result(self.scalar_type()), self.device());
  return logit_out(self, eps, out);
}

// --- log_sigmoid -------------------------------------------------------------------

void check_float(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t.scalar_type()), "\"", kernel, "\" not implemented for '",
                              c10::toString(t.scalar_type()), "'");
}

// The buffer is unused (left empty, as on CUDA): the backward recomputes
// from self.
std::tuple<at::Tensor&, at::Tensor&> log_sigmoid_forward_out(const at::Tensor& self, at::Tensor& output,
                                                             at::Tensor& buffer) {
  check_float(self, "log_sigmoid_cpu");
  prepare_out(output, self.sizes(), self.scalar_type(), "log_sigmoid_forward");
  at::native::resize_output(buffer, {0});
  auto ct = opmath(self.scalar_type());
  // min(x, 0) - log1p(exp(-|x|)): stable for large |x|.
  pointwise("log_sigmoid_forward", {self}, output, ct, [](Builder& b, const Values& x) {
    Value z = zero(b, b.elem(x[0]), b.dims(x[0]));
    Value e = b.exp(b.neg(b.abs(x[0])));
    return b.sub(b.min(x[0], z), b.log1p(e));
  });
  return {output, buffer};
}
std::tuple<at::Tensor, at::Tensor> log_sigmoid_forward(const at::Tensor& self) {
  at::Tensor out = empty_like_tpu(self);
  at::Tensor buf = empty_tpu({0}, self.scalar_type(), self.device());
  log_sigmoid_forward_out(self, out, buf);
  return {out, buf};
}

at::Tensor& log_sigmoid_backward_out(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer,
                                     at::Tensor& grad_input) {
  check_float(self, "log_sigmoid_backward_cpu");
  prepare_out(grad_input, broadcast_shape({grad, self}), self.scalar_type(), "log_sigmoid_backward");
  auto ct = opmath(self.scalar_type());
  // d/dx log(sigmoid(x)) = sigmoid(-x) = 1 / (1 + exp(x)).
  pointwise("log_sigmoid_backward", {grad, self}, grad_input, ct, [](Builder& b, const Values& x) {
    Value s = b.logistic(b.neg(x[1]));
    return b.mul(x[0], s);
  });
  return grad_input;
}
at::Tensor log_sigmoid_backward(const at::Tensor& grad, const at::Tensor& self, const at::Tensor& buffer) {
  at::Tensor gi = empty_tpu(broadcast_shape({grad, self}), self.scalar_type(), self.device());
  return log_sigmoid_backward_out(grad, self, buffer, gi);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("binary_cross_entropy", bce);
  m.impl("binary_cross_entropy.out", bce_out);
  m.impl("binary_cross_entropy_backward", bce_backward);
  m.impl("binary_cross_entropy_backward.grad_input", bce_backward_out);
  m.impl("logit", logit);
  m.impl("logit.out", logit_out);
  m.impl("log_sigmoid_forward", log_sigmoid_forward);
  m.impl("log_sigmoid_forward.output", log_sigmoid_forward_out);
  m.impl("log_sigmoid_backward", log_sigmoid_backward);
  m.impl("log_sigmoid_backward.grad_input", log_sigmoid_backward_out);
}

}  // namespace
}  // namespace torch_tpu::ops
