// Loops whose body is a region (record/region.h): one stablehlo.while in
// the program, run on the device for as many iterations as its condition
// says, and compiled once whatever the trip count. torch_tpu/_control_flow.py
// builds torch.ops.higher_order.while_loop, scan and cond on it.
#pragma once
#include <ATen/core/Tensor.h>

#include <vector>

#include "record/region.h"

namespace torch_tpu::ops {

// Carries `inputs` through `body` while `cond` (a region returning one bool)
// holds, and returns the final values as new contiguous tensors. Both
// regions take one parameter per input, of its dtype and element count;
// `body` returns one value per input, of the same type.
std::vector<at::Tensor> while_loop(const record::RegionGraph& cond, const record::RegionGraph& body,
                                   const std::vector<at::Tensor>& inputs);

// x[i] for a 0-d integer tensor i (one stablehlo.dynamic_slice): a scan's
// step reads its slice of xs this way inside the loop.
at::Tensor dynamic_index(const at::Tensor& x, const at::Tensor& i);
// y with y[i] replaced by v (one stablehlo.dynamic_update_slice): a scan's
// step writes its output into the stacked outputs this way.
at::Tensor dynamic_update_index(const at::Tensor& y, const at::Tensor& v, const at::Tensor& i);

}  // namespace torch_tpu::ops
