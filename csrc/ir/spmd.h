// An SPMD entry point around a graph: the module XLA's partitioner splits
// over a mesh. The graph keeps its own signature (flat storages, scalars);
// the new @main takes and returns each value in the shape its sharding
// applies to, annotated with `mhlo.sharding`, and reshapes to and from the
// graph's types around a call XLA inlines.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::ir {

struct SpmdValue {
  std::vector<int64_t> dims;  // same element count as the graph's type
  std::string sharding;       // its sharding's text; "" leaves it to XLA (results only)
};

// `g` must have its outputs set. One SpmdValue per parameter and per output.
// A parameter the graph aliases to an output (Graph::alias) is donated by the
// entry point (`tf.aliasing_output`); the two must have the same dims and
// sharding, so that each partition's block can be reused in place.
// With `mesh` (ir/shardy.h's `sdy.mesh` line) the shardings are Shardy's
// (`#sdy.sharding<@mesh, ...>`), else GSPMD's HLO sharding text.
std::string spmd_module(const Graph& g, const std::vector<SpmdValue>& params, const std::vector<SpmdValue>& results,
                        int64_t num_partitions, const std::string& mesh = "");

}  // namespace torch_tpu::ir
