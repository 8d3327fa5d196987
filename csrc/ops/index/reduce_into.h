// The reduction index_reduce and scatter_reduce share: updates combined into
// `self` at indexed places with sum, prod, amax, amin or mean, optionally
// leaving self's own values out. The two ops differ only in how one scatter
// places its updates (whole slices at 1-d indices, or element-wise along a
// dimension), which the caller passes in.
#pragma once
#include <functional>
#include <optional>
#include <string_view>

#include "ir/builder.h"

namespace at {
class Tensor;
}

namespace torch_tpu::ops {

// scatter(base, updates, combiner): base with `updates` placed at the op's
// indices, combined with what is there (nullopt: replaced).
using ScatterAt = std::function<ir::Value(ir::Value base, ir::Value updates, std::optional<ir::BinaryOp> comb)>;

// `red` is one of "sum", "prod", "amax", "amin", "mean"; `comb` the
// combiner for it. An integer mean rounds toward -inf, as CPU's.
ir::Value reduce_into(ir::Builder& b, ir::Value self, ir::Value src, std::string_view red, bool include_self,
                      ir::BinaryOp comb, ir::BinaryOp count_comb, const ScatterAt& scatter);

// One scatter of `updates` into `self` at `index` along `dim`, combined
// with `comb` (nullopt: replaced): index_reduce's slices or scatter_reduce's
// elements.
using PlaceAlong = ir::Value (*)(ir::Builder& b, ir::Value self, ir::Value index, ir::Value updates, int64_t dim,
                                 std::optional<ir::BinaryOp> comb);

// Records op `name` (index_reduce or scatter_reduce): `out` is `self` with
// `src` reduced into it at `index` along the wrapped dim `d` (out= already
// prepared, indices already checked).
void record_reduce_into(const char* name, const at::Tensor& self, int64_t d, const at::Tensor& index,
                        const at::Tensor& src, std::string_view red, bool include_self, ir::BinaryOp comb,
                        ir::BinaryOp count_comb, PlaceAlong place, const at::Tensor& out);

}  // namespace torch_tpu::ops
