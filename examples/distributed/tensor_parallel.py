"""Tensor parallel training with DeviceMesh + parallelize_module on the
"tpu" backend.

    torchrun --nproc-per-node=2 examples/distributed/tensor_parallel.py [--steps 300]

Attention is split by heads (q, k, v column-wise, the output projection
row-wise) and the MLP by its hidden units (up column-wise, down row-wise), so
each block needs one all-reduce forward and one backward. Every rank sees
the same batch.
"""
import torch
import torch.distributed as dist
from _common import Sorter, args, finish, setup, train
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

a = args(__doc__)
device = setup(a.device)
mesh = init_device_mesh(device.type, (dist.get_world_size(),))
torch.manual_seed(0)
model = Sorter().to(device)
plan = {}
for i in range(len(model.blocks)):
    for name in ("q", "k", "v"):
        plan[f"blocks.{i}.attn.{name}"] = ColwiseParallel()
    plan[f"blocks.{i}.attn.proj"] = RowwiseParallel()
    plan[f"blocks.{i}.up"] = ColwiseParallel()
    plan[f"blocks.{i}.down"] = RowwiseParallel()
parallelize_module(model, mesh, plan)
# foreach=False: PyTorch's foreach kernels refuse a mix of DTensor (sharded)
# and plain (replicated) parameters, on any device.
opt = torch.optim.AdamW(model.parameters(), lr=a.lr, foreach=False)
# The same data on every rank: tensor parallelism splits the model, not the batch.
first, last = train(model, opt, device, a.steps, a.batch_size, seed_per_rank=False)
finish("Tensor parallel", model, device, first, last, a.smoke)
