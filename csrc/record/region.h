// Loop bodies and branches recorded as closed graphs: the ops a Python
// function runs on placeholder tensors become an ir::Graph whose
// parameters are those placeholders and whose outputs are the tensors it
// returns. Control-flow ops (ops/control) take such graphs as the regions
// of a stablehlo.while, so a loop is one node of its program however many
// times it runs. The recording lives in eager/ (eager/region.h).
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "ir/graph.h"

namespace torch_tpu::record {

struct RegionGraph {
  std::shared_ptr<ir::Graph> graph;  // parameters and outputs in their tensors' shapes
  int device = 0;
};

}  // namespace torch_tpu::record
