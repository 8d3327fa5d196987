"""Data parallel training with DistributedDataParallel on the "tpu" backend.

    torchrun --nproc-per-node=2 examples/distributed/ddp.py [--steps 300]

Every rank holds the whole model and trains on its own part of the global
batch; DDP all-reduces the gradients (in buckets, overlapping backward).
"""
import torch
import torch.distributed as dist
from _common import Sorter, args, finish, setup, train
from torch.nn.parallel import DistributedDataParallel as DDP

a = args(__doc__)
device = setup(a.device)
torch.manual_seed(0)  # the same initial weights on every rank
model = Sorter().to(device)
ddp = DDP(model)
opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr)
first, last = train(ddp, opt, device, a.steps, a.batch_size // dist.get_world_size())
finish("DDP", model, device, first, last, a.smoke)
