"""A long DDP run on the "tpu" process group, watching for leaks.

    python bench/soak.py [--nproc 2] [--steps 20000] [--every 500] [--out bench/results]

It re-launches itself under torchrun. Each rank trains a small MLP
(256-512-512-10, batch 32 per rank, AdamW, a cosine schedule stepped every
step, gradient clipping, `loss.item()` logged every --every steps, as a
script does) and, every --every steps, records:

- host memory: the process's resident set (VmRSS) in MiB;
- device memory: `torch.tpu.memory_allocated()` in MiB;
- open file descriptors (/proc/self/fd);
- shared-memory segments in /dev/shm, and the process's threads.

Writes soak.json to --out: every sample of every rank, and per rank the
first sample after warm-up (the first 10% of steps), the last one, and the
growth between them per 1,000 steps. A leak shows as growth that does not
stay near zero as --steps grows.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _sample(step, loss, t0, dev):
    import torch

    with open("/proc/self/status") as f:
        status = dict(line.split(":", 1) for line in f if ":" in line)
    return {
        "step": step,
        "s": round(time.perf_counter() - t0, 2),
        "loss": loss,
        "rss_mib": round(int(status["VmRSS"].split()[0]) / 1024, 1),
        "device_mib": round(torch.tpu.memory_allocated(dev) / 2**20, 2),
        "fds": len(os.listdir("/proc/self/fd")),
        "shm": len(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else 0,
        "threads": int(status["Threads"]),
    }


def rank_main(args):
    import torch
    import torch.distributed as dist
    from torch import nn

    import torch_tpu  # noqa: F401

    dist.init_process_group("tpu")
    rank, world = dist.get_rank(), dist.get_world_size()
    dev = torch.device("tpu", int(os.environ["LOCAL_RANK"]) % torch.tpu.device_count())
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.GELU(), nn.Linear(512, 512), nn.GELU(), nn.Linear(512, 10)).to(dev)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=args.steps)
    g = torch.Generator().manual_seed(1 + rank)
    # A fixed pool of host batches, cycled: the data itself must not grow.
    pool = [(torch.randn(32, 256, generator=g), torch.randint(0, 10, (32,), generator=g)) for _ in range(16)]
    samples, t0 = [], time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = pool[step % len(pool)]
        loss = nn.functional.cross_entropy(ddp(x.to(dev, non_blocking=True)), y.to(dev, non_blocking=True))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % args.every == 0 or step == 1:
            samples.append(_sample(step, round(loss.item(), 4), t0, dev))
    gathered = [None] * world
    dist.all_gather_object(gathered, samples)
    if rank == 0:
        with open(os.path.join(args.out, "soak.json.part"), "w") as f:
            json.dump(gathered, f)
    dist.destroy_process_group()


def _growth(samples, steps):
    warm = [s for s in samples if s["step"] >= steps // 10]
    first, last = warm[0], warm[-1]
    per_k = 1000 / max(1, last["step"] - first["step"])
    return {k: {"first": first[k], "last": last[k], "per_1000_steps": round((last[k] - first[k]) * per_k, 3)}
            for k in ("rss_mib", "device_mib", "fds", "shm", "threads")}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20000)
    ap.add_argument("--every", type=int, default=500)
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rank:
        rank_main(args)
        return
    os.makedirs(args.out, exist_ok=True)
    shm_before = len(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else 0
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}",
           os.path.abspath(__file__), "--rank", "--steps", str(args.steps), "--every", str(args.every),
           "--out", args.out]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    wall = time.perf_counter() - t0
    part = os.path.join(args.out, "soak.json.part")
    with open(part) as f:
        ranks = json.load(f)
    os.remove(part)
    shm_after = len(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else 0
    import torch

    result = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}",
        "nproc": args.nproc, "steps": args.steps, "wall_s": round(wall, 1),
        "steps_per_s": round(args.steps / ranks[0][-1]["s"], 1),
        "shm_segments_left_behind": shm_after - shm_before,
        "growth": [_growth(s, args.steps) for s in ranks],
        "samples": ranks,
    }
    with open(os.path.join(args.out, "soak.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(table(result))


def table(data: dict) -> str:
    """The docs' table (tools/bench_tables.py renders it from soak.json)."""
    lines = [f"Machine: {data['machine']}; {data['nproc']} ranks of DDP, {data['steps']:,} steps, "
             f"{data['steps_per_s']} steps/s per rank; shared-memory segments left behind after the job: "
             f"{data['shm_segments_left_behind']}.", "",
             "| rank | measure | after warm-up | at the end | growth per 1,000 steps |", "|---|---|---|---|---|"]
    names = {"rss_mib": "host memory (RSS), MiB", "device_mib": "device memory, MiB", "fds": "open file descriptors",
             "shm": "segments in /dev/shm", "threads": "threads"}
    for rank, growth in enumerate(data["growth"]):
        for key, name in names.items():
            g = growth[key]
            lines.append(f"| {rank} | {name} | {g['first']} | {g['last']} | {g['per_1000_steps']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
