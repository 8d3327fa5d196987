#include "record/strided.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace torch_tpu::record {
namespace {

using ir::Builder;
using ir::ElemType;
using ir::Value;

// Storage and view may disagree on dtype after view(dtype); same-width
// reinterpretation is a bitcast.
Value as_elem(Builder& b, Value flat, ElemType t) {
  if (b.elem(flat) == t) return flat;
  // Byte views of a float storage (serialisation, view(dtype)) reinterpret
  // the flat buffer; XLA's pred is not a byte type, so go through u8.
  auto width_cast = [&](Value v, ElemType to) {
    if (b.elem(v) == ElemType::kPred) v = b.convert(v, ElemType::kU8);
    if (to == ElemType::kPred) return b.convert(b.bitcast_convert(v, ElemType::kU8), to);
    return b.bitcast_convert(v, to);
  };
  return width_cast(flat, t);
}

// Flat storage index of every element of the view, shaped like the view.
Value flat_indices(Builder& b, const ViewMeta& v, int64_t storage_numel) {
  ElemType it = storage_numel < (int64_t{1} << 31) ? ElemType::kS32 : ElemType::kS64;
  Value idx = b.constant(static_cast<double>(v.offset), it, v.sizes);
  for (size_t d = 0; d < v.sizes.size(); ++d) {
    if (v.sizes[d] == 1 || v.strides[d] == 0) continue;
    Value term = b.mul(b.iota(v.sizes, d, it), b.constant(static_cast<double>(v.strides[d]), it, v.sizes));
    idx = b.add(idx, term);
  }
  std::vector<int64_t> with_vec = v.sizes;
  with_vec.push_back(1);
  return b.reshape(idx, with_vec);
}

// If the non-broadcast dims of the view are a permutation of a contiguous
// block, returns that permutation (outer to inner); else empty.
bool permuted_block(const ViewMeta& v, std::vector<int64_t>& order) {
  order.clear();
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] != 1 && v.strides[d] != 0) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  int64_t expect = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    if (v.strides[*it] != expect) return false;
    expect *= v.sizes[*it];
  }
  return true;
}

}  // namespace

bool ViewMeta::is_contiguous() const {
  int64_t expect = 1;
  for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
    if (sizes[d] == 1) continue;
    if (strides[d] != expect) return false;
    expect *= sizes[d];
  }
  return true;
}

Value read_view(Builder& b, Value flat, const ViewMeta& v) {
  flat = as_elem(b, flat, v.elem);
  int64_t n = v.numel();
  int64_t storage_numel = b.dims(flat)[0];
  if (n == 0) return b.constant(0, v.elem, v.sizes);
  if (v.offset < 0 || v.offset >= storage_numel)
    throw std::invalid_argument("torch_tpu: view offset outside its storage");
  if (v.is_contiguous()) {
    if (v.offset + n > storage_numel) throw std::invalid_argument("torch_tpu: view exceeds its storage");
    return b.reshape(b.slice(flat, {v.offset}, {v.offset + n}, {1}), v.sizes);
  }
  std::vector<int64_t> order;
  if (permuted_block(v, order)) {
    int64_t block = 1;
    std::vector<int64_t> block_dims;
    for (int64_t d : order) {
      block *= v.sizes[d];
      block_dims.push_back(v.sizes[d]);
    }
    if (v.offset + block <= storage_numel) {
      Value blk = b.reshape(b.slice(flat, {v.offset}, {v.offset + block}, {1}), block_dims);
      // Transpose block dims into the view's order (restricted to `order`).
      std::vector<int64_t> kept;
      for (size_t d = 0; d < v.sizes.size(); ++d)
        if (v.sizes[d] != 1 && v.strides[d] != 0) kept.push_back(d);
      std::vector<int64_t> perm;
      for (int64_t d : kept) perm.push_back(std::find(order.begin(), order.end(), d) - order.begin());
      Value t = b.transpose(blk, perm);
      // Broadcast into the full view shape (size-1 and stride-0 dims).
      return b.broadcast_in_dim(t, v.sizes, kept);
    }
  }
  Value idx = flat_indices(b, v, storage_numel);
  return b.gather(flat, idx, {}, {0}, {0}, static_cast<int64_t>(v.sizes.size()), {1}, v.sizes);
}

Value write_view(Builder& b, Value flat, Value values, const ViewMeta& v) {
  // Work in the view's element type; reinterpret back at the end.
  ElemType storage_elem = b.elem(flat);
  Value f = as_elem(b, flat, v.elem);
  int64_t storage_numel = b.dims(f)[0];
  int64_t n = v.numel();
  if (n == 0) return flat;
  Value vals = b.convert(values, v.elem);
  Value out;
  if (v.covers(storage_numel)) {
    out = b.reshape(vals, {storage_numel});
  } else if (v.is_contiguous()) {
    if (v.offset + n > storage_numel) throw std::invalid_argument("torch_tpu: view exceeds its storage");
    Value start = b.constant(static_cast<double>(v.offset), ElemType::kS64);
    out = b.dynamic_update_slice(f, b.reshape(vals, {n}), {start});
  } else {
    Value idx = flat_indices(b, v, storage_numel);
    out = b.scatter(f, idx, vals, {}, {0}, {0}, static_cast<int64_t>(v.sizes.size()), std::nullopt);
  }
  return as_elem(b, out, storage_elem);
}

}  // namespace torch_tpu::record
