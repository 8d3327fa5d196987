// Collectives across the tpu devices of one process, as single StableHLO
// programs (ir/lib/collectives.h) compiled with one replica per device and
// cached like any other program. torch.tpu.comm is the Python face. This is
// the device path that libtpu and the CUDA plugin run natively; on XLA:CPU
// it runs across the logical devices of one client (TORCH_TPU_NUM_CPU_DEVICES).
#pragma once
#include <ATen/core/Tensor.h>

#include <string>
#include <vector>

namespace torch_tpu::ops {

enum class Collective { kAllReduce, kBroadcast, kAllGather, kReduceScatter, kAllToAll };
// "all_reduce", "broadcast", "all_gather", "reduce_scatter" or "all_to_all"
// (ValueError otherwise).
Collective parse_collective(const std::string& name);

// `inputs`: one tensor per device (distinct tpu devices), in group order,
// all of one dtype and shape. `reduce` is "sum", "avg", "min", "max" or
// "product" (all_reduce, reduce_scatter); `root` a position in `inputs`
// (broadcast). Returns one result per input, on its device:
//   all_reduce, broadcast: the input's shape (the caller copies it back for in-place use);
//   all_gather: the inputs concatenated along dim 0, in group order;
//   reduce_scatter: piece k (along dim 0) of the reduction, for input k;
//   all_to_all: piece k of every input, concatenated along dim 0, for input k.
// Bad arguments raise the errors PyTorch's collectives raise, before any
// program is built.
// `in_place` (all_reduce, broadcast): the results are written into the
// inputs, which are returned; an input that is a whole storage takes the
// result's buffer, with no copy.
std::vector<at::Tensor> device_collective(Collective kind, const std::vector<at::Tensor>& inputs,
                                          const std::string& reduce = "sum", int64_t root = 0, bool in_place = false);

}  // namespace torch_tpu::ops
