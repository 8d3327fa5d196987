"""Training loops as scripts write them, against the bench's fixed loop.

    python -m torch_tpu.bench --loop real [--models mlp-demo,mlp,gpt] [--modes ...] [--steps N]

For every (model, mode) a fresh process with an empty compilation cache runs
three loops on the bench's models (torch_tpu.bench.train):

- the bench loop: one batch on the device, zero_grad, forward, backward,
  step, ``return loss``: what the train bench times;
- plain accumulation: the real loop's math (4 micro-batches per optimizer
  step) on fixed device batches, with none of the extras below;
- the real loop: a warm-up + cosine LR schedule (LambdaLR, stepped every
  step), 4-step gradient accumulation, ``clip_grad_norm_``, ``loss.item()``
  logged every 10 steps, an eval pass (``model.eval()``, no_grad) every 50
  steps, batches copied from the host every step and, for the GPT, batch
  lengths drawn from 64-128 tokens.

In tpu-compile the whole training step (the accumulation loop, clipping and
the optimizer) is one compiled function, and so is the eval step. Reported:
items/s of each loop after warm-up (samples, or tokens for the GPT), the
real loop's ratio to each (accumulation alone makes items/s higher than
the bench loop's: one optimizer step per 4 batches), and the programs
compiled after step 100 of the real loop. Writes
real_loop.{json,png} to --out (bench/results in a source checkout).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import time

from torch_tpu.bench import train

MODES = ["cpu-eager", "tpu-strict", "tpu-fused", "tpu-compile"]
ACCUM, LOG_EVERY, EVAL_EVERY, WARMUP_STEPS = 4, 10, 50, 10
STEPS = {"mlp-demo": 300, "mlp": 160, "gpt": 130}  # real-loop steps; the timing starts after step 100
TIMED_AFTER = 100


def _schedule(total: int):
    """Linear warm-up for WARMUP_STEPS, then cosine decay to zero."""
    def factor(step: int) -> float:
        if step < WARMUP_STEPS:
            return (step + 1) / WARMUP_STEPS
        return 0.5 * (1 + math.cos(math.pi * min(1.0, (step - WARMUP_STEPS) / max(1, total - WARMUP_STEPS))))
    return factor


def _batches(name: str, x, y, steps: int):
    """The real loop's host batches: ACCUM per step, each a fresh contiguous
    CPU tensor (what a DataLoader yields); the GPT's at a length drawn from
    64-128 per step."""
    import torch

    g = torch.Generator().manual_seed(1)
    xc, yc = x.cpu(), y.cpu()
    for _ in range(steps):
        if name == "gpt":
            n = int(torch.randint(64, 129, (1,), generator=g))
            yield [(xc[:, :n].roll(i, 0).contiguous(), yc[:, :n].roll(i, 0).contiguous()) for i in range(ACCUM)]
        else:
            yield [(xc.roll(i, 0), yc.roll(i, 0)) for i in range(ACCUM)]


def _items(name: str, x) -> int:
    return x.numel() if name == "gpt" else x.shape[0]


def run(name: str, mode: str, fixed_steps: int, buckets: str = "") -> dict:
    import torch

    import torch_tpu  # noqa: F401  (the tpu device)

    device = "tpu" if mode.startswith("tpu") else "cpu"
    if mode == "tpu-fused":
        torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    sync = torch.tpu.synchronize if device == "tpu" else (lambda: None)
    opts = {"buckets": tuple(int(b) for b in buckets.split(","))} if buckets.strip("-") else None
    compile_ = (lambda f: torch.compile(f, backend="tpu", options=opts)) if mode == "tpu-compile" else (lambda f: f)

    # The fixed loop (as the train bench times it).
    step = compile_(train.torch_setup(name, device))
    for _ in range(3):
        loss = step()
    float(loss)
    t0 = time.perf_counter()
    for _ in range(fixed_steps):
        loss = step()
    float(loss)
    sync()
    _, _, x, _, _ = train.build(name, "cpu")
    fixed = fixed_steps * _items(name, x) / (time.perf_counter() - t0)

    plain = _accumulating_loop(name, device, compile_, sync, real=False)
    real, after, logged = _accumulating_loop(name, device, compile_, sync, real=True)
    return dict(fixed_items_per_s=fixed, plain_items_per_s=plain[0], real_items_per_s=real,
                ratio=real / fixed, ratio_plain=real / plain[0], compiles_after_100=after,
                last_logged=logged[-1] if logged else None, finite=all(math.isfinite(v) for v in logged))


def _accumulating_loop(name, device, compile_, sync, real: bool):
    """items/s after step TIMED_AFTER of a 4-step accumulation loop on a
    fresh model and optimizer, the programs compiled after that step, and
    the logged losses. real=False: the same math on fixed device batches,
    constant lr, no clipping, logging or eval (what the extras cost is the
    difference)."""
    import torch

    import torch_tpu

    model, opt, x, y, loss_fn = train.build(name, device)
    steps = STEPS[name]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _schedule(steps)) if real else None

    def train_step(batches):
        for xb, yb in batches:
            loss = loss_fn(model(xb), yb) / ACCUM
            loss.backward()
        if real:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    def eval_step(xb, yb):
        with torch.no_grad():
            return loss_fn(model(xb), yb)

    train_step, eval_step = compile_(train_step), compile_(eval_step)
    fixed_batches = [(x.roll(i, 0), y.roll(i, 0)) for i in range(ACCUM)]
    items, logged, compiled_before, t0 = 0, [], 0, None
    for i, batches in enumerate(_batches(name, x, y, steps)):
        if i == TIMED_AFTER:
            sync()
            compiled_before = torch_tpu.debug.metrics()["compiles"] if device == "tpu" else 0
            t0 = time.perf_counter()
        loss = train_step([(xb.to(device), yb.to(device)) for xb, yb in batches] if real else fixed_batches)
        if real:
            sched.step()
            if i % LOG_EVERY == 0:
                logged.append(loss.item())
            if i % EVAL_EVERY == EVAL_EVERY - 1:
                model.eval()
                logged.append(eval_step(x, y).item())
                model.train()
        if i >= TIMED_AFTER:
            items += sum(_items(name, xb) for xb, _ in (batches if real else fixed_batches))
    float(loss)
    sync()
    rate = items / (time.perf_counter() - t0)
    after = torch_tpu.debug.metrics()["compiles"] - compiled_before if device == "tpu" else 0
    return rate, after, logged


def _chart(results: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(results)
    modes = [m for m in MODES if any(results[n].get(m) for n in models)]
    fig, ax = plt.subplots(figsize=(8, 3.5))
    width = 0.8 / max(1, len(modes))
    for j, mode in enumerate(modes):
        vals = [(results[n].get(mode) or {}).get("ratio_plain", 0) for n in models]
        bars = ax.bar([i + j * width for i in range(len(models))], vals, width, label=mode)
        ax.bar_label(bars, fmt="%.2f", fontsize=7)
    ax.axhline(0.9, color="gray", linestyle="--", linewidth=0.8)
    ax.set_xticks([i + width * (len(modes) - 1) / 2 for i in range(len(models))], models)
    ax.set_ylabel("real loop / plain accumulation (items/s)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp-demo,mlp,gpt")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--fixed-steps", type=int, default=0, help="timed steps of the fixed loop (default: per model)")
    ap.add_argument("--out", default=train.default_out())
    ap.add_argument("--buckets", default="", help="tpu-compile: padded sizes of varying lengths, e.g. 80,96,112,128 "
                    "(default: powers of two)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print("RESULT " + json.dumps(run(a.child[0], a.child[1], int(a.child[2]), a.child[3])))
        return
    from tqdm import tqdm

    models, modes = a.models.split(","), a.modes.split(",")
    fixed_default = {"mlp-demo": 2000, "mlp": 300, "gpt": 20}
    results: dict = {n: {} for n in models}
    with tqdm(total=len(models) * len(modes), desc="real loops") as bar:
        for name in models:
            for mode in modes:
                bar.set_postfix_str(f"{name}/{mode}")
                steps = a.fixed_steps or fixed_default.get(name, 20)
                results[name][mode] = train.run_child("torch_tpu.bench.real_loop",
                                                      [name, mode, steps, a.buckets or "-"],
                                                      f"{name}/{mode}", timeout=3600)
                bar.update()
    print(f"{'model':<10}{'mode':<14}{'bench items/s':>14}{'plain accum.':>13}{'real loop':>11}"
          f"{'real/bench':>11}{'real/plain':>11}{'compiles after 100':>20}")
    for name in models:
        for mode in modes:
            r = results[name][mode]
            if r:
                print(f"{name:<10}{mode:<14}{r['fixed_items_per_s']:>14.0f}{r['plain_items_per_s']:>13.0f}"
                      f"{r['real_items_per_s']:>11.0f}{r['ratio']:>11.2f}{r['ratio_plain']:>11.2f}"
                      f"{r['compiles_after_100']:>20}")
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "real_loop.json"), "w") as f:
        json.dump(results, f, indent=1)
    _chart(results, os.path.join(a.out, "real_loop.png"))
    print(f"wrote {a.out}/real_loop.json and real_loop.png")


if __name__ == "__main__":
    main()
