// Loop bodies and branches recorded as closed graphs: the ops a Python
// function runs on placeholder tensors become an ir::Graph whose
// parameters are those placeholders and whose outputs are the tensors it
// returns. Control-flow ops (ops/control) take such graphs as the regions
// of a stablehlo.while, so a loop is one node of its program however many
// times it runs. The recording lives in eager/region_driver.cc.
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

// Starts recording on this thread: until end_region, every op call becomes
// a node of the region's graph instead of running, and the i-th parameter
// of the graph stands for `params[i]` (contiguous tpu tensors made for the
// purpose). A call that reads another tensor's value, draws random
// numbers or needs a value on the host raises. Regions nest.
void begin_region(const std::vector<at::Tensor>& params);
// The graph, whose outputs are the values of `results` (each a tensor
// written in the region, or a parameter).
std::shared_ptr<RegionGraph> end_region(const std::vector<at::Tensor>& results);
// Drops the region being recorded (after an exception in the function).
void abort_region();
bool recording_region();

}  // namespace torch_tpu::record
