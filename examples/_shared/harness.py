"""What every example shares: the command line (--device, --mode, --steps,
--batch-size, --smoke), the execution mode, a tqdm bar with loss and
throughput, and the loss-curve PNG. Examples import it with

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _shared import harness
"""
from __future__ import annotations

import argparse
import os
import time

import torch

MODES = ("eager", "fused", "compile")


def parse_args(description, *, steps, batch_size, extra=None, argv=None):
    """The common flags; `extra(ap)` adds an example's own. `argv` (default:
    the command line) lets bench_setup() take the defaults."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    ap.add_argument("--mode", default="eager", choices=MODES,
                    help="tpu execution: strict eager, fused eager (DEFER_AND_FUSE) or torch.compile(backend='tpu')")
    ap.add_argument("--steps", type=int, default=steps)
    ap.add_argument("--batch-size", type=int, default=batch_size)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="where the loss-curve PNG goes (default: next to the script)")
    ap.add_argument("--smoke", action="store_true", help="a few steps at the given sizes, no quality check (CI)")
    if extra:
        extra(ap)
    args = ap.parse_args(argv)
    if args.smoke:
        args.steps = min(args.steps, 3)
    return args


def setup(args):
    """The device, with the execution mode applied; seeds torch."""
    torch.manual_seed(args.seed)
    if args.device == "tpu":
        import torch_tpu  # noqa: F401 - registers the device
        if args.mode == "fused":
            torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    return torch.device(args.device)


def compiled(fn, args):
    """fn under torch.compile in --mode compile (tpu: backend "tpu", cpu:
    Inductor), else fn itself."""
    if args.mode != "compile":
        return fn
    return torch.compile(fn, backend="tpu" if args.device == "tpu" else "inductor")


def optimizer_step(opt, loss_of):
    """A step function: zero the grads, loss_of(*batch), backward, opt.step();
    returns the detached loss (so reading it later does not keep the graph)."""
    def step(*batch):
        opt.zero_grad(set_to_none=True)
        loss = loss_of(*batch)
        loss.backward()
        opt.step()
        return loss.detach()
    return step


def fixed_batch_step(opt, loss_of, *batch):
    """A training step without arguments on one fixed batch, for the examples'
    bench_setup() (python -m torch_tpu.bench --models examples)."""
    step = optimizer_step(opt, loss_of)

    def run():
        return step(*batch)
    return run


def bench_argv(device, batch_size):
    """The command line of a bench_setup(): the defaults, on `device`."""
    return ["--device", torch.device(device).type, "--batch-size", str(batch_size)]


def sync(device):
    if device.type == "tpu":
        torch.tpu.synchronize()


class Progress:
    """A tqdm bar over the steps showing the loss and `unit`s per second; the
    loss is read from the device only every `every` steps (a read is a sync)."""

    def __init__(self, steps, unit, every=10, desc="train"):
        from tqdm import tqdm
        self.bar = tqdm(range(steps), desc=desc)
        self.unit, self.every = unit, every
        self.losses = []  # (step, loss) actually read
        self.items = 0
        self.t0 = None
        self.first_step_s = None

    def __iter__(self):
        start = time.perf_counter()
        for step in self.bar:
            yield step
            if step == 0:
                self.first_step_s = time.perf_counter() - start
                self.t0 = time.perf_counter()

    def update(self, step, loss, items):
        if step > 0:
            self.items += items
        if step % self.every == 0 or step == self.bar.total - 1:
            value = float(loss.detach() if isinstance(loss, torch.Tensor) else loss)
            self.losses.append((step, value))
            rate = self.items / max(time.perf_counter() - self.t0, 1e-9) if self.t0 and self.items else 0.0
            self.bar.set_postfix({"loss": f"{value:.4f}", f"{self.unit}/s": f"{rate:.0f}"})

    def rate(self):
        return self.items / max(time.perf_counter() - self.t0, 1e-9) if self.t0 else 0.0


def save_curve(progress, path, title):
    """Writes the loss curve to `path` (PNG); returns the path, or None
    without matplotlib."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    steps, losses = zip(*progress.losses) if progress.losses else ((), ())
    ax.plot(steps, losses, marker="o", markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def curve_path(args, script, name):
    return os.path.join(args.out or os.path.dirname(os.path.abspath(script)), f"{name}_loss.png")
