// Fused LSTM and GRU cells. ATen's RNN code sends accelerator devices
// (CUDA, PrivateUse1) to these kernels instead of composing the cell from
// pointwise ops, so nn.LSTM and nn.GRU reach them on tpu. Each cell, and
// each cell's backward, is one program. The workspace layout is ours (both
// sides are here): the gate activations the backward needs, as CUDA keeps.
#include <torch/library.h>

#include <optional>
#include <tuple>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using ir::Dims;

// Columns [k*h, (k+1)*h) of a [batch, n*h] value: one gate.
Value gate(Builder& b, Value x, int64_t k, int64_t h) {
  int64_t rows = b.dims(x)[0];
  return b.slice(x, {0, k * h}, {rows, (k + 1) * h}, {1, 1});
}
Value row_bias(Builder& b, Value bias, const Dims& to) { return b.broadcast_in_dim(bias, to, {1}); }
Value one_minus(Builder& b, Value x) { return b.sub(one(b, b.elem(x), b.dims(x)), x); }
Value column_sum(Builder& b, Value x) { return b.reduce(x, zero(b, b.elem(x)), {0}, BinaryOp::kAdd); }

void check_cell(const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& state, int64_t gates, const char* op) {
  TORCH_CHECK(ig.dim() == 2 && hg.sizes() == ig.sizes(), op, ": expected input_gates and hidden_gates of the same ",
              "2-D size, got ", ig.sizes(), " and ", hg.sizes());
  TORCH_CHECK(state.dim() == 2 && state.size(0) == ig.size(0) && ig.size(1) == gates * state.size(1), op,
              ": expected gates of size [batch, ", gates, " * hidden] for a state of size ", state.sizes(), ", got ",
              ig.sizes());
  TORCH_CHECK(hg.scalar_type() == ig.scalar_type() && state.scalar_type() == ig.scalar_type(), op,
              ": expected all tensors to have the same dtype");
  check_float(ig, op);
}

void check_bias(const std::optional<at::Tensor>& bias, const at::Tensor& ig, const char* op) {
  if (!bias || !bias->defined()) return;
  TORCH_CHECK(bias->dim() == 1 && bias->size(0) == ig.size(1) && bias->scalar_type() == ig.scalar_type(), op,
              ": expected a bias of size [", ig.size(1), "] and dtype ", ig.scalar_type(), ", got ", bias->sizes());
}

bool both_biases(const std::optional<at::Tensor>& ib, const std::optional<at::Tensor>& hb) {
  bool i = ib && ib->defined(), h = hb && hb->defined();
  TORCH_CHECK(i == h, "fused RNN cell: input_bias and hidden_bias must be both given or both absent");
  return i;
}

// The forward cells' inputs, in the order their lowerings read them:
// gates, state, then the two biases when given (that choice is keyed).
void cell_inputs(record::OpCall& call, const at::Tensor& ig, const at::Tensor& hg, const at::Tensor& state,
                 const at::Tensor* ib, const at::Tensor* hb) {
  call.attr(static_cast<int64_t>(ib != nullptr));
  call.input(ig);
  call.input(hg);
  call.input(state);
  if (ib) {
    call.input(*ib);
    call.input(*hb);
  }
}

// --- LSTM ----------------------------------------------------------------------------------
// gates = input_gates + hidden_gates (+ biases), split i, f, g, o;
// cy = f*cx + i*g, hy = o*tanh(cy). Workspace: [i, f, g, o] after activation.
std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                                         const at::Tensor& cx,
                                                         const std::optional<at::Tensor>& input_bias,
                                                         const std::optional<at::Tensor>& hidden_bias) {
  const char* op = "_thnn_fused_lstm_cell";
  check_cell(input_gates, hidden_gates, cx, 4, op);
  check_bias(input_bias, input_gates, op);
  check_bias(hidden_bias, input_gates, op);
  bool bias = both_biases(input_bias, hidden_bias);
  at::Tensor hy = empty_like_tpu(cx), cy = empty_like_tpu(cx), ws = empty_like_tpu(input_gates);
  if (cx.numel() == 0) return {hy, cy, ws};
  int64_t h = cx.size(1);
  ElemType e = opmath_elem(cx.scalar_type()), out_e = to_elem(cx.scalar_type());
  record::OpCall call(op);
  cell_inputs(call, input_gates, hidden_gates, cx, bias ? &*input_bias : nullptr, bias ? &*hidden_bias : nullptr);
  call.output(hy);
  call.output(cy);
  call.output(ws);
  call.run([&](Builder& b, const Values& in) {
    Value g = b.add(b.convert(in[0], e), b.convert(in[1], e));
    Dims gd = b.dims(g);
    if (bias) g = b.add(g, b.add(row_bias(b, b.convert(in[3], e), gd), row_bias(b, b.convert(in[4], e), gd)));
    Value i = b.logistic(gate(b, g, 0, h)), f = b.logistic(gate(b, g, 1, h));
    Value c = b.tanh(gate(b, g, 2, h)), o = b.logistic(gate(b, g, 3, h));
    Value cnew = b.add(b.mul(f, b.convert(in[2], e)), b.mul(i, c));
    Value hnew = b.mul(o, b.tanh(cnew));
    Value w = b.concatenate({i, f, c, o}, 1);
    return Values{b.convert(hnew, out_e), b.convert(cnew, out_e), b.convert(w, out_e)};
  });
  return {hy, cy, ws};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> lstm_cell_backward(const std::optional<at::Tensor>& grad_hy,
                                                                  const std::optional<at::Tensor>& grad_cy,
                                                                  const at::Tensor& cx, const at::Tensor& cy,
                                                                  const at::Tensor& workspace, bool has_bias) {
  bool gh = grad_hy && grad_hy->defined(), gc = grad_cy && grad_cy->defined();
  if (!gh && !gc) return {at::Tensor(), at::Tensor(), at::Tensor()};
  at::Tensor grad_gates = empty_like_tpu(workspace), grad_cx = empty_like_tpu(cx);
  at::Tensor grad_bias =
      has_bias ? empty_tpu({workspace.size(1)}, workspace.scalar_type(), workspace.device()) : at::Tensor();
  if (cx.numel() == 0) {
    if (has_bias) grad_bias.zero_();
    return {grad_gates, grad_cx, grad_bias};
  }
  int64_t h = cx.size(1);
  ElemType e = opmath_elem(cx.scalar_type()), out_e = to_elem(cx.scalar_type());
  record::OpCall call("_thnn_fused_lstm_cell_backward_impl");
  call.attr(static_cast<int64_t>(gh) | static_cast<int64_t>(gc) << 1 | static_cast<int64_t>(has_bias) << 2);
  call.input(cx);
  call.input(cy);
  call.input(workspace);
  if (gh) call.input(*grad_hy);
  if (gc) call.input(*grad_cy);
  call.output(grad_gates);
  call.output(grad_cx);
  if (has_bias) call.output(grad_bias);
  call.run([&](Builder& b, const Values& in) {
    Value c0 = b.convert(in[0], e), c1 = b.convert(in[1], e), w = b.convert(in[2], e);
    Dims hd = b.dims(c0);
    Value dh = gh ? b.convert(in[3], e) : zero(b, e, hd);
    Value dc = gc ? b.convert(in[gh ? 4 : 3], e) : zero(b, e, hd);
    Value i = gate(b, w, 0, h), f = gate(b, w, 1, h), c = gate(b, w, 2, h), o = gate(b, w, 3, h);
    Value t = b.tanh(c1);
    Value dcy = b.add(dc, b.mul(b.mul(dh, o), one_minus(b, b.mul(t, t))));
    Value di = b.mul(b.mul(dcy, c), b.mul(i, one_minus(b, i)));
    Value df = b.mul(b.mul(dcy, c0), b.mul(f, one_minus(b, f)));
    Value dg = b.mul(b.mul(dcy, i), one_minus(b, b.mul(c, c)));
    Value dout = b.mul(b.mul(dh, t), b.mul(o, one_minus(b, o)));
    Value dgates = b.concatenate({di, df, dg, dout}, 1);
    Values r{b.convert(dgates, out_e), b.convert(b.mul(dcy, f), out_e)};
    if (has_bias) r.push_back(b.convert(column_sum(b, dgates), out_e));
    return r;
  });
  return {grad_gates, grad_cx, grad_bias};
}

// --- GRU -----------------------------------------------------------------------------------
// r = s(ir + hr), z = s(ii + hi), n = tanh(in + r*hn), hy = n + z*(hx - n).
// Workspace: [r, z, n, hx, hn].
std::tuple<at::Tensor, at::Tensor> gru_cell(const at::Tensor& input_gates, const at::Tensor& hidden_gates,
                                            const at::Tensor& hx, const std::optional<at::Tensor>& input_bias,
                                            const std::optional<at::Tensor>& hidden_bias) {
  const char* op = "_thnn_fused_gru_cell";
  check_cell(input_gates, hidden_gates, hx, 3, op);
  check_bias(input_bias, input_gates, op);
  check_bias(hidden_bias, input_gates, op);
  bool bias = both_biases(input_bias, hidden_bias);
  int64_t h = hx.size(1);
  at::Tensor hy = empty_like_tpu(hx);
  at::Tensor ws = empty_tpu({hx.size(0), 5 * h}, hx.scalar_type(), hx.device());
  if (hx.numel() == 0) return {hy, ws};
  ElemType e = opmath_elem(hx.scalar_type()), out_e = to_elem(hx.scalar_type());
  record::OpCall call(op);
  cell_inputs(call, input_gates, hidden_gates, hx, bias ? &*input_bias : nullptr, bias ? &*hidden_bias : nullptr);
  call.output(hy);
  call.output(ws);
  call.run([&](Builder& b, const Values& in) {
    Value ig = b.convert(in[0], e), hg = b.convert(in[1], e), h0 = b.convert(in[2], e);
    if (bias) {
      ig = b.add(ig, row_bias(b, b.convert(in[3], e), b.dims(ig)));
      hg = b.add(hg, row_bias(b, b.convert(in[4], e), b.dims(hg)));
    }
    Value r = b.logistic(b.add(gate(b, ig, 0, h), gate(b, hg, 0, h)));
    Value z = b.logistic(b.add(gate(b, ig, 1, h), gate(b, hg, 1, h)));
    Value hn = gate(b, hg, 2, h);
    Value n = b.tanh(b.add(gate(b, ig, 2, h), b.mul(r, hn)));
    Value hnew = b.add(n, b.mul(z, b.sub(h0, n)));
    return Values{b.convert(hnew, out_e), b.convert(b.concatenate({r, z, n, h0, hn}, 1), out_e)};
  });
  return {hy, ws};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, at::Tensor> gru_cell_backward(const at::Tensor& grad_hy,
                                                                                         const at::Tensor& workspace,
                                                                                         bool has_bias) {
  TORCH_CHECK(workspace.dim() == 2 && workspace.size(1) % 5 == 0 && grad_hy.dim() == 2 &&
                  grad_hy.size(0) == workspace.size(0) && 5 * grad_hy.size(1) == workspace.size(1),
              "_thnn_fused_gru_cell_backward: workspace of size ", workspace.sizes(), " does not match grad_hy ",
              grad_hy.sizes());
  int64_t bsz = grad_hy.size(0), h = grad_hy.size(1);
  auto dt = grad_hy.scalar_type();
  auto dev = grad_hy.device();
  at::Tensor gi = empty_tpu({bsz, 3 * h}, dt, dev), gh = empty_tpu({bsz, 3 * h}, dt, dev);
  at::Tensor ghx = empty_like_tpu(grad_hy);
  at::Tensor gib = has_bias ? empty_tpu({3 * h}, dt, dev) : at::Tensor();
  at::Tensor ghb = has_bias ? empty_tpu({3 * h}, dt, dev) : at::Tensor();
  if (grad_hy.numel() == 0) {
    if (has_bias) {
      gib.zero_();
      ghb.zero_();
    }
    return {gi, gh, ghx, gib, ghb};
  }
  ElemType e = opmath_elem(dt), out_e = to_elem(dt);
  record::OpCall call("_thnn_fused_gru_cell_backward");
  call.attr(static_cast<int64_t>(has_bias));
  call.input(grad_hy);
  call.input(workspace);
  call.output(gi);
  call.output(gh);
  call.output(ghx);
  if (has_bias) {
    call.output(gib);
    call.output(ghb);
  }
  call.run([&](Builder& b, const Values& in) {
    Value dh = b.convert(in[0], e), w = b.convert(in[1], e);
    Value r = gate(b, w, 0, h), z = gate(b, w, 1, h), n = gate(b, w, 2, h), h0 = gate(b, w, 3, h);
    Value hn = gate(b, w, 4, h);
    Value dz = b.mul(b.mul(dh, b.sub(h0, n)), b.mul(z, one_minus(b, z)));
    Value dn = b.mul(b.mul(dh, one_minus(b, z)), one_minus(b, b.mul(n, n)));
    Value dr = b.mul(b.mul(dn, hn), b.mul(r, one_minus(b, r)));
    Value din = b.concatenate({dr, dz, dn}, 1);
    Value dhid = b.concatenate({dr, dz, b.mul(dn, r)}, 1);
    Values out{b.convert(din, out_e), b.convert(dhid, out_e), b.convert(b.mul(dh, z), out_e)};
    if (has_bias) {
      out.push_back(b.convert(column_sum(b, din), out_e));
      out.push_back(b.convert(column_sum(b, dhid), out_e));
    }
    return out;
  });
  return {gi, gh, ghx, gib, ghb};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_thnn_fused_lstm_cell", lstm_cell);
  m.impl("_thnn_fused_lstm_cell_backward_impl", lstm_cell_backward);
  m.impl("_thnn_fused_gru_cell", gru_cell);
  m.impl("_thnn_fused_gru_cell_backward", gru_cell_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
