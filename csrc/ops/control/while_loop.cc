#include "ops/control/while_loop.h"

#include "ops/common.h"

namespace torch_tpu::ops {

std::vector<at::Tensor> while_loop(const record::RegionGraph& cond, const record::RegionGraph& body,
                                   const std::vector<at::Tensor>& inputs) {
  TORCH_CHECK(!inputs.empty(), "while_loop: at least one carried value is required");
  c10::Device dev = inputs[0].device();
  std::vector<at::Tensor> outs;
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.device() == dev, "while_loop: expected every carried value on ", dev, ", got one on ", t.device());
    outs.push_back(empty_tpu(t.sizes(), t.scalar_type(), dev));
  }
  record::OpCall call("while_loop");
  // The regions' structure, constants included, keys the program.
  call.attr(static_cast<int64_t>(cond.graph->fingerprint())).attr(static_cast<int64_t>(body.graph->fingerprint()));
  for (const at::Tensor& t : inputs) call.input(t);
  for (const at::Tensor& o : outs) call.output(o);
  // The regions take and return the values in their tensors' shapes, as
  // the call reads them.
  call.run([cg = cond.graph, bg = body.graph](Builder& b, const Values& in) { return b.while_loop(in, cg, bg); });
  return outs;
}

}  // namespace torch_tpu::ops
