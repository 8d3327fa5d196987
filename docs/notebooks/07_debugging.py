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
    # 7. Debugging and profiling

    When a model misbehaves on a new device, the first questions are: what ran
    and what compiled, does the device compute what the CPU computes, where
    does a NaN come from, and what does an error mean. This chapter runs
    torch_tpu's tool for each question on a small network: `torch_tpu.debug`,
    a few environment variables, debug eager, and `torch.profiler`.
    """)
    return


@app.cell
def _():
    import os
    import subprocess
    import sys
    import time

    import torch
    import torch.nn as nn

    import torch_tpu
    from torch_tpu import debug

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Dropout(0.1), nn.Linear(32, 32))
            self.head = nn.Sequential(nn.LayerNorm(32), nn.Linear(32, 4))

        def forward(self, x):
            return self.head(self.body(x))

    def code(text, lang=""):
        return f"```{lang}\n{text}\n```"

    return Net, code, debug, os, subprocess, sys, time, torch, torch_tpu


@app.cell
def _(Net, code, debug, mo, torch):
    torch.manual_seed(0)
    _model = Net().to("tpu")
    _opt = torch.optim.AdamW(_model.parameters())
    _x, _y = torch.randn(8, 16, device="tpu"), torch.randint(0, 4, (8,), device="tpu")
    debug.reset_metrics()
    _loss = torch.nn.functional.cross_entropy(_model(_x), _y)
    _loss.backward()
    _opt.step()
    _loss.item()  # reads the loss: the one device-to-host transfer of this step
    mo.md(f"""
## What ran: the metrics report

`debug.reset_metrics()` zeroes the counters and `debug.metrics_report()` prints them
(`debug.metrics()` gives the same as a dict). Here they are for one training step:

{code(debug.metrics_report())}

In strict eager mode each op runs as its own program, except `optimizer.step()`, which
torch_tpu records and runs as one program (the "fused eager flushes" line). "compiles"
counts what XLA compiled in this process; a program found in the memory or disk cache
(`~/.cache/torch_tpu`) is not compiled again, so a second run of this notebook compiles
almost nothing. Transfers show every copy between host and device.
""")
    return


@app.cell
def _(debug, mo, torch, torch_tpu):
    import matplotlib.pyplot as plt

    _lin = torch.nn.Linear(16, 16).to("tpu")

    def step(x):
        return torch.nn.functional.gelu(_lin(x)).sum().item()

    _data = torch.randn(12, 16)
    # Programs compiled by an earlier run would load from disk; switch that tier off for a moment.
    _saved = torch_tpu.cache.settings()["disk_dir"]
    torch_tpu.cache.set_cache_dir(None)
    try:
        debug.reset_metrics()
        for _n in range(3, 11):  # ragged: batches of 3, 4, ..., 10 rows
            step(_data[:_n].to("tpu"))
        ragged = debug.metrics()["compiles_by_op"]
        debug.reset_metrics()
        for _n in range(3, 11):  # the same batches padded with zero rows to 12
            step(torch.cat([_data[:_n], torch.zeros(12 - _n, 16)]).to("tpu"))
        padded = debug.metrics()["compiles_by_op"]
    finally:
        torch_tpu.cache.set_cache_dir(_saved)
    _ops = sorted(set(ragged) | set(padded))
    fig, _ax = plt.subplots(figsize=(6, 2.6))
    for _i, (_name, _d) in enumerate((("ragged", ragged), ("padded", padded))):
        _ax.bar([k + 0.4 * _i - 0.2 for k in range(len(_ops))], [_d.get(o, (0, 0))[0] for o in _ops], 0.4, label=_name)
    _ax.set_xticks(range(len(_ops)), _ops)
    _ax.set(ylabel="programs compiled", title='metrics()["compiles_by_op"] over 8 batches')
    _ax.legend()
    _ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    _text = mo.md(f"""
## Finding recompilation

A program is compiled for one set of shapes, so feeding batches of 3, 4, ..., 10 rows
compiles every op once per batch size; padding them all to 12 rows compiles each op once.
`metrics()["compiles_by_op"]` maps each op to (programs compiled, milliseconds), which is how
to spot it. Measured just now: ragged {sum(n for n, _ in ragged.values())} compiles in
{sum(ms for _, ms in ragged.values()):.0f} ms, padded {sum(n for n, _ in padded.values())} in
{sum(ms for _, ms in padded.values()):.0f} ms.
""")
    mo.vstack([_text, fig])
    return


@app.cell
def _(Net, code, debug, mo, torch):
    torch.manual_seed(0)
    _model = Net().to("tpu")
    _x = torch.randn(8, 16)
    _train = debug.compare_with_cpu(_model, _x)  # still in training mode: dropout is random
    _model.eval()
    _eval = debug.compare_with_cpu(_model, _x)
    _rows = "\n".join(f"| `{n or '(model)'}` | {e:.1e} | {ok} |" for n, e, ok in _eval.outputs)
    mo.md(f"""
## Same numbers as CPU? `compare_with_cpu`

`debug.compare_with_cpu(model, *inputs)` copies the model to the CPU, runs both copies on the
same inputs, back-propagates, and compares every module's output (in the order they ran) and
every gradient. The first call forgot `model.eval()`, so dropout draws different masks on the
two devices, and the report points at the dropout layer:

{code(str(_train))}

After `model.eval()`:

{code(str(_eval))}

| module | largest abs error | within tolerance |
|---|---|---|
{_rows}
""")
    return


@app.cell
def _(code, debug, mo, torch):
    def log_probs(x):
        p = torch.softmax(x, dim=-1)
        return torch.log(p - 0.1)  # a bug: p - 0.1 can be negative

    _x = torch.randn(4, 5, device="tpu")
    _silent = log_probs(_x).sum().item()
    try:
        with debug.detect_nan():
            log_probs(_x).sum()
        _caught = "no NaN found"
    except RuntimeError as e:
        _caught = str(e)
    mo.md(f"""
## Where does the NaN come from? `detect_nan`

Left alone, the NaN only shows at the end: the result is `{_silent}`. Inside
`with debug.detect_nan():` every tpu op's output is checked as it runs (backward ops too), and
the first NaN or Inf raises an error that names the ATen op and your line of code:

{code(_caught)}

Each check waits for the device, so use it to find the op, then take it out.
`TORCH_TPU_DETECT_NAN=1` does the same for a whole process (two cells down).
""")
    return


@app.cell
def _(mo, torch):
    _x = torch.arange(5.0, device="tpu")
    _cases = [
        ("tensors on two devices", lambda: _x + torch.ones(5)),
        ("shapes that do not broadcast", lambda: _x + torch.ones(4, device="tpu")),
        ("matmul of mismatched shapes", lambda: torch.ones(2, 3, device="tpu") @ torch.ones(2, 3, device="tpu")),
        ("a device that does not exist", lambda: torch.ones(1, device="tpu:7")),
        ("an op without a tpu kernel", lambda: torch.linalg.matrix_exp(torch.eye(2, device="tpu"))),
        ("Cholesky of a non-positive-definite matrix", lambda: torch.linalg.cholesky(-torch.eye(2, device="tpu"))),
        ("integer index out of range", lambda: _x[10]),
    ]
    _rows = []
    for _what, _fn in _cases:
        try:
            _fn()
            _rows.append({"mistake": _what, "error": "(none)", "message": ""})
        except Exception as e:  # we show whatever is raised
            _rows.append({"mistake": _what, "error": type(e).__name__, "message": str(e).splitlines()[0]})
    _clamped = _x[torch.tensor([10], device="tpu")].tolist()
    mo.vstack(
        [
            mo.md(
                "## Errors for bad input\n\nKernels check their arguments when the op is called, so a mistake "
                "raises on its own line, with the message you know from CPU and CUDA. Each row was raised just now:"
            ),
            mo.ui.table(_rows, selection=None, pagination=False),
            mo.md(
                "One exception, by design: checking a tensor of indices would mean waiting for the device, so an "
                f"out-of-range tensor index is clamped: `x[torch.tensor([10])]` on 5 elements gives `{_clamped}`. "
                "`TORCH_TPU_DEBUG_CHECKS=1` checks such indices as CPU does (next cell)."
            ),
        ]
    )
    return


@app.cell
def _(code, mo, os, subprocess, sys):
    _script = """import torch, torch_tpu
x = torch.arange(5.0, device="tpu")
try:
    x[torch.tensor([10], device="tpu")]
except IndexError as e:
    print("IndexError:", e)
try:
    torch.log(x - 1).sum()
except RuntimeError as e:
    print("RuntimeError:", e)"""
    _env = dict(os.environ, TORCH_TPU_DEBUG_CHECKS="1", TORCH_TPU_DETECT_NAN="1")
    _p = subprocess.run([sys.executable, "-c", _script], env=_env, capture_output=True, text=True, timeout=300)
    if _p.returncode != 0:
        raise RuntimeError(f"the subprocess failed ({_p.returncode}):\n{_p.stderr[-3000:]}")
    mo.md(f"""
Environment variables apply to a whole process, so this cell runs a fresh Python with
`TORCH_TPU_DEBUG_CHECKS=1 TORCH_TPU_DETECT_NAN=1`:

{code(_script, "python")}

{code(_p.stdout.strip())}
""")
    return


@app.cell
def _(mo, time, torch):
    _a = torch.randn(1024, 1024, device="tpu")

    def work(x):
        for _ in range(5):
            x = torch.tanh(x @ x * 0.01)
        return x

    _rows = []
    for _mode in (torch.tpu.EagerMode.DEFER_NEVER, torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        with torch.tpu.set_eager_mode(_mode):
            _y = work(_a)  # warm up: compile outside the measurement
            torch.tpu.synchronize()
            _t0 = time.perf_counter()
            _y = work(_a)
            _t1 = time.perf_counter()
            torch.tpu.synchronize()
            _t2 = time.perf_counter()
        _rows.append(f"| `{_mode.name}` | {1e3 * (_t1 - _t0):.1f} ms | {1e3 * (_t2 - _t0):.1f} ms |")
    _table = "\n".join(_rows)
    mo.md(f"""
## Debug eager: every op waits

Ops normally run asynchronously: Python queues them and moves on, so a failure inside the
device surfaces later, at the next line that needs a value. Debug eager
(`torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING`, or
`TORCH_TPU_LAUNCH_BLOCKING=1`) waits after every op, so errors, NaNs and out-of-memory
surface on the line that caused them. Five 1024 x 1024 matmuls, timed just now:

| mode | Python loop returned after | results ready after |
|---|---|---|
{_table}
""")
    return


@app.cell
def _(code, mo, os, subprocess, sys):
    import tempfile

    _dir = tempfile.mkdtemp(prefix="tt_dump_")
    _script = os.path.join(_dir, "step.py")
    with open(_script, "w") as _f:
        _f.write(
            "import torch, torch_tpu\n"
            "x = torch.randn(8, 16, device='tpu')\n"
            "w = torch.randn(16, 4, device='tpu')\n"
            "with torch.tpu.set_eager_mode('DEFER_AND_FUSE'):\n"
            "    y = torch.relu(x @ w) * 2\n"
            "print(y.sum().item())\n"
        )
    _env = dict(os.environ, TORCH_TPU_DUMP_DIR=os.path.join(_dir, "dump"),
                TORCH_TPU_CACHE_DIR=os.path.join(_dir, "cache"))
    subprocess.run([sys.executable, _script], env=_env, check=True, capture_output=True, text=True)
    _files = sorted(os.listdir(os.path.join(_dir, "dump")))
    _fused = next(f for f in _files if "fused" in f)
    with open(os.path.join(_dir, "dump", _fused)) as _f:
        _head = "\n".join(_f.read().splitlines()[:10])
    mo.md(f"""
## Program dumps: `TORCH_TPU_DUMP_DIR`

With `TORCH_TPU_DUMP_DIR=dir`, every program the process compiles (or loads from the disk
cache) is written to `dir` with its StableHLO, cache key, compile time, and the ATen ops it
came from with the Python line of each. A small script run just now in a fresh process wrote
{len(_files)} files: {", ".join(f"`{f}`" for f in _files)}. The start of the fused one:

{code(_head)}
""")
    return


@app.cell
def _(code, debug, mo, torch):
    debug.reset_metrics()
    for _n in (5, 6):  # two batch sizes: a new shape
        (torch.ones(_n, 3, device="tpu") * 2.5).cpu()
    (torch.ones(5, 3, device="tpu", dtype=torch.float64) * 2.5).cpu()  # a new dtype
    _report = debug.compile_report()
    mo.md(f"""
## Why did it compile again? `compile_report()`

`torch_tpu.debug.compile_report()` lists the ops compiled into more than one program, with
what changed each time and how to avoid it. Two batch sizes and a float64 input, just now:

{code(_report)}
""")
    return


@app.cell
def _(code, debug, mo, os, torch):
    from torch.profiler import ProfilerActivity, profile, record_function

    os.environ.setdefault("KINETO_LOG_LEVEL", "5")  # quiets the profiler's "no GPU found" message on stderr

    _model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)).to("tpu")
    _x = torch.randn(256, 512, device="tpu")
    for _ in range(2):  # warm up, so compiling is not in the profile
        _model(_x).sum().backward()
    torch.tpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            _model(_x).sum().backward()
        with record_function("wait for the device"):
            torch.tpu.synchronize()
    _table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10, max_name_column_width=40)
    # Device spans: what each program took on the device, from PJRT's completion events.
    _spans = debug.device_spans(prof)
    _by_name = {}
    for _s in _spans:
        _n, _us = _by_name.get(_s["name"], (0, 0.0))
        _by_name[_s["name"]] = (_n + 1, _us + (_s["end_ns"] - _s["start_ns"]) / 1e3)
    _rows = sorted(_by_name.items(), key=lambda kv: -kv[1][1])
    _lines = [f"{'program':<24} {'count':>5} {'device µs':>12}"]
    _lines += [f"{_k:<24} {_n:>5} {_us:>12.0f}" for _k, (_n, _us) in _rows]
    _dev = "\n".join(_lines)
    mo.md(f"""
## `torch.profiler`

With `ProfilerActivity.CPU` the PyTorch profiler records every ATen op called on tpu tensors,
with call counts, input shapes and the host time spent issuing it, and torch_tpu's own ranges:
`tpu::launch` (handing a program to the device), `tpu::compile`, `tpu::fused_flush`, the
transfers. Ops run asynchronously, so the host waits only where a value is needed, here the
`record_function` around `torch.tpu.synchronize()`:

{code(_table)}

The device side: torch_tpu records each program's span on the device from PJRT's completion
events, and `prof.export_chrome_trace(path)` adds them as a `tpu:0 (device)` track under the
host threads (open it in Perfetto). `torch_tpu.debug.device_spans(prof)` returns them; per
program, summed over the three steps:

{code(_dev)}
""")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Summary

    | question | tool |
    |---|---|
    | what ran, what compiled, what was copied | `debug.metrics_report()`, `debug.metrics()` |
    | why does it compile again | `debug.compile_report()`; `TORCH_TPU_LOG_LEVEL=DEBUG` says why the cache missed |
    | what exactly was compiled | `TORCH_TPU_DUMP_DIR=dir` |
    | does tpu compute what CPU computes | `debug.compare_with_cpu(model, *inputs)` |
    | where does a NaN or Inf appear | `with debug.detect_nan():`, `TORCH_TPU_DETECT_NAN=1` |
    | which line failed | `EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING`, `TORCH_TPU_LAUNCH_BLOCKING=1` |
    | indices out of range | `TORCH_TPU_DEBUG_CHECKS=1` |
    | where does the host time go | `torch.profiler` with `ProfilerActivity.CPU` |
    | what runs on the device, and how long | the profiler trace's `tpu:N (device)` track, `debug.device_spans(prof)` |

    `docs/debugging.md` has more, and `docs/errors.md` explains each error message.
    """)
    return


if __name__ == "__main__":
    app.run()
