"""Fully sharded data parallel training with FSDP2 (fully_shard) on the
"tpu" backend.

    torchrun --nproc-per-node=2 examples/distributed/fsdp.py [--steps 300]

Each rank stores a 1/world-size shard of every parameter, gradient and
optimizer state (as DTensors); a block's full weights are all-gathered just
before it runs and its gradients reduce-scattered after its backward.
"""
import torch
import torch.distributed as dist
from _common import Sorter, args, finish, setup, train
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.tensor import DTensor

a = args(__doc__)
device = setup(a.device)
mesh = init_device_mesh(device.type, (dist.get_world_size(),))
torch.manual_seed(0)
model = Sorter().to(device)
for block in model.blocks:
    fully_shard(block, mesh=mesh)
fully_shard(model, mesh=mesh)
w = model.blocks[0].up.weight
assert isinstance(w, DTensor)
if dist.get_rank() == 0:
    print(f"up.weight: global {tuple(w.shape)}, this rank holds {tuple(w.to_local().shape)} ({w.placements[0]})")
opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
first, last = train(model, opt, device, a.steps, a.batch_size // dist.get_world_size())
# Sampling needs the full weights on rank 0: gather them into a plain copy.
full = Sorter().to(device)
full.load_state_dict({k: v.full_tensor() for k, v in model.state_dict().items()})
finish("FSDP2", full, device, first, last, a.smoke)
