// Reading and writing a strided view of a flat 1-D storage buffer, in IR.
// This is where the "storage is a flat buffer" assumption lives; nothing
// else in the code base depends on it (see docs/architecture.md).
#pragma once
#include <cstdint>
#include <vector>

#include "ir/builder.h"

namespace torch_tpu::record {

struct ViewMeta {
  ir::ElemType elem;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
  int64_t offset = 0;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t s : sizes) n *= s;
    return n;
  }
  bool is_contiguous() const;
  // Covers all of a storage of `storage_numel` elements, in order.
  bool covers(int64_t storage_numel) const { return offset == 0 && numel() == storage_numel && is_contiguous(); }
};

// The view's values, shaped `v.sizes`, from `flat` (rank-1 storage buffer).
ir::Value read_view(ir::Builder& b, ir::Value flat, const ViewMeta& v);
// The same for a view whose offset and strides are runtime values (0-d
// integers): a gather, so one program serves every position of the shape.
// Positions outside the storage are clamped into it.
ir::Value read_view_at(ir::Builder& b, ir::Value flat, ir::ElemType elem, const std::vector<int64_t>& sizes,
                       ir::Value offset, const std::vector<ir::Value>& strides);
// `flat` with the view's elements replaced by `values` (shaped `v.sizes`).
ir::Value write_view(ir::Builder& b, ir::Value flat, ir::Value values, const ViewMeta& v);

}  // namespace torch_tpu::record
