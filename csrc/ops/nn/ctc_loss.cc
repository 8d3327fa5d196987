// CTC loss, forward and backward. The alpha/beta recursions run step by step
// over time with per-sample lengths; without a while-loop lowering they
// would unroll into a program per length, so they run on the host with
// PyTorch's CPU kernels and the results come back to tpu. Each call is a
// registered host sync (it shows in the metrics as one).
#include <ATen/ops/_ctc_loss.h>
#include <ATen/ops/_ctc_loss_backward.h>
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "ops/common.h"
#include "record/driver.h"

namespace torch_tpu::ops {
namespace {

const record::SyncSite kCtcSync{"ctc_loss", record::SyncReason::kHostRead};

std::vector<int64_t> lengths(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.dim() == 1 && (t.scalar_type() == c10::kLong || t.scalar_type() == c10::kInt), "ctc_loss: ", what,
              " must be a 1-D integer tensor");
  at::Tensor c = t.to(c10::kCPU, c10::kLong).contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

std::tuple<at::Tensor, at::Tensor> ctc_loss(const at::Tensor& log_probs, const at::Tensor& targets,
                                            c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths,
                                            int64_t blank, bool zero_infinity) {
  kCtcSync();
  auto [nll, alpha] =
      at::_ctc_loss(log_probs.cpu(), targets.cpu(), input_lengths, target_lengths, blank, zero_infinity);
  return {nll.to(log_probs.device()), alpha.to(log_probs.device())};
}

std::tuple<at::Tensor, at::Tensor> ctc_loss_tensor(const at::Tensor& log_probs, const at::Tensor& targets,
                                                   const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                                   int64_t blank, bool zero_infinity) {
  return ctc_loss(log_probs, targets, lengths(input_lengths, "input_lengths"),
                  lengths(target_lengths, "target_lengths"), blank, zero_infinity);
}

at::Tensor ctc_loss_backward(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                             c10::IntArrayRef input_lengths, c10::IntArrayRef target_lengths,
                             const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                             bool zero_infinity) {
  kCtcSync();
  return at::_ctc_loss_backward(grad.cpu(), log_probs.cpu(), targets.cpu(), input_lengths, target_lengths,
                                neg_log_likelihood.cpu(), log_alpha.cpu(), blank, zero_infinity)
      .to(log_probs.device());
}

at::Tensor ctc_loss_backward_tensor(const at::Tensor& grad, const at::Tensor& log_probs, const at::Tensor& targets,
                                    const at::Tensor& input_lengths, const at::Tensor& target_lengths,
                                    const at::Tensor& neg_log_likelihood, const at::Tensor& log_alpha, int64_t blank,
                                    bool zero_infinity) {
  return ctc_loss_backward(grad, log_probs, targets, lengths(input_lengths, "input_lengths"),
                           lengths(target_lengths, "target_lengths"), neg_log_likelihood, log_alpha, blank,
                           zero_infinity);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_ctc_loss", ctc_loss);
  m.impl("_ctc_loss.Tensor", ctc_loss_tensor);
  m.impl("_ctc_loss_backward", ctc_loss_backward);
  m.impl("_ctc_loss_backward.Tensor", ctc_loss_backward_tensor);
}

}  // namespace
}  // namespace torch_tpu::ops
