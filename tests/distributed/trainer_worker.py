"""Rank program for the Trainer test: ``trainer_worker.py DEVICE OUT_DIR``
under torchrun. Each rank runs tests/test_hf_trainer.py's fine-tune with
accelerate choosing everything (no ddp_backend given) and writes what it saw
to OUT_DIR/trainer_<device>_rank<r>.pt."""
import os
import sys

import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401 - registers the tpu device (accelerate's patch included)
from tests.test_hf_trainer import _train


def main():
    device, out = sys.argv[1], sys.argv[2]
    from pathlib import Path

    model, loss, logs, trainer = _train(Path(out), use_cpu=device == "cpu", with_trainer=True)
    payload = {
        "parallel_mode": str(trainer.args.parallel_mode),
        "world_size": trainer.args.world_size,
        "wrapped": type(trainer.model_wrapped).__name__,
        "device": str(trainer.args.device),
        "loss": loss,
        "logs": logs,
        "weights": {k: v.detach().cpu() for k, v in model.state_dict().items()},
    }
    torch.save(payload, os.path.join(out, f"trainer_{device}_rank{dist.get_rank()}.pt"))


if __name__ == "__main__":
    main()
