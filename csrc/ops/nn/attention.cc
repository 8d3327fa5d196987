// scaled_dot_product_attention as two programs, forward and backward,
// through PyTorch's "overrideable" SDPA backend for PrivateUse1:
// _fused_sdp_choice picks it, _scaled_dot_product_fused_attention_overrideable
// computes softmax(q k^T * scale + mask) v in one program and keeps the
// row log-sum-exp, and its _backward recomputes the probabilities from
// it (no [L, S] matrix is saved between the two). The composite math path
// it replaces was about ten programs forward and eight backward per call.
// Cases it does not cover (dropout, grouped-query heads, a mask that needs
// a gradient, float64, other ranks) stay on the math path. The same two
// programs serve _scaled_dot_product_flash_attention_for_cpu (and its
// backward), which code written for CPU calls directly.
#include <ATen/Context.h>
#include <ATen/native/transformers/attention.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

constexpr int64_t kMath = 0, kOverrideable = 4;  // sdp::SDPBackend values
enum MaskKind : int64_t { kNoMask = 0, kBoolMask = 1, kFloatMask = 2 };

bool fusable_dtype(c10::ScalarType t) { return t == c10::kFloat || t == c10::kBFloat16 || t == c10::kHalf; }

// The size checks read symbolic sizes (sym_size, sym_numel): dynamo's
// fake-tensor run of a graph with dynamic shapes (generate() with a new
// length) asks this choice too, and plain size() throws there. A
// comparison of symbolic sizes becomes a guard of the graph, as any size
// test in PyTorch's own code does.
int64_t fused_sdp_choice(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const std::optional<at::Tensor>& mask, double dropout_p, bool is_causal,
                         std::optional<double> scale, bool enable_gqa) {
  auto& ctx = at::globalContext();
  bool ok = ctx.userEnabledOverrideableSDP() && dropout_p == 0.0 && q.dim() == 4 && k.dim() == 4 && v.dim() == 4 &&
            fusable_dtype(q.scalar_type()) && k.scalar_type() == q.scalar_type() &&
            v.scalar_type() == q.scalar_type() && q.sym_size(0) == k.sym_size(0) && k.sym_size(0) == v.sym_size(0) &&
            q.sym_size(1) == k.sym_size(1) && k.sym_size(1) == v.sym_size(1) && q.sym_size(3) == k.sym_size(3) &&
            k.sym_size(2) == v.sym_size(2) && q.sym_numel() > 0 && k.sym_numel() > 0 && v.sym_numel() > 0;
  if (ok && mask && mask->defined()) {
    const at::Tensor& m = *mask;
    ok = !is_causal && !m.requires_grad() && m.dim() <= 4 &&
         (m.scalar_type() == c10::kBool || m.scalar_type() == q.scalar_type()) && m.device() == q.device();
    // Broadcastable to [B, H, L, S] (trailing alignment).
    const c10::SymInt full[4] = {q.sym_size(0), q.sym_size(1), q.sym_size(2), k.sym_size(2)};
    for (int64_t i = 0; ok && i < m.dim(); ++i) {
      const c10::SymInt& sz = m.sym_size(m.dim() - 1 - i);
      ok = sz == full[3 - i] || sz == 1;
    }
  }
  if (ok) return kOverrideable;
  TORCH_CHECK(ctx.userEnabledMathSDP(), "scaled_dot_product_attention: no enabled backend can run these inputs on ",
              "tpu (the fused one needs dropout_p=0, 4-D float32/bfloat16/float16 inputs with equal heads); ",
              "enable the math backend");
  return kMath;
}

double scale_of(const at::Tensor& q, std::optional<double> scale) {
  return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
}

// An empty tensor laid out like `like` (dimension order by stride), as the
// meta function's alloc_with_matching_layout does, so eager and compiled
// agree on the output's strides.
at::Tensor empty_matching(const at::Tensor& like, std::vector<int64_t> sizes) {
  const int64_t r = like.dim();
  std::vector<int64_t> order(r);
  for (int64_t i = 0; i < r; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return like.stride(a) > like.stride(b); });
  std::vector<int64_t> physical(r), inverse(r);
  for (int64_t i = 0; i < r; ++i) {
    physical[i] = sizes[order[i]];
    inverse[order[i]] = i;
  }
  return empty_tpu(physical, like.scalar_type(), like.device()).permute(inverse);
}

// Scores [B, H, L, S] in the compute type: q k^T * scale, masked.
Value scores(Builder& b, Value q, Value k, const std::optional<Value>& mask, MaskKind mk, bool causal, double scale,
             ElemType ce, const char* prec) {
  Value s = b.dot_general(q, k, {0, 1}, {0, 1}, {3}, {3}, ce, prec);
  const Dims d = b.dims(s);
  s = b.mul(s, b.constant(scale, ce, d));
  Value neg_inf = b.constant(-INFINITY, ce, d);
  if (causal) {
    // Top-left aligned, as the math path's ones(L, S).tril().
    Dims ls = {d[2], d[3]};
    Value keep = b.compare(b.iota(ls, 1, ElemType::kS64), b.iota(ls, 0, ElemType::kS64), Direction::kLe);
    s = b.select(b.broadcast_to(keep, d), s, neg_inf);
  }
  if (mk == kBoolMask) s = b.select(b.broadcast_to(*mask, d), s, neg_inf);
  if (mk == kFloatMask) s = b.add(s, b.broadcast_to(b.convert(*mask, ce), d));
  return s;
}

Value bcast_rows(Builder& b, Value rows, const Dims& d) { return b.broadcast_in_dim(rows, d, {0, 1, 2}); }

MaskKind mask_kind(const at::Tensor* mask) {
  if (!mask || !mask->defined()) return kNoMask;
  return mask->scalar_type() == c10::kBool ? kBoolMask : kFloatMask;
}

// out = softmax(q k^T * scale + mask) v and lse = the rows' log-sum-exp, one program.
void attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor* mask,
                       bool is_causal, std::optional<double> scale, const at::Tensor& out, const at::Tensor& lse) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "scaled_dot_product_attention on tpu: expected 4-D ",
              "query, key and value, got ", q.dim(), "-D, ", k.dim(), "-D and ", v.dim(), "-D");
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
              "Expected query, key, and value to have the same dtype, but got query.dtype: ", q.scalar_type(),
              " key.dtype: ", k.scalar_type(), " and value.dtype: ", v.scalar_type(), " instead.");
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(0) == v.size(0) && q.size(1) == k.size(1) && q.size(1) == v.size(1) &&
                  q.size(3) == k.size(3) && k.size(2) == v.size(2),
              "scaled_dot_product_attention on tpu: query ", q.sizes(), ", key ", k.sizes(), " and value ", v.sizes(),
              " do not fit together");
  const MaskKind mk = mask_kind(mask);
  const double sc = scale_of(q, scale);
  const auto ct = opmath(q.scalar_type());
  const char* prec = precision_for(ct);
  record::OpCall call("scaled_dot_product_attention");
  call.attr(static_cast<int64_t>(mk)).attr(is_causal).attr(sc).attr(std::string_view(prec));
  call.input(q);
  call.input(k);
  call.input(v);
  if (mk != kNoMask) call.input(*mask);
  call.output(out);
  call.output(lse);
  call.run([&](Builder& b, const Values& in) {
    ElemType ce = to_elem(ct);
    std::optional<Value> m;
    if (mk != kNoMask) m = in[3];
    Value s = scores(b, b.convert(in[0], ce), b.convert(in[1], ce), m, mk, is_causal, sc, ce, prec);
    const Dims d = b.dims(s);
    Value mx = b.reduce(s, lowest(b, ce), {3}, BinaryOp::kMax);
    const Dims rows = b.dims(mx);
    Value zero_rows = b.constant(0, ce, rows), neg_inf_rows = b.constant(-INFINITY, ce, rows);
    // A fully masked row has max -inf; it gives zeros (as _safe_softmax) and lse -inf.
    Value mx_safe = b.select(b.compare(mx, neg_inf_rows, Direction::kEq), zero_rows, mx);
    Value p = b.exp(b.sub(s, bcast_rows(b, mx_safe, d)));
    Value l = b.reduce(p, zero(b, ce), {3}, BinaryOp::kAdd);
    Value empty_row = b.compare(l, zero_rows, Direction::kEq);
    Value one_rows = b.constant(1, ce, rows);
    Value inv = b.select(empty_row, zero_rows, b.div(one_rows, l));
    Value o = b.dot_general(b.mul(p, bcast_rows(b, inv, d)), b.convert(in[2], ce), {0, 1}, {0, 1}, {3}, {2}, ce, prec);
    Value lse_v = b.select(empty_row, neg_inf_rows, b.add(b.log(b.select(empty_row, one_rows, l)), mx_safe));
    return Values{o, lse_v};
  });
}

// The gradients of attention_forward for the defined ones of gq, gk, gv,
// recomputing the probabilities from lse.
void attention_backward(const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const at::Tensor* mask, const at::Tensor& out, const at::Tensor& lse, bool is_causal,
                        std::optional<double> scale, const at::Tensor& gq, const at::Tensor& gk, const at::Tensor& gv) {
  const MaskKind mk = mask_kind(mask);
  const double sc = scale_of(q, scale);
  const auto ct = opmath(q.scalar_type());
  const char* prec = precision_for(ct);
  const bool need_q = gq.defined(), need_k = gk.defined(), need_v = gv.defined();
  if (!need_q && !need_k && !need_v) return;
  record::OpCall call("scaled_dot_product_attention_backward");
  call.attr(static_cast<int64_t>(mk)).attr(is_causal).attr(sc).attr(std::string_view(prec));
  call.attr(need_q).attr(need_k).attr(need_v);
  call.input(grad_out);
  call.input(q);
  call.input(k);
  call.input(v);
  call.input(out);
  call.input(lse);
  if (mk != kNoMask) call.input(*mask);
  for (const at::Tensor* g : {&gq, &gk, &gv})
    if (g->defined()) call.output(*g);
  call.run([&](Builder& b, const Values& in) {
    ElemType ce = to_elem(ct);
    Value dout = b.convert(in[0], ce), qv = b.convert(in[1], ce), kv = b.convert(in[2], ce), vv = b.convert(in[3], ce);
    std::optional<Value> m;
    if (mk != kNoMask) m = in[6];
    Value s = scores(b, qv, kv, m, mk, is_causal, sc, ce, prec);
    const Dims d = b.dims(s);
    Value lse_v = b.convert(in[5], ce);
    Value empty_row = bcast_rows(b, b.compare(lse_v, b.constant(-INFINITY, ce, b.dims(lse_v)), Direction::kEq), d);
    Value p = b.select(empty_row, b.constant(0, ce, d), b.exp(b.sub(s, bcast_rows(b, lse_v, d))));
    Values outs;
    Value dp = b.dot_general(dout, vv, {0, 1}, {0, 1}, {3}, {3}, ce, prec);  // [B, H, L, S]
    // dO_i . O_i from the saved output, as ATen's CPU kernel does (sum_j P_ij
    // dP_ij is the same value unrounded, but then results drift from CPU's).
    Value rowdot = b.reduce(b.mul(dout, b.convert(in[4], ce)), zero(b, ce), {3}, BinaryOp::kAdd);
    Value ds = b.mul(p, b.sub(dp, bcast_rows(b, rowdot, d)));
    if (need_q) {
      Value g = b.dot_general(ds, kv, {0, 1}, {0, 1}, {3}, {2}, ce, prec);
      outs.push_back(b.mul(g, b.constant(sc, ce, b.dims(g))));
    }
    if (need_k) {
      Value g = b.dot_general(ds, qv, {0, 1}, {0, 1}, {2}, {2}, ce, prec);
      outs.push_back(b.mul(g, b.constant(sc, ce, b.dims(g))));
    }
    if (need_v) outs.push_back(b.dot_general(p, dout, {0, 1}, {0, 1}, {2}, {2}, ce, prec));
    return outs;
  });
}

void check_no_dropout(double dropout_p) {
  TORCH_CHECK_NOT_IMPLEMENTED(dropout_p == 0.0, "tpu's fused scaled_dot_product_attention has no dropout (the math ",
                              "backend, which scaled_dot_product_attention picks for dropout_p > 0, has)");
}

// --- the overrideable backend (what scaled_dot_product_attention calls) ---------

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor, at::Tensor, at::Tensor>
sdpa_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::optional<at::Tensor>& bias,
             double dropout_p, bool is_causal, bool /*return_debug_mask*/, std::optional<double> scale) {
  check_no_dropout(dropout_p);
  TORCH_CHECK(q.dim() == 4, "scaled_dot_product_attention on tpu: expected a 4-D query, got ", q.dim(), "-D");
  at::Tensor out = empty_matching(q, {q.size(0), q.size(1), q.size(2), v.size(-1)});
  at::Tensor lse = empty_tpu({q.size(0), q.size(1), q.size(2)}, c10::kFloat, q.device());
  attention_forward(q, k, v, bias ? &*bias : nullptr, is_causal, scale, out, lse);
  at::Tensor none, seed = empty_tpu({}, c10::kLong, q.device()), offset = empty_tpu({}, c10::kLong, q.device());
  return {out, lse, none, none, c10::SymInt(q.size(2)), c10::SymInt(k.size(2)), seed, offset, none};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> sdpa_backward(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& bias,
    std::array<bool, 4> needed, const at::Tensor& out, const at::Tensor& lse, const at::Tensor& /*cum_seq_q*/,
    const at::Tensor& /*cum_seq_k*/, c10::SymInt /*max_q*/, c10::SymInt /*max_k*/, double dropout_p, bool is_causal,
    const at::Tensor& /*philox_seed*/, const at::Tensor& /*philox_offset*/, std::optional<double> scale) {
  check_no_dropout(dropout_p);
  TORCH_CHECK(!needed[3] || !bias.defined() || bias.scalar_type() == c10::kBool,
              "tpu's fused scaled_dot_product_attention gives no gradient for attn_mask (the math backend does)");
  at::Tensor gq, gk, gv;
  if (needed[0]) gq = at::empty_like(q);
  if (needed[1]) gk = at::empty_like(k);
  if (needed[2]) gv = at::empty_like(v);
  attention_backward(grad_out, q, k, v, bias.defined() ? &bias : nullptr, out, lse, is_causal, scale, gq, gk, gv);
  return {gq, gk, gv, at::Tensor()};
}

// --- _scaled_dot_product_flash_attention_for_cpu, the same two programs ---------------

std::tuple<at::Tensor, at::Tensor> flash_for_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 double dropout_p, bool is_causal,
                                                 const std::optional<at::Tensor>& mask, std::optional<double> scale) {
  check_no_dropout(dropout_p);
  TORCH_CHECK(q.dim() == 4, "scaled_dot_product_attention on tpu: expected a 4-D query, got ", q.dim(), "-D");
  TORCH_CHECK(c10::isFloatingType(q.scalar_type()),
              "scaled_dot_product_attention: expected a floating-point query, got ", q.scalar_type());
  at::Tensor out = empty_matching(q, {q.size(0), q.size(1), q.size(2), v.size(-1)});
  at::Tensor lse = empty_tpu({q.size(0), q.size(1), q.size(2)}, opmath(q.scalar_type()), q.device());
  attention_forward(q, k, v, mask ? &*mask : nullptr, is_causal, scale, out, lse);
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_for_cpu_backward(const at::Tensor& grad_out, const at::Tensor& q,
                                                                      const at::Tensor& k, const at::Tensor& v,
                                                                      const at::Tensor& out, const at::Tensor& lse,
                                                                      double dropout_p, bool is_causal,
                                                                      const std::optional<at::Tensor>& mask,
                                                                      std::optional<double> scale) {
  check_no_dropout(dropout_p);
  at::Tensor gq = at::empty_like(q), gk = at::empty_like(k), gv = at::empty_like(v);
  attention_backward(grad_out, q, k, v, mask ? &*mask : nullptr, out, lse, is_causal, scale, gq, gk, gv);
  return {gq, gk, gv};
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_fused_sdp_choice", fused_sdp_choice);
  m.impl("_scaled_dot_product_fused_attention_overrideable", sdpa_forward);
  m.impl("_scaled_dot_product_fused_attention_overrideable_backward", sdpa_backward);
  m.impl("_scaled_dot_product_flash_attention_for_cpu", flash_for_cpu);
  m.impl("_scaled_dot_product_flash_attention_for_cpu_backward", flash_for_cpu_backward);
}

}  // namespace
}  // namespace torch_tpu::ops

// scaled_dot_product_attention asks this stub (not the op) which backend to use.
namespace at::native {
REGISTER_PRIVATEUSE1_DISPATCH(_fused_sdp_choice_stub, &torch_tpu::ops::fused_sdp_choice)
}  // namespace at::native
