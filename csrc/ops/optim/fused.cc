// Fused optimizer steps for torch.optim's fused=True path (PyTorch allows
// it for the PrivateUse1 backend): _fused_adam_, _fused_adamw_,
// _fused_sgd_, _fused_adagrad_ (float and tensor lr). Each call is ONE
// program updating every parameter of the list (and its state) on device.
// Semantics follow ATen's CPU kernels: the grad is unscaled by grad_scale
// and written back; a nonzero found_inf leaves everything untouched;
// half-precision params are updated in f32 and rounded once.
// Hyperparameters are runtime scalars (changing lr doesn't recompile);
// only flags that change the program's structure are attributes.
#include <torch/library.h>

#include <optional>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

void check_list(at::TensorList params, at::TensorList other, const char* what) {
  TORCH_CHECK(other.size() == params.size(), "Expected ", what, " to have ", params.size(), " tensors, got ",
              other.size());
  for (size_t i = 0; i < params.size(); ++i) {
    TORCH_CHECK(other[i].sizes() == params[i].sizes(), what, "[", i, "] has shape ", other[i].sizes(),
                " but the parameter has shape ", params[i].sizes());
  }
}

void check_params(at::TensorList params) {
  for (const at::Tensor& p : params) {
    TORCH_CHECK(p.device().type() == c10::DeviceType::PrivateUse1 && c10::isFloatingType(p.scalar_type()),
                "`fused=True` requires all the params to be floating point tpu tensors, got ", p.scalar_type(), " on ",
                p.device());
  }
}

// Learning rate: a Python float (runtime scalar) or a tensor (0-dim CPU
// tensors become runtime scalars too).
struct Lr {
  std::optional<double> value;
  const at::Tensor* tensor = nullptr;
};

// The shared inputs every fused step takes: lr, extra scalar
// hyperparameters, optional grad_scale / found_inf. Records argument
// indices for the lowering.
struct Shared {
  int lr = -1, grad_scale = -1, found_inf = -1;
  std::vector<int> hyper;

  void add(record::OpCall& call, const Lr& lr_arg, const std::vector<double>& hypers,
           const std::optional<at::Tensor>& gs, const std::optional<at::Tensor>& fi) {
    lr = lr_arg.tensor ? call.input(*lr_arg.tensor) : call.scalar(*lr_arg.value, c10::kFloat);
    for (double h : hypers) hyper.push_back(call.scalar(h, c10::kFloat));
    if (gs) grad_scale = call.input(*gs);
    if (fi) found_inf = call.input(*fi);
  }
  // A 0-d value of element type `e`.
  static Value scalar(Builder& b, const Values& in, int idx, ElemType e) {
    return b.convert(b.reshape(in[idx], {}), e);
  }
};

void attr_flags(record::OpCall& call, const Lr& lr, const std::optional<at::Tensor>& gs,
                const std::optional<at::Tensor>& fi, size_t n) {
  call.attr(static_cast<int64_t>(n)).attr(lr.tensor != nullptr).attr(gs.has_value()).attr(fi.has_value());
}

void check_scale(const std::optional<at::Tensor>& t, const char* what) {
  if (!t) return;
  TORCH_CHECK(t->numel() == 1 && t->scalar_type() == c10::kFloat, what, " must be a 1-element float tensor");
}

Value bcast(Builder& b, Value s, const Value& like) { return b.broadcast_to(s, b.dims(like)); }

// found_inf != 0 keeps `old`, else `upd` (both already in the output dtype).
Value guard(Builder& b, const std::optional<Value>& skip, Value upd, Value old) {
  if (!skip) return upd;
  return b.select(bcast(b, *skip, upd), old, upd);
}

std::optional<Value> skip_pred(Builder& b, const Values& in, const Shared& sh) {
  if (sh.found_inf < 0) return std::nullopt;
  Value f = Shared::scalar(b, in, sh.found_inf, ElemType::kF32);
  return b.compare(f, b.constant(0.0, ElemType::kF32), Direction::kNe);
}

// Unscales (if grad_scale), returning the grad in compute type.
Value load_grad(Builder& b, const Values& in, int gi, const Shared& sh, ElemType ce) {
  Value g = b.convert(in[gi], ce);
  if (sh.grad_scale >= 0) g = b.div(g, bcast(b, Shared::scalar(b, in, sh.grad_scale, ce), g));
  return g;
}

// One parameter's start of a step, in its compute type `ce`: the parameter,
// its unscaled grad (negated under maximize) and the unscaled grad as
// written back when grad_scale is given.
struct ParamStep {
  ElemType ce, pe;
  Value p, g, g_store;
};
ParamStep begin_step(Builder& b, const Values& in, const Shared& sh, const at::Tensor& param, int pi, int gi,
                     bool maximize) {
  ParamStep r;
  r.ce = opmath_elem(param.scalar_type());
  r.pe = to_elem(param.scalar_type());
  r.p = b.convert(in[pi], r.ce);
  r.g = load_grad(b, in, gi, sh, r.ce);
  r.g_store = r.g;
  if (maximize) r.g = b.neg(r.g);
  return r;
}

// --- Adam / AdamW --------------------------------------------------------------

void fused_adam_impl(bool adamw, at::TensorList params, at::TensorList grads, at::TensorList exp_avgs,
                     at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                     const Lr& lr, double beta1, double beta2, double weight_decay, double eps, bool amsgrad,
                     bool maximize, const std::optional<at::Tensor>& grad_scale,
                     const std::optional<at::Tensor>& found_inf) {
  if (params.empty()) return;
  check_params(params);
  check_list(params, grads, "grads");
  check_list(params, exp_avgs, "exp_avgs");
  check_list(params, exp_avg_sqs, "exp_avg_sqs");
  if (amsgrad)
    check_list(params, max_exp_avg_sqs, "max_exp_avg_sqs");
  else
    TORCH_CHECK(max_exp_avg_sqs.empty(), "max_exp_avg_sqs must be empty when amsgrad=False");
  TORCH_CHECK(state_steps.size() == params.size(), "Expected ", params.size(), " state_steps, got ",
              state_steps.size());
  for (const at::Tensor& s : state_steps) TORCH_CHECK(s.numel() == 1, "each state_step must have one element");
  check_scale(grad_scale, "grad_scale");
  check_scale(found_inf, "found_inf");
  size_t n = params.size();
  bool wd = weight_decay != 0.0;
  record::OpCall call(adamw ? "fused_adamw" : "fused_adam");
  attr_flags(call, lr, grad_scale, found_inf, n);
  call.attr(adamw).attr(amsgrad).attr(maximize).attr(wd);
  struct Idx {
    int p, g, m, v, vmax = -1, step;
  };
  std::vector<Idx> idx(n);
  for (size_t i = 0; i < n; ++i) {
    idx[i].p = call.input(params[i]);
    idx[i].g = call.input(grads[i]);
    idx[i].m = call.input(exp_avgs[i]);
    idx[i].v = call.input(exp_avg_sqs[i]);
    if (amsgrad) idx[i].vmax = call.input(max_exp_avg_sqs[i]);
    idx[i].step = call.input(state_steps[i]);
  }
  Shared sh;
  sh.add(call, lr, {beta1, beta2, weight_decay, eps}, grad_scale, found_inf);
  for (size_t i = 0; i < n; ++i) {
    call.output(params[i]);
    call.output(exp_avgs[i]);
    call.output(exp_avg_sqs[i]);
    if (amsgrad) call.output(max_exp_avg_sqs[i]);
    if (grad_scale) call.output(grads[i]);
  }
  call.run([&](Builder& b, const Values& in) {
    std::optional<Value> skip = skip_pred(b, in, sh);
    Values outs;
    for (size_t i = 0; i < n; ++i) {
      const Idx& x = idx[i];
      auto [ce, pe, p, g, g_store] = begin_step(b, in, sh, params[i], x.p, x.g, maximize);
      auto s = [&](int k) { return Shared::scalar(b, in, k, ce); };
      Value lr_v = s(sh.lr), b1 = s(sh.hyper[0]), b2 = s(sh.hyper[1]), wd_v = s(sh.hyper[2]), eps_v = s(sh.hyper[3]);
      Value one_c = b.constant(1.0, ce);
      Value step = s(x.step);
      Value bc1 = b.sub(one_c, b.pow(b1, step));
      Value bc2 = b.sub(one_c, b.pow(b2, step));
      Value step_size = b.div(lr_v, bc1);
      Value bc2_sqrt = b.sqrt(bc2);
      if (wd) {
        if (adamw)
          p = b.mul(p, bcast(b, b.sub(one_c, b.mul(lr_v, wd_v)), p));
        else
          g = b.add(g, b.mul(p, bcast(b, wd_v, p)));
      }
      Value m = b.add(b.mul(b.convert(in[x.m], ce), bcast(b, b1, g)), b.mul(g, bcast(b, b.sub(one_c, b1), g)));
      Value v =
          b.add(b.mul(b.convert(in[x.v], ce), bcast(b, b2, g)), b.mul(b.mul(g, g), bcast(b, b.sub(one_c, b2), g)));
      Value vmax;
      Value denom_src = v;
      if (amsgrad) {
        vmax = b.max(b.convert(in[x.vmax], ce), v);
        denom_src = vmax;
      }
      Value denom = b.add(b.div(b.sqrt(denom_src), bcast(b, bc2_sqrt, g)), bcast(b, eps_v, g));
      p = b.sub(p, b.div(b.mul(bcast(b, step_size, g), m), denom));

      outs.push_back(guard(b, skip, b.convert(p, pe), in[x.p]));
      outs.push_back(guard(b, skip, b.convert(m, b.elem(in[x.m])), in[x.m]));
      outs.push_back(guard(b, skip, b.convert(v, b.elem(in[x.v])), in[x.v]));
      if (amsgrad) outs.push_back(guard(b, skip, b.convert(vmax, b.elem(in[x.vmax])), in[x.vmax]));
      if (grad_scale) outs.push_back(guard(b, skip, b.convert(g_store, b.elem(in[x.g])), in[x.g]));
    }
    return outs;
  });
}

template <bool kAdamW>
void fused_adam_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs, at::TensorList exp_avg_sqs,
                 at::TensorList max_exp_avg_sqs, at::TensorList state_steps, double lr, double beta1, double beta2,
                 double weight_decay, double eps, bool amsgrad, bool maximize,
                 const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(kAdamW, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, Lr{lr, nullptr}, beta1,
                  beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}

template <bool kAdamW>
void fused_adam_tensor_lr_(at::TensorList self, at::TensorList grads, at::TensorList exp_avgs,
                           at::TensorList exp_avg_sqs, at::TensorList max_exp_avg_sqs, at::TensorList state_steps,
                           const at::Tensor& lr, double beta1, double beta2, double weight_decay, double eps,
                           bool amsgrad, bool maximize, const std::optional<at::Tensor>& grad_scale,
                           const std::optional<at::Tensor>& found_inf) {
  fused_adam_impl(kAdamW, self, grads, exp_avgs, exp_avg_sqs, max_exp_avg_sqs, state_steps, Lr{std::nullopt, &lr},
                  beta1, beta2, weight_decay, eps, amsgrad, maximize, grad_scale, found_inf);
}

// --- SGD -------------------------------------------------------------------------

void fused_sgd_impl(at::TensorList params, at::TensorList grads, at::TensorList bufs, double weight_decay,
                    double momentum, const Lr& lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                    const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  if (params.empty()) return;
  check_params(params);
  check_list(params, grads, "grads");
  bool use_buf = momentum != 0.0;
  if (use_buf) check_list(params, bufs, "momentum_buffer_list");
  check_scale(grad_scale, "grad_scale");
  check_scale(found_inf, "found_inf");
  size_t n = params.size();
  bool wd = weight_decay != 0.0;
  record::OpCall call("fused_sgd");
  attr_flags(call, lr, grad_scale, found_inf, n);
  call.attr(use_buf).attr(nesterov).attr(maximize).attr(is_first_step).attr(wd);
  struct Idx {
    int p, g, buf = -1;
  };
  std::vector<Idx> idx(n);
  for (size_t i = 0; i < n; ++i) {
    idx[i].p = call.input(params[i]);
    idx[i].g = call.input(grads[i]);
    // On the first step the buffer is uninitialised and only written.
    if (use_buf && !is_first_step) idx[i].buf = call.input(bufs[i]);
  }
  Shared sh;
  sh.add(call, lr, {weight_decay, momentum, dampening}, grad_scale, found_inf);
  for (size_t i = 0; i < n; ++i) {
    call.output(params[i]);
    if (use_buf) call.output(bufs[i]);
    if (grad_scale) call.output(grads[i]);
  }
  call.run([&](Builder& b, const Values& in) {
    std::optional<Value> skip = skip_pred(b, in, sh);
    Values outs;
    for (size_t i = 0; i < n; ++i) {
      const Idx& x = idx[i];
      auto [ce, pe, p, g, g_store] = begin_step(b, in, sh, params[i], x.p, x.g, maximize);
      auto s = [&](int k) { return Shared::scalar(b, in, k, ce); };
      Value lr_v = s(sh.lr), wd_v = s(sh.hyper[0]), mom = s(sh.hyper[1]), damp = s(sh.hyper[2]);
      if (wd) g = b.add(g, b.mul(p, bcast(b, wd_v, p)));
      Value buf;
      if (use_buf) {
        if (is_first_step) {
          buf = g;
        } else {
          Value one_c = b.constant(1.0, ce);
          buf = b.add(b.mul(b.convert(in[x.buf], ce), bcast(b, mom, g)), b.mul(g, bcast(b, b.sub(one_c, damp), g)));
        }
        g = nesterov ? b.add(g, b.mul(buf, bcast(b, mom, g))) : buf;
      }
      p = b.sub(p, b.mul(g, bcast(b, lr_v, g)));
      outs.push_back(guard(b, skip, b.convert(p, pe), in[x.p]));
      if (use_buf) {
        ElemType be = to_elem(bufs[i].scalar_type());
        Value nb = b.convert(buf, be);
        // A skipped first step leaves the new (uninitialised) buffer zeroed
        // rather than holding a non-finite grad; the next step reads it.
        Value kept = is_first_step ? zero(b, be, b.dims(nb)) : in[x.buf];
        outs.push_back(guard(b, skip, nb, kept));
      }
      if (grad_scale) outs.push_back(guard(b, skip, b.convert(g_store, b.elem(in[x.g])), in[x.g]));
    }
    return outs;
  });
}

void fused_sgd_(at::TensorList self, at::TensorList grads, at::TensorList bufs, double weight_decay, double momentum,
                double lr, double dampening, bool nesterov, bool maximize, bool is_first_step,
                const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_sgd_impl(self, grads, bufs, weight_decay, momentum, Lr{lr, nullptr}, dampening, nesterov, maximize,
                 is_first_step, grad_scale, found_inf);
}

void fused_sgd_tensor_lr_(at::TensorList self, at::TensorList grads, at::TensorList bufs, double weight_decay,
                          double momentum, const at::Tensor& lr, double dampening, bool nesterov, bool maximize,
                          bool is_first_step, const std::optional<at::Tensor>& grad_scale,
                          const std::optional<at::Tensor>& found_inf) {
  fused_sgd_impl(self, grads, bufs, weight_decay, momentum, Lr{std::nullopt, &lr}, dampening, nesterov, maximize,
                 is_first_step, grad_scale, found_inf);
}

// --- Adagrad -----------------------------------------------------------------------

void fused_adagrad_impl(at::TensorList params, at::TensorList grads, at::TensorList state_sums,
                        at::TensorList state_steps, const Lr& lr, double lr_decay, double weight_decay, double eps,
                        bool maximize, const std::optional<at::Tensor>& grad_scale,
                        const std::optional<at::Tensor>& found_inf) {
  if (params.empty()) return;
  check_params(params);
  check_list(params, grads, "grads");
  check_list(params, state_sums, "state_sums");
  TORCH_CHECK(state_steps.size() == params.size(), "Expected ", params.size(), " state_steps, got ",
              state_steps.size());
  for (const at::Tensor& s : state_steps) TORCH_CHECK(s.numel() == 1, "each state_step must have one element");
  check_scale(grad_scale, "grad_scale");
  check_scale(found_inf, "found_inf");
  size_t n = params.size();
  bool wd = weight_decay != 0.0;
  record::OpCall call("fused_adagrad");
  attr_flags(call, lr, grad_scale, found_inf, n);
  call.attr(maximize).attr(wd);
  struct Idx {
    int p, g, sum, step;
  };
  std::vector<Idx> idx(n);
  for (size_t i = 0; i < n; ++i) {
    idx[i].p = call.input(params[i]);
    idx[i].g = call.input(grads[i]);
    idx[i].sum = call.input(state_sums[i]);
    idx[i].step = call.input(state_steps[i]);
  }
  Shared sh;
  sh.add(call, lr, {lr_decay, weight_decay, eps}, grad_scale, found_inf);
  for (size_t i = 0; i < n; ++i) {
    call.output(params[i]);
    call.output(state_sums[i]);
    if (grad_scale) call.output(grads[i]);
  }
  call.run([&](Builder& b, const Values& in) {
    std::optional<Value> skip = skip_pred(b, in, sh);
    Values outs;
    for (size_t i = 0; i < n; ++i) {
      const Idx& x = idx[i];
      auto [ce, pe, p, g, g_store] = begin_step(b, in, sh, params[i], x.p, x.g, maximize);
      auto s = [&](int k) { return Shared::scalar(b, in, k, ce); };
      Value lr_v = s(sh.lr), decay = s(sh.hyper[0]), wd_v = s(sh.hyper[1]), eps_v = s(sh.hyper[2]);
      Value one_c = b.constant(1.0, ce);
      // clr = lr / (1 + (step - 1) * lr_decay)
      Value clr = b.div(lr_v, b.add(one_c, b.mul(b.sub(s(x.step), one_c), decay)));
      if (wd) g = b.add(g, b.mul(p, bcast(b, wd_v, p)));
      Value sum = b.add(b.convert(in[x.sum], ce), b.mul(g, g));
      Value std_v = b.add(b.sqrt(sum), bcast(b, eps_v, g));
      p = b.sub(p, b.div(b.mul(bcast(b, clr, g), g), std_v));
      outs.push_back(guard(b, skip, b.convert(p, pe), in[x.p]));
      outs.push_back(guard(b, skip, b.convert(sum, b.elem(in[x.sum])), in[x.sum]));
      if (grad_scale) outs.push_back(guard(b, skip, b.convert(g_store, b.elem(in[x.g])), in[x.g]));
    }
    return outs;
  });
}

void fused_adagrad_(at::TensorList self, at::TensorList grads, at::TensorList state_sums, at::TensorList state_steps,
                    double lr, double lr_decay, double weight_decay, double eps, bool maximize,
                    const std::optional<at::Tensor>& grad_scale, const std::optional<at::Tensor>& found_inf) {
  fused_adagrad_impl(self, grads, state_sums, state_steps, Lr{lr, nullptr}, lr_decay, weight_decay, eps, maximize,
                     grad_scale, found_inf);
}

void fused_adagrad_tensor_lr_(at::TensorList self, at::TensorList grads, at::TensorList state_sums,
                              at::TensorList state_steps, const at::Tensor& lr, double lr_decay, double weight_decay,
                              double eps, bool maximize, const std::optional<at::Tensor>& grad_scale,
                              const std::optional<at::Tensor>& found_inf) {
  fused_adagrad_impl(self, grads, state_sums, state_steps, Lr{std::nullopt, &lr}, lr_decay, weight_decay, eps, maximize,
                     grad_scale, found_inf);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_adam_", fused_adam_<false>);
  m.impl("_fused_adam_.tensor_lr", fused_adam_tensor_lr_<false>);
  m.impl("_fused_adamw_", fused_adam_<true>);
  m.impl("_fused_adamw_.tensor_lr", fused_adam_tensor_lr_<true>);
  m.impl("_fused_sgd_", fused_sgd_);
  m.impl("_fused_sgd_.tensor_lr", fused_sgd_tensor_lr_);
  m.impl("_fused_adagrad_", fused_adagrad_);
  m.impl("_fused_adagrad_.tensor_lr", fused_adagrad_tensor_lr_);
}

}  // namespace
}  // namespace torch_tpu::ops
