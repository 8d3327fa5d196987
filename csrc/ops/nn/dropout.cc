// native_dropout (+ backward). The mask is drawn from the tpu generator
// (PHILOX keyed by seed, counter = reserved offset), so results are
// reproducible under torch.manual_seed.
#include <torch/library.h>

#include <mutex>

#include "aten/generator.h"
#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

// --- dropout -----------------------------------------------------------------------

std::tuple<at::Tensor, at::Tensor> native_dropout(const at::Tensor& input, double p, std::optional<bool> train) {
  TORCH_CHECK(p >= 0 && p <= 1, "dropout probability has to be between 0 and 1, but got ", p);
  at::Tensor mask = empty_like_tpu(input, c10::kBool);
  at::Tensor out = empty_like_tpu(input);
  if (input.numel() == 0) return {out, mask};
  bool training = !train.has_value() || *train;
  if (!training || p == 0) {
    // Identity with an all-true mask (PyTorch CPU does the same).
    mask.fill_(true);
    out.copy_(input);
    return {out, mask};
  }
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(input.scalar_type()), "\"native_dropout\" not implemented for '",
                              c10::toString(input.scalar_type()), "'");
  // One u32 of random bits per element; reserve that many counter values.
  int64_t n = input.numel();
  uint64_t seed, offset;
  TpuGeneratorImpl* gen = get_generator(std::nullopt, input.device().index());
  {
    std::lock_guard<std::mutex> lock(gen->mutex_);
    seed = gen->current_seed();
    offset = gen->advance((n + 3) / 4 * 4);  // rng_state below records the same count
  }
  auto ct = opmath(input.scalar_type());
  double keep = 1.0 - p;
  double scale = keep == 0 ? 0.0 : 1.0 / keep;

  record::OpCall call("native_dropout");
  call.attr(static_cast<int64_t>(ct));
  call.input(input);
  call.rng_state(gen, seed, offset, (n + 3) / 4 * 4);
  call.scalar(p, c10::kFloat);
  call.scalar(scale, ct);
  call.output(out);
  call.output(mask);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value x = b.convert(in[0], e);
    const Dims& d = b.dims(x);
    Value s = b.reshape(b.bitcast_convert(in[1], ElemType::kU64), {1});
    Value o = b.reshape(b.bitcast_convert(in[2], ElemType::kU64), {1});
    Value state = b.concatenate({s, o}, 0);
    Value bits = b.rng_bit_generator(state, d, ElemType::kU32)[1];
    // Top 23 bits as the mantissa of a float in [1, 2), minus 1: uniform [0, 1).
    Value mant = b.shr_logical(bits, b.constant(9, ElemType::kU32, d));
    Value f = b.bitcast_convert(b.or_(mant, b.constant(0x3f800000, ElemType::kU32, d)), ElemType::kF32);
    Value u = b.sub(f, b.constant(1.0, ElemType::kF32, d));
    Value keep_mask = b.compare(u, b.broadcast_to(in[3], d), Direction::kGe);
    // x * mask * scale, as CPU (so NaN inputs stay NaN where dropped).
    Value y = b.mul(b.mul(x, b.convert(keep_mask, e)), b.broadcast_to(b.convert(in[4], e), d));
    return Values{y, keep_mask};
  });
  return {out, mask};
}

at::Tensor native_dropout_backward(const at::Tensor& grad, const at::Tensor& mask, double scale) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, "Mask should be Bool Scalar Type", mask.scalar_type());
  // grad * mask * scale: a Python float scale promotes integer/bool grads
  // to the default float dtype, as on CPU.
  at::Tensor out = empty_tpu(broadcast_shape({grad, mask}), float_result(grad.scalar_type()), grad.device());
  auto ct = opmath(out.scalar_type());
  record::OpCall call("native_dropout_backward");
  call.attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(mask);
  call.scalar(scale, ct);
  call.output(out);
  std::vector<int64_t> shape(out.sizes().begin(), out.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.broadcast_to(b.convert(in[0], e), shape);
    Value m = b.broadcast_to(in[1], shape);
    return Values{b.mul(b.mul(g, b.convert(m, e)), b.broadcast_to(b.convert(in[2], e), shape))};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("native_dropout", native_dropout);
  m.impl("native_dropout_backward", native_dropout_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
