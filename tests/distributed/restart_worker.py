"""A data-parallel job on the "tpu" backend (DDP, or FSDP2 with WRAP=fsdp)
that checkpoints with DCP every 4 steps (torch_tpu.checkpoint) and resumes
from its last complete checkpoint. Faults in the first attempt
(tests/distributed/test_restart.py runs it under torchrun --max-restarts=1):
FAULT=1, rank 1 dies at step 10; FAULT=save, rank 0 dies in the middle of
writing the checkpoint of step 12, leaving its file cut short. Rank 0 saves
the final weights to OUT."""
import os
import sys

import torch
import torch.distributed as dist
import torch.distributed.checkpoint as dcp
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

import torch_tpu.checkpoint

STEPS, EVERY = 16, 4


def _die_writing(rank: int) -> None:
    """Rank 0 is killed while it writes its checkpoint file: the file is cut
    to half its length and the process exits before the save finishes."""
    write = dcp.FileSystemWriter.write_data

    def write_data(self, plan, planner):
        fut = write(self, plan, planner)
        fut.wait()
        if rank == 0:
            for name in os.listdir(self.path):
                if name.endswith(".distcp"):
                    f = os.path.join(self.path, name)
                    os.truncate(f, os.path.getsize(f) // 2)
            os._exit(1)
        return fut

    dcp.FileSystemWriter.write_data = write_data


def main(ckpt: str, out: str) -> None:
    dist.init_process_group("tpu")
    rank, attempt = dist.get_rank(), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("tpu")
    if os.environ.get("WRAP") == "fsdp":
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.fsdp import fully_shard

        ddp = fully_shard(model, mesh=init_device_mesh("tpu", (dist.get_world_size(),)))
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-2)
    start = 0
    found = torch_tpu.checkpoint.latest(ckpt)  # the newest checkpoint marked complete
    if found is not None:
        msd, osd = get_state_dict(ddp, opt)
        state = {"model": msd, "optim": osd, "step": torch.tensor(0)}
        dcp.load(state, checkpoint_id=found[0])
        set_state_dict(ddp, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
        start = int(state["step"])
    g = torch.Generator().manual_seed(1)
    data = [(torch.randn(4, 8, generator=g), torch.randn(4, 4, generator=g)) for _ in range(STEPS)]
    for step in range(start, STEPS):
        x, y = (t[rank * 2:(rank + 1) * 2].to("tpu") for t in data[step])
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % EVERY == EVERY - 1:
            msd, osd = get_state_dict(ddp, opt)
            if os.environ.get("FAULT") == "save" and attempt == 0 and step + 1 == 12:
                _die_writing(rank)
            torch_tpu.checkpoint.save({"model": msd, "optim": osd, "step": torch.tensor(step + 1)}, ckpt, step + 1)
        if os.environ.get("FAULT") == "1" and attempt == 0 and rank == 1 and step == 9:
            os._exit(1)
    # Full weights (FSDP2's are sharded DTensors), gathered on every rank.
    weights = {k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().cpu()
               for k, v in model.state_dict().items()}
    if rank == 0:
        torch.save({"weights": weights, "attempt": attempt, "resumed_at": start}, out)
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
