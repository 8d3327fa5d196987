import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    return (mo,)


@app.cell
def _(mo):
    mo.md(r"""
    # 6. Distributed training

    torch_tpu plugs into `torch.distributed` as a process-group backend
    named `"tpu"`. You launch one process per device with `torchrun`, call
    `dist.init_process_group("tpu")`, and PyTorch's own tools work on tpu
    tensors: collectives, `DistributedDataParallel`, FSDP2 and tensor
    parallelism with `DeviceMesh` and DTensor.

    A notebook is a single process, so this chapter writes small scripts to a
    temporary folder and starts two ranks with
    `python -m torch.distributed.run --standalone --nproc_per_node 2`.
    On XLA:CPU each rank gets its own device (`tpu:0`, `tpu:1`), and the
    collectives travel through host memory over Gloo. On a TPU VM the same
    scripts run unchanged.
    """)
    return


@app.cell
def _(mo):
    import json
    import os
    import pathlib
    import subprocess
    import sys
    import tempfile
    import time

    import torch

    import torch_tpu

    root = pathlib.Path(mo.notebook_dir() or pathlib.Path(__file__).parent).resolve().parents[1]
    # The scripts import the model and data from examples/distributed/_common.py.
    shared = root / "examples" / "distributed"
    if str(shared) not in sys.path:
        sys.path.insert(0, str(shared))

    def launch(name, source, *args):
        """Writes `source` to a script, runs it on two ranks, returns (rank 0's then rank 1's stdout lines, seconds)."""
        with tempfile.TemporaryDirectory(prefix="torch_tpu_dist_") as tmp:
            path = pathlib.Path(tmp) / name
            path.write_text(source)
            logs = path.with_suffix(".logs")  # torchrun writes each rank's stdout and stderr to its own file here
            cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]
            cmd += ["--log-dir", str(logs), "--redirects", "3", str(path), *map(str, args)]
            env = dict(os.environ, PYTHONPATH=str(shared), OMP_NUM_THREADS="1")
            t0 = time.perf_counter()
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
            seconds = time.perf_counter() - t0

            def log(rank, stream):
                return "".join(f.read_text() for f in sorted(logs.glob(f"*/attempt_*/{rank}/{stream}.log")))

            if p.returncode != 0:
                ranks = "".join(f"\n--- rank {r} ---\n{log(r, 'stdout')}{log(r, 'stderr')[-3000:]}" for r in range(2))
                raise RuntimeError(f"{name} failed (exit code {p.returncode}):\n{p.stderr[-2000:]}{ranks}")
            return [line for r in range(2) for line in log(r, "stdout").splitlines()], seconds

    def losses_in(lines, label):
        """The JSON list after `label` on rank 0's line."""
        for line in lines:
            if line.startswith("rank 0") and label in line:
                return json.loads(line.split(label, 1)[1])
        raise RuntimeError(f"no {label!r} in the output:\n" + "\n".join(lines))

    def show(intro, source, lines, seconds):
        code = "```python\n" + source.strip() + "\n```"
        out = "```\n" + "\n".join(lines) + "\n```"
        return mo.md(f"{intro}\n\n{code}\n\nOutput (two ranks, {seconds:.1f} s including start-up):\n\n{out}")

    return launch, losses_in, show, torch, torch_tpu


@app.cell
def _(launch, show):
    allreduce_src = """
import os
import torch
import torch.distributed as dist
import torch_tpu  # noqa: F401  (registers the device and the "tpu" backend)

dist.init_process_group("tpu")
rank = dist.get_rank()
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))  # rank r drives tpu:r
x = torch.arange(4.0, device="tpu") + 10 * rank
before = x.tolist()
dist.all_reduce(x)  # SUM by default
parts = [torch.empty(2, device="tpu") for _ in range(dist.get_world_size())]
dist.all_gather(parts, torch.full((2,), float(rank), device="tpu"))
gathered = [p.tolist() for p in parts]
print(f"rank {rank} on {x.device}: {before} -> all_reduce {x.tolist()}; all_gather {gathered}")
try:
    dist.all_reduce(torch.ones(2 + rank, device="tpu"))  # a bug: the shapes differ between ranks
except RuntimeError as e:
    print(f"rank {rank} caught: {str(e).split(';')[0]}")
dist.destroy_process_group()
"""
    _intro = """## Collectives

Each rank fills a tensor on its own device; `all_reduce` sums them in place, `all_gather` collects one from each
rank. The last call is a bug on purpose: the ranks pass tensors of different shapes. Instead of a hang or a wrong
result, every rank gets an error that says what went wrong."""
    show(_intro, allreduce_src, *launch("allreduce.py", allreduce_src))
    return


@app.cell
def _(launch, losses_in, show):
    STEPS, BATCH = 20, 32
    ddp_src = """
import os, sys
import torch
import torch.distributed as dist
import torch_tpu  # noqa: F401
from torch.nn.parallel import DistributedDataParallel as DDP
from _common import Sorter, loss_fn, make_batch

steps, batch = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("tpu")
rank, world = dist.get_rank(), dist.get_world_size()
torch.tpu.set_device(int(os.environ["LOCAL_RANK"]))
device = torch.device("tpu", torch.tpu.current_device())
torch.manual_seed(0)
model = DDP(Sorter().to(device))
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
g = torch.Generator().manual_seed(1)
n, losses = batch // world, []
for step in range(steps):
    x, y = make_batch(batch, g)
    x, y = x[rank * n:(rank + 1) * n].to(device), y[rank * n:(rank + 1) * n].to(device)
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()  # gradients are averaged across ranks here
    opt.step()
    losses.append(loss.detach())
mean = torch.stack(losses)
dist.all_reduce(mean, op=dist.ReduceOp.AVG)  # the loss over the global batch
print(f"rank {rank} on {device}: {n} sequences per step; global losses {mean.tolist()}")
dist.destroy_process_group()
"""
    _lines, _secs = launch("ddp.py", ddp_src, STEPS, BATCH)
    ddp_losses = losses_in(_lines, "global losses ")
    _intro = """## Data parallel: `DistributedDataParallel`

Both ranks start from the same weights (same seed) and draw the same global batch of 32 digit-sorting sequences;
each trains on its own half. During `backward()` DDP averages the gradients across the ranks, so every step is
the step one process would take on the whole batch. The model is the small transformer of
`examples/distributed/_common.py`."""
    _short = [line.split("; global")[0] + "; global losses [...]" for line in _lines]
    show(_intro, ddp_src, _short, _secs)
    return BATCH, STEPS, ddp_losses


@app.cell
def _(BATCH, STEPS, ddp_losses, mo, torch):
    from _common import Sorter, loss_fn, make_batch

    # The same training in this one process, on tpu:0, with the whole batch.
    torch.manual_seed(0)
    _model = Sorter().to("tpu")
    _opt = torch.optim.AdamW(_model.parameters(), lr=3e-3)
    _g = torch.Generator().manual_seed(1)
    _losses = []
    for _ in range(STEPS):
        _x, _y = make_batch(BATCH, _g)
        _opt.zero_grad()
        _loss = loss_fn(_model(_x.to("tpu")), _y.to("tpu"))
        _loss.backward()
        _opt.step()
        _losses.append(_loss.detach())
    single_losses = torch.stack(_losses).tolist()
    _diff = max(abs(a - b) for a, b in zip(ddp_losses, single_losses))
    mo.md(f"""
    One process with the whole batch, in this notebook: loss {single_losses[0]:.4f} → {single_losses[-1]:.4f}.
    Two DDP ranks: {ddp_losses[0]:.4f} → {ddp_losses[-1]:.4f}. The largest difference over {STEPS} steps is
    **{_diff:.1e}**: float32 rounding, because the two halves are summed in another order.
    """)
    return (single_losses,)


@app.cell
def _(BATCH, STEPS, launch, losses_in, show):
    tp_src = """
import sys
import torch
import torch.distributed as dist
import torch_tpu  # noqa: F401
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module
from _common import Sorter, loss_fn, make_batch

steps, batch = int(sys.argv[1]), int(sys.argv[2])
dist.init_process_group("tpu")
rank = dist.get_rank()
mesh = init_device_mesh("tpu", (dist.get_world_size(),))  # sets this rank's device too
device = torch.device("tpu", torch.tpu.current_device())
torch.manual_seed(0)
model = Sorter().to(device)
plan = {}
for i in range(len(model.blocks)):
    plan.update({f"blocks.{i}.attn.{p}": ColwiseParallel() for p in ("q", "k", "v")})
    plan.update({f"blocks.{i}.attn.proj": RowwiseParallel(), f"blocks.{i}.up": ColwiseParallel(),
                 f"blocks.{i}.down": RowwiseParallel()})
parallelize_module(model, mesh, plan)
w = model.blocks[0].up.weight
print(f"rank {rank}: blocks.0.up.weight {type(w).__name__} {tuple(w.shape)} {w.placements}, "
      f"local shard {tuple(w.to_local().shape)} on {w.to_local().device}")
opt = torch.optim.AdamW(model.parameters(), lr=3e-3, foreach=False)  # foreach refuses DTensor + plain mixes
g = torch.Generator().manual_seed(1)
losses = []
for step in range(steps):
    x, y = make_batch(batch, g)
    opt.zero_grad()
    loss = loss_fn(model(x.to(device)), y.to(device))
    loss.backward()
    opt.step()
    losses.append(loss.detach())
if rank == 0:
    print(f"rank {rank}: losses {torch.stack(losses).tolist()}")
dist.destroy_process_group()
"""
    _lines, _secs = launch("tp.py", tp_src, STEPS, BATCH)
    tp_losses = losses_in(_lines, "losses ")
    _intro = """## Tensor parallel: `DeviceMesh` and DTensor

Tensor parallelism splits the model instead of the batch. `parallelize_module` shards attention by heads (q, k and
v column-wise, the output projection row-wise) and the MLP by hidden units, so each parameter becomes a `DTensor`
whose local shard lives on its rank's device. Every rank sees the whole batch, so the training should again follow
the single-process run."""
    show(_intro, tp_src, [x if "losses" not in x else x.split("losses")[0] + "losses [...]" for x in _lines], _secs)
    return (tp_losses,)


@app.cell
def _(ddp_losses, mo, single_losses, tp_losses):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (_ax1, _ax2) = plt.subplots(1, 2, figsize=(10, 3.2))
    _ax1.plot(single_losses, "k-", label="1 process, whole batch")
    _ax1.plot(ddp_losses, "o", markersize=5, mfc="none", label="DDP, 2 ranks")
    _ax1.plot(tp_losses, "x", markersize=5, label="tensor parallel, 2 ranks")
    _ax1.set(xlabel="step", ylabel="loss", title="The same training, three ways")
    _ax1.legend()
    for _name, _l in (("DDP", ddp_losses), ("tensor parallel", tp_losses)):
        _ax2.plot([abs(a - b) for a, b in zip(_l, single_losses)], marker=".", label=_name)
    _ax2.set(xlabel="step", ylabel="|loss - single process|", title="Difference from one process")
    _ax2.ticklabel_format(axis="y", style="sci", scilimits=(0, 0))
    _ax2.legend()
    for _ax in (_ax1, _ax2):
        _ax.grid(alpha=0.3)
        _ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    fig.tight_layout()
    _tp = max(abs(a - b) for a, b in zip(tp_losses, single_losses))
    mo.vstack([mo.md(f"Tensor parallel against one process: largest loss difference **{_tp:.1e}**."), fig])
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What to take away

    - `dist.init_process_group("tpu")` under `torchrun`; each rank drives `tpu:<LOCAL_RANK>`
      (`torch.tpu.set_device`, or `init_device_mesh`, which does it for you).
    - DDP, DTensor and `parallelize_module` are PyTorch's own: the scripts name torch_tpu only in the backend.
    - Every rank must call the same collectives with tensors of the same shapes and dtypes.
    - FSDP2 (`fully_shard`) works the same way (`examples/distributed/fsdp.py`); `docs/distributed.md`
      lists every collective and how it is tested.
    """)
    return


if __name__ == "__main__":
    app.run()
