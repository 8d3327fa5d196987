// embedding_bag: _embedding_bag / _embedding_bag_forward_only (modes sum,
// mean, max; offsets incl. include_last_offset; per_sample_weights; a
// padding_idx whose entries are skipped), and the backward kernels the
// autograd formula calls (_embedding_bag_backward -> dense backward, and
// _embedding_bag_per_sample_weights_backward).
//
// Each index's bag (offset2bag) is a prefix sum of one-marks scattered at
// offsets[1:], so bags need no host sync; offsets[0] is taken to be 0 and
// offsets are not range-checked (CPU checks both on the host).
#include <ATen/ops/embedding_native.h>
#include <c10/core/GradMode.h>
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

enum Mode : int64_t { kSum = 0, kMean = 1, kMax = 2 };

void check_index_dtype(const at::Tensor& t, const char* name, int pos) {
  TORCH_CHECK(t.scalar_type() == c10::kLong || t.scalar_type() == c10::kInt, "Expected tensor for argument #", pos,
              " '", name, "' to have one of the following scalar types: Long, Int; but got ", t.toString(),
              " instead (while checking arguments for embedding_bag)");
}

// Bag of each index: marks at offsets[1:bags] summed up (s64 [n]).
Value offset2bag(Builder& b, Value offsets, int64_t n, int64_t bags) {
  Value marks = zero(b, kS64, {n});
  if (bags > 1) {
    Value off = b.slice(b.convert(offsets, kS64), {1}, {bags}, {1});
    marks = scatter_rows(b, marks, off, one(b, kS64, {bags - 1}), BinaryOp::kAdd);
  }
  return cumsum(b, marks, 0);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> embedding_bag(
    const at::Tensor& weight, const at::Tensor& indices, const at::Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const std::optional<at::Tensor>& psw_opt, bool include_last_offset,
    int64_t padding_idx) {
  at::Tensor psw = psw_opt.value_or(at::Tensor());
  check_index_dtype(indices, "indices", 2);
  check_index_dtype(offsets, "offsets", 3);
  TORCH_CHECK(indices.scalar_type() == offsets.scalar_type(),
              "Expected tensor for argument #3 'offsets' to have the "
              "same type as tensor for argument #2 'indices'; but type ",
              offsets.toString(), " does not equal ", indices.toString(),
              " (while checking arguments for embedding_bag)");
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(weight.scalar_type()), "\"embedding_bag_cpu\" not implemented for '",
                              c10::toString(weight.scalar_type()), "'");
  TORCH_CHECK(weight.dim() == 2, "weight has to be a 2D Tensor, but got Tensor of dimension ", weight.dim());
  TORCH_CHECK(indices.dim() == 1, "input has to be a 1D or 2D Tensor, but got Tensor of dimension ", indices.dim());
  TORCH_CHECK(offsets.dim() == 1, "offsets has to be a 1D Tensor, but got Tensor of dimension ", offsets.dim());
  TORCH_CHECK(mode >= kSum && mode <= kMax, "mode has to be one of sum, mean or max");
  TORCH_CHECK(!include_last_offset || offsets.size(0) >= 1,
              "include_last_offset: number of offset should be at least 1");
  if (psw.defined()) {
    TORCH_CHECK(mode == kSum, "embedding_bag: per_sample_weights only supported with mode='sum'");
    TORCH_CHECK(psw.dim() == 1 && psw.size(0) == indices.size(0), "expected per_sample_weights.numel() (", psw.numel(),
                " to be the same as indices.numel() (", indices.numel(), ")");
    TORCH_CHECK(psw.scalar_type() == weight.scalar_type(), "expected scalar type ", weight.scalar_type(), " but found ",
                psw.scalar_type());
  }
  int64_t n = indices.size(0), d = weight.size(1);
  int64_t bags = include_last_offset ? offsets.size(0) - 1 : offsets.size(0);
  at::Tensor out = empty_tpu({bags, d}, weight.scalar_type(), weight.device());
  at::Tensor o2b = empty_tpu({n}, c10::kLong, weight.device());
  at::Tensor bag_size = empty_tpu({bags}, c10::kLong, weight.device());
  at::Tensor max_idx =
      empty_tpu(mode == kMax ? c10::IntArrayRef{bags, d} : c10::IntArrayRef{bags}, c10::kLong, weight.device());
  auto ct = opmath(weight.scalar_type());
  record::OpCall call("_embedding_bag");
  call.attr(mode).attr(psw.defined()).attr(include_last_offset).attr(static_cast<int64_t>(ct));
  call.input(weight);
  call.input(indices);
  call.input(offsets);
  call.scalar(padding_idx, c10::kLong);
  if (psw.defined()) call.input(psw);
  call.output(out);
  call.output(o2b);
  call.output(bag_size);
  call.output(max_idx);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value idx = b.convert(in[1], kS64);
    Value bag = offset2bag(b, in[2], n, bags);
    Value valid = b.compare(idx, b.broadcast_to(in[3], {n}), Direction::kNe);
    if (include_last_offset) {
      // Indices past the last offset belong to no bag.
      Value last = b.reshape(b.slice(b.convert(in[2], kS64), {bags}, {bags + 1}, {1}), {});
      valid = b.and_(valid, b.compare(b.iota({n}, 0, kS64), b.broadcast_to(last, {n}), Direction::kLt));
    }
    Value rows = gather_rows(b, b.convert(in[0], e), idx);  // [n, d]
    Value valid_nd = b.broadcast_in_dim(valid, {n, d}, {0});
    Value vbag = b.select(valid, bag, b.constant(bags, kS64, {n}));  // invalid -> dropped
    Value size = scatter_rows(b, zero(b, kS64, {bags}), vbag, one(b, kS64, {n}), BinaryOp::kAdd);
    Value res, midx;
    if (mode == kMax) {
      Value m = scatter_rows(b, b.broadcast_to(lowest(b, e), {bags, d}), vbag, rows, BinaryOp::kMax);
      Value nonempty = b.broadcast_in_dim(b.compare(size, zero(b, kS64, {bags}), Direction::kGt), {bags, d}, {0});
      res = b.select(nonempty, m, zero(b, e, {bags, d}));
      // First position reaching the max, then its weight row.
      Value hit = b.and_(valid_nd, b.compare(rows, gather_rows(b, m, bag), Direction::kEq));
      Value pos = b.select(hit, b.broadcast_in_dim(b.iota({n}, 0, kS64), {n, d}, {0}), b.constant(n, kS64, {n, d}));
      Value first = scatter_rows(b, b.constant(n, kS64, {bags, d}), vbag, pos, BinaryOp::kMin);
      Value firstc = b.clamp(zero(b, kS64), first, b.constant(std::max<int64_t>(n - 1, 0), kS64));
      // idx[first[b, j]] via a flat gather.
      Value picked = b.reshape(gather_rows(b, idx, b.reshape(firstc, {bags * d})), {bags, d});
      midx = b.select(nonempty, picked, b.constant(-1, kS64, {bags, d}));
    } else {
      Value contrib = b.select(valid_nd, rows, zero(b, e, {n, d}));
      if (psw.defined()) contrib = b.mul(contrib, b.broadcast_in_dim(b.convert(in[4], e), {n, d}, {0}));
      res = scatter_rows(b, zero(b, e, {bags, d}), vbag, contrib, BinaryOp::kAdd);
      if (mode == kMean) {
        Value denom = b.convert(b.max(size, one(b, kS64, {bags})), e);
        res = b.div(res, b.broadcast_in_dim(denom, {bags, d}, {0}));
      }
      midx = zero(b, kS64, {bags});
    }
    return Values{res, bag, size, midx};
  });
  return {out, o2b, bag_size, max_idx};
}

at::Tensor dense_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& o2b,
                          const at::Tensor& bag_size, const at::Tensor& max_idx, c10::SymInt num_weights_s,
                          bool scale_grad_by_freq, int64_t mode, const std::optional<at::Tensor>& psw_opt,
                          int64_t padding_idx) {
  at::Tensor psw = psw_opt.value_or(at::Tensor());
  int64_t nw = num_weights_s.expect_int();
  int64_t n = indices.numel(), d = grad.size(1), bags = grad.size(0);
  at::Tensor gw = empty_tpu({nw, d}, grad.scalar_type(), grad.device());
  auto ct = opmath(grad.scalar_type());
  record::OpCall call("_embedding_bag_dense_backward");
  call.attr(mode).attr(psw.defined()).attr(scale_grad_by_freq).attr(nw).attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(indices);
  call.input(o2b);
  call.input(bag_size);
  call.input(max_idx);
  call.scalar(padding_idx, c10::kLong);
  if (psw.defined()) call.input(psw);
  call.output(gw);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value g = b.convert(in[0], e);
    Value acc = zero(b, e, {nw, d});
    if (mode == kMax) {
      // grad[b, j] goes to row max_idx[b, j] (-1 for empty bags: dropped).
      Value mi = b.reshape(b.convert(in[4], kS64), {bags, d, 1});
      Value col = b.reshape(b.iota({bags, d}, 1, kS64), {bags, d, 1});
      Value coords = b.concatenate({mi, col}, 2);
      return Values{b.scatter(acc, coords, g, {}, {0, 1}, {0, 1}, 2, BinaryOp::kAdd)};
    }
    if (n == 0) return Values{acc};
    Value idx = b.convert(b.reshape(in[1], {n}), kS64);
    Value bag = b.convert(in[2], kS64);
    Value valid = b.compare(idx, b.broadcast_to(in[5], {n}), Direction::kNe);
    Value gr = gather_rows(b, g, bag);  // [n, d]
    Value scale = b.select(valid, one(b, e, {n}), zero(b, e, {n}));
    if (psw.defined()) scale = b.mul(scale, b.convert(in[6], e));
    if (mode == kMean) {
      Value sz = b.convert(b.max(gather_rows(b, b.convert(in[3], kS64), bag), one(b, kS64, {n})), e);
      scale = b.div(scale, sz);
    }
    if (scale_grad_by_freq) {
      Value cnt = scatter_rows(b, zero(b, kS64, {nw}), idx, one(b, kS64, {n}), BinaryOp::kAdd);
      scale = b.div(scale, b.convert(gather_rows(b, cnt, idx), e));
    }
    Value upd = b.mul(gr, b.broadcast_in_dim(scale, {n, d}, {0}));
    return Values{scatter_rows(b, acc, idx, upd, BinaryOp::kAdd)};
  });
  return gw;
}

at::Tensor embedding_bag_backward(const at::Tensor& grad, const at::Tensor& indices, const at::Tensor& offsets,
                                  const at::Tensor& o2b, const at::Tensor& bag_size, const at::Tensor& max_idx,
                                  c10::SymInt num_weights, bool scale_grad_by_freq, int64_t mode, bool sparse,
                                  const std::optional<at::Tensor>& psw, int64_t padding_idx) {
  TORCH_CHECK_NOT_IMPLEMENTED(!sparse, "embedding_bag: sparse gradients are not supported on tpu");
  return dense_backward(grad, indices, o2b, bag_size, max_idx, std::move(num_weights), scale_grad_by_freq, mode, psw,
                        padding_idx);
}

// d/d psw[i] = <grad[bag(i)], weight[idx(i)]>, 0 for padding entries.
at::Tensor psw_backward(const at::Tensor& grad, const at::Tensor& weight, const at::Tensor& indices,
                        const at::Tensor& offsets, const at::Tensor& o2b, int64_t mode, int64_t padding_idx) {
  TORCH_CHECK(mode == kSum, "embedding_bag_backward: per_sample_weights only supported for mode='sum'");
  int64_t n = indices.numel(), d = weight.size(1);
  at::Tensor out = empty_tpu({n}, grad.scalar_type(), grad.device());
  if (n == 0) return out;
  auto ct = opmath(grad.scalar_type());
  record::OpCall call("_embedding_bag_per_sample_weights_backward");
  call.attr(static_cast<int64_t>(ct));
  call.input(grad);
  call.input(weight);
  call.input(indices);
  call.input(o2b);
  call.scalar(padding_idx, c10::kLong);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = to_elem(ct);
    Value idx = b.convert(b.reshape(in[2], {n}), kS64);
    Value gr = gather_rows(b, b.convert(in[0], e), b.convert(in[3], kS64));
    Value wr = gather_rows(b, b.convert(in[1], e), idx);
    Value dot = b.reduce(b.mul(gr, wr), zero(b, e), {1}, BinaryOp::kAdd);
    Value valid = b.compare(idx, b.broadcast_to(in[4], {n}), Direction::kNe);
    return Values{b.select(valid, dot, zero(b, e, {n}))};
  });
  (void)d;
  return out;
}

// tpu gradients are dense. A sparse embedding gradient would need sparse
// tensors on the device, so say so at the forward, not deep in backward.
at::Tensor embedding(const at::Tensor& weight, const at::Tensor& indices, c10::SymInt padding_idx,
                     bool scale_grad_by_freq, bool sparse) {
  TORCH_CHECK_NOT_IMPLEMENTED(!(sparse && weight.requires_grad() && c10::GradMode::is_enabled()),
                              "tpu has dense gradients only: nn.Embedding(sparse=True) (or F.embedding with "
                              "sparse=True) cannot produce a sparse gradient on tpu. Use sparse=False; the "
                              "optimizer then updates the rows from a dense gradient.");
  return at::native::embedding_symint(weight, indices, std::move(padding_idx), scale_grad_by_freq, sparse);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("embedding", embedding);
  m.impl("_embedding_bag", embedding_bag);
  m.impl("_embedding_bag_forward_only", embedding_bag);
  m.impl("_embedding_bag_backward", embedding_bag_backward);
  m.impl("_embedding_bag_dense_backward", dense_backward);
  m.impl("_embedding_bag_per_sample_weights_backward", psw_backward);
}

}  // namespace
}  // namespace torch_tpu::ops
