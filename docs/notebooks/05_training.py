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
    # 5. Training a real model

    This chapter trains a small GPT from scratch on the `tpu` device and
    watches it learn. The model and the task come from the repository's
    minGPT example (`examples/mingpt/train.py`): a decoder-only transformer
    reads six digits and must write them out again in sorted order.

        input   3 9 0 1 1 5 | 0 1 1 3 5 9
        loss    only on the positions that predict the sorted half

    Nothing here is special to the accelerator. It is the training loop you
    would write for CPU or CUDA, with `"tpu"` as the device.
    """)
    return


@app.cell
def _(mo):
    import importlib.util
    import pathlib
    import sys
    import time

    import torch
    import torch.nn.functional as F

    import torch_tpu

    # The repository root is two folders above this notebook.
    root = pathlib.Path(mo.notebook_dir() or pathlib.Path(__file__).parent).resolve().parents[1]
    if str(root) not in sys.path:
        sys.path.insert(0, str(root))
    # examples/mingpt/train.py is a script, not a package: load it as a module.
    _spec = importlib.util.spec_from_file_location("mingpt_train", root / "examples" / "mingpt" / "train.py")
    mingpt = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(mingpt)

    device = torch.device("tpu")
    mo.md(f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, running on **{torch.tpu.get_device_name()}**")
    return F, device, mingpt, time, torch, torch_tpu


@app.cell
def _(mingpt, mo):
    task = mingpt.SortTask(digits=10, length=6, held_out=200, seed=0)
    _x, _y = task.train_batch(2)
    mo.md(f"""
    ## The data

    `SortTask` draws random digit sequences and keeps {len(task.test)} of them
    aside: the model never trains on them, and at the end it has to sort them.
    A training example is the input digits followed by their sorted copy.
    The targets are the inputs shifted by one, with `-100` (ignored by
    `cross_entropy`) where the model would be predicting the unsorted part:

    | | |
    |---|---|
    | inputs | `{_x[0].tolist()}` |
    | targets | `{_y[0].tolist()}` |
    """)
    return (task,)


@app.cell
def _(mo):
    steps = mo.ui.slider(50, 400, step=50, value=200, label="training steps", show_value=True)
    mode = mo.ui.dropdown(["eager", "fused eager"], value="eager", label="execution mode")
    mo.vstack(
        [
            mo.md(
                "## Training\n\nMove the slider to train longer, or switch to fused eager (the whole step runs as "
                "one XLA program; see the execution-modes chapter). The cells below rerun by themselves. The batch "
                "size stays 64: a new shape means every op compiles once more."
            ),
            mo.hstack([steps, mode], justify="start"),
        ]
    )
    return mode, steps


@app.cell
def _(F, device, mingpt, mo, mode, steps, task, time, torch, torch_tpu):
    import matplotlib.pyplot as plt

    def loss_plot(points, total):
        _fig, _ax = plt.subplots(figsize=(6, 3))
        if points:
            _ax.plot(*zip(*points), marker="o", markersize=3)
        _ax.set(xlim=(0, total), xlabel="step", ylabel="cross-entropy loss", title="minGPT learning to sort (tpu)")
        _ax.grid(alpha=0.3)
        _fig.tight_layout()
        plt.close(_fig)
        return _fig

    torch.manual_seed(0)
    model = mingpt.GPT(vocab=10, block_size=11, dim=64, heads=4, layers=2).to(device)
    _opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)
    _eager = torch.tpu.EagerMode.DEFER_AND_FUSE if mode.value == "fused eager" else torch.tpu.EagerMode.DEFER_NEVER
    torch_tpu.debug.reset_metrics()
    _pending, points = [], []
    model.train()
    _t0 = time.perf_counter()
    with torch.tpu.set_eager_mode(_eager):
        for _step in range(steps.value):
            _x, _y = task.train_batch(64)
            _logits = model(_x.to(device))
            _loss = F.cross_entropy(_logits.reshape(-1, 10), _y.to(device).reshape(-1), ignore_index=-100)
            _opt.zero_grad(set_to_none=True)
            _loss.backward()
            _opt.step()
            _pending.append((_step, _loss.detach()))  # no host read here: the loop never waits
            if _step == 0:
                torch.tpu.synchronize()
                first_step_s = time.perf_counter() - _t0
            if _step % 25 == 24 or _step == steps.value - 1:
                # Reading the losses is a sync point; do it only now and then.
                points += [(s, v.item()) for s, v in _pending]
                _pending = []
                mo.output.replace(loss_plot(points, steps.value))
    torch.tpu.synchronize()
    train_s = time.perf_counter() - _t0
    train_metrics = torch_tpu.debug.metrics()
    loss_plot(points, steps.value)
    return first_step_s, model, points, train_metrics, train_s


@app.cell
def _(first_step_s, mo, points, steps, train_metrics, train_s):
    _rate = (steps.value - 1) * 64 / max(train_s - first_step_s, 1e-9)
    mo.md(f"""
    The loss went from **{points[0][1]:.3f}** to **{points[-1][1]:.3f}** in {steps.value} steps,
    measured just now: {train_s:.1f} s in all, of which the first step took {first_step_s:.2f} s
    (that is where programs are compiled, or loaded from the compilation cache), then about
    {_rate:.0f} sequences per second.

    During training torch_tpu dispatched {train_metrics["ops_dispatched"]:,} ops and ran
    {train_metrics["executions"]:,} programs, compiled {train_metrics["compiles"]} new ones and took
    {train_metrics["cache_hits"]:,} from its cache. Reading the loss only every 25 steps matters:
    each read waits for the device, while the rest of the loop only queues work.
    """)
    return


@app.cell
def _(device, mingpt, mo, model, task, time, torch):
    model.eval()
    _t0 = time.perf_counter()
    # Greedy decoding: append the most likely next digit six times.
    _out = mingpt.sort_greedy(model, task.test.to(device)).cpu()
    _decode_s = time.perf_counter() - _t0
    _want = task.test.sort(dim=1).values
    _exact = (_out == _want).all(dim=1)
    accuracy = _exact.float().mean().item()
    _rows = [
        {"input": str(task.test[i].tolist()), "model": str(_out[i].tolist()), "correct": bool(_exact[i])}
        for i in range(8)
    ]
    mo.vstack(
        [
            mo.md(f"""
    ## How well did it learn?

    On the {len(task.test)} held-out sequences the model sorted **{accuracy:.0%}** exactly
    (decoding took {_decode_s:.1f} s; each new length compiles its programs once).
    The example script trains 500 steps by default and then sorts 100% (`examples/mingpt/README.md`).
    """),
            mo.ui.table(_rows, selection=None),
        ]
    )
    return (accuracy,)


@app.cell
def _(accuracy, mo):
    mo.md(rf"""
    ## What to take away

    - The loop is plain PyTorch: `.to("tpu")`, `AdamW`, `cross_entropy`, `backward()`.
    - Ops run asynchronously. The Python loop runs ahead of the device until something
      needs a value (`.item()`, `.cpu()`, `print`, `torch.tpu.synchronize()`), so read
      metrics sparingly.
    - The first step is slow because each op's program is compiled; later steps reuse
      them, and a restarted process loads them from the disk cache.
    - Final held-out accuracy this run: {accuracy:.1%}. For more, run the example script
      with `--mode fused` or `--mode compile`, or try the ResNet-18 example in `examples/resnet/`.
    """)
    return


if __name__ == "__main__":
    app.run()
