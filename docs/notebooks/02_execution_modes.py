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
    # 2. Execution modes

    torch_tpu can run the same PyTorch code in four ways. All of them use the
    same kernels and give the same numbers; they differ in *when* ops run and how
    many ops go into one compiled XLA program.

    | Mode | How to pick it (`EagerMode.…` or environment) | What runs |
    |---|---|---|
    | strict eager (default) | `DEFER_NEVER` | each op is its own cached program, run asynchronously |
    | debug eager | `DEFER_NEVER_AND_LAUNCH_BLOCKING`, `TORCH_TPU_LAUNCH_BLOCKING=1` | the same; each op waits |
    | fused eager | `DEFER_AND_FUSE`, `TORCH_TPU_DEFER_AND_FUSE=1` | ops are recorded, run as one program at a flush |
    | compiled | `torch.compile(fn, backend="tpu")` | each captured graph is one program, replayed later |
    """)
    return


@app.cell
def _():
    import time

    import matplotlib.pyplot as plt
    import torch

    import torch_tpu

    EagerMode = torch.tpu.EagerMode
    return EagerMode, plt, time, torch, torch_tpu


@app.cell
def _(mo):
    mo.md(r"""
    ## Switching modes

    `torch.tpu.eager_mode` reads (and can set) the mode for the whole process.
    `torch.tpu.set_eager_mode(...)` also works as a context manager, which is
    the tidy way to change it for one block: the old mode comes back on exit.

    In fused eager nothing runs until a *flush*: a value read on the host
    (`.item()`, `.cpu()`, `print`), `torch.tpu.synchronize()`, the end of
    `optimizer.step()`, or an explicit `torch_tpu.mark_step()`. The metrics
    count the flushes and say why each one happened.
    """)
    return


@app.cell
def _(EagerMode, torch, torch_tpu):
    torch_tpu.debug.reset_metrics()
    _x = torch.randn(64, 64, device="tpu")
    print("before:", torch.tpu.eager_mode)
    with torch.tpu.set_eager_mode(EagerMode.DEFER_AND_FUSE):
        print("inside:", torch.tpu.eager_mode)
        for _ in range(3):
            _x = torch.tanh(_x @ _x) * 0.5 + 1  # four ops, recorded, not run
            torch_tpu.mark_step()  # run them now, as one program
        _total = _x.sum().item()  # a host read flushes too
    print("after: ", torch.tpu.eager_mode)
    _m = torch_tpu.debug.metrics()
    print(f"flushes: {_m['flushes']}, ops fused: {_m['fused_ops']}, reasons: {_m['flush_reasons']}")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## One model, every mode

    The same small MLP (32 → 128 → 128 → 10, AdamW) trains in each mode from
    the same seed. The first few steps include compiling; the steps after them
    are timed. For `torch.compile` the whole training step (forward, backward
    and optimizer) is compiled, so each step is a single program.

    PyTorch's own CPU eager runs as a reference, on one thread (for a model this
    small, more threads only add overhead). Move the slider to change the batch
    size; every mode trains again.
    """)
    return


@app.cell
def _(mo):
    batch_slider = mo.ui.slider(16, 256, step=16, value=64, label="batch size", show_value=True)
    batch_slider
    return (batch_slider,)


@app.cell
def _(EagerMode, time, torch, torch_tpu):
    MODES = {
        "PyTorch CPU eager": None,
        "strict eager": EagerMode.DEFER_NEVER,
        "debug eager": EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING,
        "fused eager": EagerMode.DEFER_AND_FUSE,
        "torch.compile": EagerMode.DEFER_NEVER,
    }

    def train(mode, batch, steps=20, warmup=3):
        """Trains a fresh MLP; returns timings, counters and the last loss."""
        device = "cpu" if mode == "PyTorch CPU eager" else "tpu"
        _g = torch.Generator().manual_seed(0)
        x = torch.randn(batch, 32, generator=_g).to(device)
        y = torch.randint(0, 10, (batch,), generator=_g).to(device)
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Linear(32, 128),
            torch.nn.GELU(),
            torch.nn.Linear(128, 128),
            torch.nn.ReLU(),
            torch.nn.Linear(128, 10),
        ).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            return loss.detach()

        if mode == "torch.compile":
            torch._dynamo.reset()  # start from a clean dynamo cache
            step = torch.compile(step, backend="tpu")
        threads = torch.get_num_threads()
        if device == "cpu":
            torch.set_num_threads(1)
        try:
            with torch.tpu.set_eager_mode(MODES[mode] or EagerMode.DEFER_NEVER):
                torch_tpu.debug.reset_metrics()
                t0 = time.perf_counter()
                losses = [step(x, y) for _ in range(warmup)]
                losses[-1].item()
                t1 = time.perf_counter()
                losses += [step(x, y) for _ in range(steps)]
                last = torch.stack(losses).cpu()[-1].item()
                t2 = time.perf_counter()
        finally:
            torch.set_num_threads(threads)
        m = torch_tpu.debug.metrics()
        return {
            "mode": mode,
            "first 3 steps (s)": round(t1 - t0, 2),
            "steps/s": round(steps / (t2 - t1), 1),
            "programs compiled": m["compiles"] if device == "tpu" else 0,
            "flushes": m["flushes"] if device == "tpu" else 0,
            "replays": m["replays"] if device == "tpu" else 0,
            "last loss": round(last, 5),
        }

    return MODES, train


@app.cell
def _(MODES, batch_slider, train):
    results = [train(_mode, batch_slider.value) for _mode in MODES]
    return (results,)


@app.cell
def _(mo, results):
    mo.vstack(
        [
            mo.ui.table(results, selection=None),
            mo.md(
                "The last loss is the same in every mode: the modes change how the work "
                "is scheduled, not what is computed."
            ),
        ]
    )
    return


@app.cell
def _(plt, results):
    _fig, _ax = plt.subplots(figsize=(7, 3.5))
    _names = [r["mode"] for r in results]
    _bars = _ax.bar(_names, [r["steps/s"] for r in results], color=["grey", "C0", "C1", "C2", "C3"])
    _ax.bar_label(_bars, fmt="%.0f")
    _ax.set_ylabel("training steps / s (higher is better)")
    _ax.set_title("Small MLP, measured live on this machine")
    _ax.tick_params(axis="x", labelrotation=15)
    _fig.tight_layout()
    _fig
    return


@app.cell
def _(mo):
    mo.md(r"""
    How to read it: strict eager pays a small launch cost per op; debug eager
    adds a wait after every op (use it to find *where* an error happens, not for
    speed); fused eager and `torch.compile` run far fewer, larger programs. On a
    real accelerator, bigger programs matter even more, because XLA can fuse
    work across ops. Numbers on this CPU-only machine vary from run to run.

    ## Look inside one mode

    Pick a mode to train it for a few steps and see its metrics report: how many
    programs ran, flushes and their reasons (fused eager), captured graphs and
    replays (`torch.compile`).
    """)
    return


@app.cell
def _(MODES, mo):
    mode_pick = mo.ui.dropdown(options=list(MODES)[1:], value="fused eager", label="mode")
    mode_pick
    return (mode_pick,)


@app.cell
def _(batch_slider, mo, mode_pick, torch_tpu, train):
    _row = train(mode_pick.value, batch_slider.value, steps=5)
    mo.vstack(
        [
            mo.md(f"**{mode_pick.value}**, batch {batch_slider.value}: {_row['steps/s']} steps/s over 5 steps"),
            mo.plain_text(torch_tpu.debug.metrics_report()),
        ]
    )
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Which one to use

    - Start in **strict eager**: it behaves like PyTorch on CUDA.
    - Switch to **debug eager** (`TORCH_TPU_LAUNCH_BLOCKING=1`) when an error or
      NaN needs to point at the line that caused it.
    - Try **fused eager** for training loops with no code changes: each step
      becomes one program. Avoid `.item()` or `print` inside the step; each one
      cuts the graph (watch the `host read` flush reason).
    - Use **`torch.compile(..., backend="tpu")`** for the fastest steady state;
      the first call costs more (dynamo tracing plus compiling), and a new input
      shape means a new graph.
    """)
    return


@app.cell
def _(torch_tpu):
    torch_tpu.cache.flush()  # write this notebook's programs to the disk cache now
    return


if __name__ == "__main__":
    app.run()
