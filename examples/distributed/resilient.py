"""Training that survives restarts and preemption, on the "tpu" backend.

    torchrun --nproc-per-node=2 --max-restarts=3 examples/distributed/resilient.py \
        [--ckpt-dir /tmp/sorter_ckpt] [--ckpt-every 25] [--steps 300]

DDP training of the sorting transformer that:
- saves model and optimizer state with torch.distributed.checkpoint every
  --ckpt-every steps, each into a directory of its own that is marked
  complete after every rank has saved (torch_tpu.checkpoint), so a
  checkpoint cut short by a crash is never loaded;
- at start-up resumes from the last complete checkpoint, so a rank that
  crashes (torchrun --max-restarts restarts every rank) costs at most the
  steps since that checkpoint;
- on SIGTERM (a scheduler's preemption) saves a last checkpoint at the next
  step boundary, on every rank at the same step, and exits.
Each step's batch depends only on the step and the rank, so a resumed run
trains on exactly the batches an uninterrupted one would.
"""
import os
import signal

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from _common import Sorter, args, finish, loss_fn, make_batch, setup
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.nn.parallel import DistributedDataParallel as DDP
from tqdm import tqdm

import torch_tpu.checkpoint


def save(ddp, opt, step, ckpt_dir):
    """A checkpoint of its own under ckpt_dir, marked complete once every
    rank has written (torch_tpu.checkpoint)."""
    msd, osd = get_state_dict(ddp, opt)
    torch_tpu.checkpoint.save({"model": msd, "optim": osd, "step": torch.tensor(step)}, ckpt_dir, step)


def load(ddp, opt, ckpt_dir) -> int:
    """The step to resume at: the last complete checkpoint's, else 0."""
    found = torch_tpu.checkpoint.latest(ckpt_dir)
    if found is None:
        return 0
    msd, osd = get_state_dict(ddp, opt)
    state = {"model": msd, "optim": osd, "step": torch.tensor(0)}
    dcp.load(state, checkpoint_id=found[0])
    set_state_dict(ddp, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    return int(state["step"])


def main():
    import argparse
    import sys

    extra = argparse.ArgumentParser(add_help=False)
    extra.add_argument("--ckpt-dir", default="/tmp/sorter_ckpt")
    extra.add_argument("--ckpt-every", type=int, default=25)
    e, rest = extra.parse_known_args()
    sys.argv = [sys.argv[0], *rest]
    a = args(__doc__)
    device = setup(a.device)
    rank, world = dist.get_rank(), dist.get_world_size()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))

    torch.manual_seed(0)
    model = Sorter().to(device)
    ddp = DDP(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=a.lr)
    os.makedirs(e.ckpt_dir, exist_ok=True)
    start = load(ddp, opt, e.ckpt_dir)
    if start >= a.steps:
        if rank == 0:
            print(f"{e.ckpt_dir} already holds step {start} of {a.steps}: nothing to train")
        dist.destroy_process_group()
        return
    if rank == 0 and start:
        print(f"resumed at step {start} from {e.ckpt_dir}")
    first = last = None
    bar = tqdm(range(start, a.steps), disable=rank != 0, desc="train", initial=start, total=a.steps)
    for step in bar:
        x, y = make_batch(a.batch_size // world, torch.Generator().manual_seed(100_000 * step + rank))
        opt.zero_grad()
        loss = loss_fn(ddp(x.to(device)), y.to(device))
        loss.backward()
        opt.step()
        # One decision for every rank: a SIGTERM seen by any rank stops all.
        flags = torch.tensor([loss.item(), float(bool(stop))], device=device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        last = flags[0].item()
        first = last if first is None else first
        bar.set_postfix(loss=f"{last:.3f}")
        if flags[1].item() or (step + 1) % e.ckpt_every == 0 or step + 1 == a.steps:
            save(ddp, opt, step + 1, e.ckpt_dir)
        if flags[1].item():
            if rank == 0:
                print(f"preempted: saved step {step + 1} to {e.ckpt_dir}")
            dist.destroy_process_group()
            return
    finish("resilient DDP", model, device, first, last, a.smoke or start > 0)


if __name__ == "__main__":
    main()
