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

// If the view's dims, outer to inner by stride, nest without overlap (each
// stride a multiple of the next and at least the next dim's extent), returns
// them in that order. Such a view (a head split out of a fused qkv buffer,
// a column block of a matrix) is a slice of the buffer reshaped and cut down
// per dimension, which XLA compiles and runs far better than a gather.
bool nested_strides(const ViewMeta& v, std::vector<int64_t>& order) {
  order.clear();
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] != 1 && v.strides[d] != 0) order.push_back(d);
  if (order.empty()) return false;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t c) { return v.strides[a] > v.strides[c]; });
  for (size_t j = 0; j + 1 < order.size(); ++j) {
    int64_t outer = v.strides[order[j]], inner = v.strides[order[j + 1]];
    if (inner <= 0 || outer % inner != 0 || outer / inner < v.sizes[order[j + 1]]) return false;
  }
  return v.strides[order.back()] >= 1;
}

// The kept dims (`order`, outer to inner) transposed into the view's order
// and broadcast over its size-1 and stride-0 dims.
Value into_view_order(Builder& b, Value blk, const ViewMeta& v, const std::vector<int64_t>& order) {
  std::vector<int64_t> kept;
  for (size_t d = 0; d < v.sizes.size(); ++d)
    if (v.sizes[d] != 1 && v.strides[d] != 0) kept.push_back(d);
  std::vector<int64_t> perm;
  for (int64_t d : kept) perm.push_back(std::find(order.begin(), order.end(), d) - order.begin());
  return b.broadcast_in_dim(b.transpose(blk, perm), v.sizes, kept);
}

// A nested view whose box, laid from the storage's start, holds the whole
// storage: the box is the storage reshaped (no pad, no flat offset slice)
// and the view is a slice of it at the offset's coordinates. XLA sees the
// shape the storage's value was computed in (the reshape folds into its
// producer), so a split of a sharded dimension (q, k, v out of a fused,
// column-sharded projection) stays a slice the partitioner can place.
// Invalid when the offset does not fall inside such a box.
Value box_from_start(Builder& b, Value flat, const ViewMeta& v, const std::vector<int64_t>& shape,
                     const std::vector<int64_t>& limit, int64_t span, const std::vector<int64_t>& cut_dims) {
  if (span != b.dims(flat)[0]) return Value{};
  std::vector<int64_t> start(shape.size()), stop(shape.size());
  int64_t rem = v.offset, stride = span;
  for (size_t j = 0; j < shape.size(); ++j) {
    stride /= shape[j];
    start[j] = rem / stride;
    rem %= stride;
  }
  for (size_t j = 0; j < shape.size(); ++j) {
    stop[j] = start[j] + limit[j];
    if (stop[j] > shape[j]) return Value{};
  }
  std::vector<int64_t> ones(shape.size(), 1);
  return b.reshape(b.slice(b.reshape(flat, shape), start, stop, ones), cut_dims);
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
      return into_view_order(b, blk, v, order);
    }
  }
  if (nested_strides(v, order)) {
    // [n0, s0/s1, ..., s(k-1)/sk, sk] from offset, then each inner dim cut
    // to its size (the last to its first element).
    const int64_t k = static_cast<int64_t>(order.size());
    std::vector<int64_t> shape = {v.sizes[order[0]]}, limit = {v.sizes[order[0]]}, cut_dims = {v.sizes[order[0]]};
    for (int64_t j = 1; j < k; ++j) {
      shape.push_back(v.strides[order[j - 1]] / v.strides[order[j]]);
      limit.push_back(v.sizes[order[j]]);
      cut_dims.push_back(v.sizes[order[j]]);
    }
    shape.push_back(v.strides[order[k - 1]]);
    limit.push_back(1);
    const int64_t span = v.sizes[order[0]] * v.strides[order[0]];
    if (Value blk = box_from_start(b, flat, v, shape, limit, span, cut_dims); blk.valid())
      return into_view_order(b, blk, v, order);
    Value f = flat;
    // The last row's trailing gap may run past the buffer's end; it is never read.
    if (v.offset + span > storage_numel)
      f = b.pad(flat, b.constant(0, v.elem), {0}, {v.offset + span - storage_numel}, {0});
    Value box = b.reshape(b.slice(f, {v.offset}, {v.offset + span}, {1}), shape);
    std::vector<int64_t> zeros(shape.size(), 0), ones(shape.size(), 1);
    Value blk = b.reshape(b.slice(box, zeros, limit, ones), cut_dims);
    return into_view_order(b, blk, v, order);
  }
  Value idx = flat_indices(b, v, storage_numel);
  return b.gather(flat, idx, {}, {0}, {0}, static_cast<int64_t>(v.sizes.size()), {1}, v.sizes);
}

Value read_view_at(Builder& b, Value flat, ElemType elem, const std::vector<int64_t>& sizes, Value offset,
                   const std::vector<Value>& strides) {
  flat = as_elem(b, flat, elem);
  const int64_t storage_numel = b.dims(flat)[0];
  int64_t n = 1;
  for (int64_t s : sizes) n *= s;
  if (n == 0) return b.constant(0, elem, sizes);
  const ElemType it = ElemType::kS64;
  Value idx = b.broadcast_to(b.convert(offset, it), sizes);
  for (size_t d = 0; d < sizes.size(); ++d) {
    if (sizes[d] == 1) continue;
    idx = b.add(idx, b.mul(b.iota(sizes, d, it), b.broadcast_to(b.convert(strides[d], it), sizes)));
  }
  idx = b.clamp(b.constant(0, it, sizes), idx, b.constant(static_cast<double>(storage_numel - 1), it, sizes));
  std::vector<int64_t> with_vec = sizes;
  with_vec.push_back(1);
  return b.gather(flat, b.reshape(idx, with_vec), {}, {0}, {0}, static_cast<int64_t>(sizes.size()), {1}, sizes);
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
  } else if (std::vector<int64_t> order;
             permuted_block(v, order) && v.offset + n <= storage_numel &&
             std::none_of(v.strides.begin(), v.strides.end(), [](int64_t s) { return s == 0; })) {
    // A permutation of a contiguous block (an output laid out like a
    // transposed input): transpose into storage order, no scatter.
    std::vector<int64_t> kept, kept_sizes;
    for (size_t d = 0; d < v.sizes.size(); ++d)
      if (v.sizes[d] != 1) {
        kept.push_back(d);
        kept_sizes.push_back(v.sizes[d]);
      }
    std::vector<int64_t> perm;
    for (int64_t d : order) perm.push_back(std::find(kept.begin(), kept.end(), d) - kept.begin());
    Value blk = b.reshape(b.transpose(b.reshape(vals, kept_sizes), perm), {n});
    if (v.offset == 0 && n == storage_numel) {
      out = blk;
    } else {
      out = b.dynamic_update_slice(f, blk, {b.constant(static_cast<double>(v.offset), ElemType::kS64)});
    }
  } else {
    Value idx = flat_indices(b, v, storage_numel);
    out = b.scatter(f, idx, vals, {}, {0}, {0}, static_cast<int64_t>(v.sizes.size()), std::nullopt);
  }
  return as_elem(b, out, storage_elem);
}

}  // namespace torch_tpu::record
