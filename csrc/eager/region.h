// Recording a region (record/region.h) on this thread: the region driver
// (eager/region_driver.cc) takes the thread's op calls while it records.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <vector>

#include "record/region.h"

namespace torch_tpu::record {}  // namespace torch_tpu::record

namespace torch_tpu::eager {

// The recorder's names (OpCall, Driver, StorageSlot, ...) as eager's own.
using namespace torch_tpu::record;

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

}  // namespace torch_tpu::eager
