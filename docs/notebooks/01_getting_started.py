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
    # 1. Getting started

    torch_tpu adds a new device to PyTorch called `"tpu"`. Under the hood every
    operation is turned into a small XLA program, compiled once, cached, and run
    through a PJRT plugin. On a TPU VM that plugin drives the TPU; on this machine
    it is XLA:CPU, so everything below runs anywhere.

    This chapter covers the device itself, tensors and modules on it, the fact
    that work runs *asynchronously*, and the metrics that tell you what happened.
    """)
    return


@app.cell
def _():
    import time

    import matplotlib.pyplot as plt
    import torch

    import torch_tpu

    _ = torch.manual_seed(0)
    return plt, time, torch, torch_tpu


@app.cell
def _(mo):
    mo.md(r"""
    ## The device

    `import torch_tpu` (or plain `import torch`, which autoloads it) registers the
    device. `torch.tpu` mirrors `torch.cuda`, and the generic `torch.accelerator`
    API sees it too.
    """)
    return


@app.cell
def _(mo, torch):
    _rows = {
        "torch.tpu.is_available()": torch.tpu.is_available(),
        "torch.tpu.device_count()": torch.tpu.device_count(),
        "torch.tpu.current_device()": torch.tpu.current_device(),
        "torch.accelerator.current_accelerator()": torch.accelerator.current_accelerator(),
        "torch.accelerator.device_count()": torch.accelerator.device_count(),
        "torch.tpu.get_device_properties()": torch.tpu.get_device_properties(),
    }
    mo.md(
        f"Device name: {torch.tpu.get_device_name()}\n\n" + "\n".join(f"- `{_k}` → `{_v}`" for _k, _v in _rows.items())
    )
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Tensors on the device

    Pass `device="tpu"` to any factory function, or move an existing tensor with
    `.to("tpu")` (or `.tpu()`). Printing a tensor or calling `.cpu()` copies the
    values back to the host.
    """)
    return


@app.cell
def _(torch):
    a = torch.arange(6, dtype=torch.float32, device="tpu").reshape(2, 3)
    b = torch.ones(2, 3).to("tpu")
    c = (a * 2 + b).sum(dim=1)
    print(a.device, a.is_tpu, c.dtype)
    print(c)  # printing reads the value back from the device
    print(c.cpu())
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## A model on the device

    `module.to("tpu")` moves parameters and buffers, exactly as with CUDA. The
    inputs must live on the same device. Here a tiny MLP runs one training step.
    """)
    return


@app.cell
def _(torch):
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1)).to("tpu")
    _opt = torch.optim.SGD(model.parameters(), lr=0.1)
    _x, _y = torch.randn(32, 8, device="tpu"), torch.randn(32, 1, device="tpu")
    _loss = torch.nn.functional.mse_loss(model(_x), _y)
    _loss.backward()
    _opt.step()
    print("parameters on:", {p.device for p in model.parameters()})
    print("loss:", _loss.item())
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Asynchronous execution

    An op on `tpu` *enqueues* its program and returns at once; the Python thread
    keeps going while the device works. Python only waits when it needs a value:
    `.cpu()`, `.item()`, `print(...)`, or an explicit `torch.tpu.synchronize()`.

    The cell below launches eight 1024×1024 matrix products, each followed by a
    `tanh` (16 ops), and times two phases: the loop itself (enqueueing) and the
    wait in `synchronize()`. A warm-up run first compiles every program.
    """)
    return


@app.cell
def _(mo, time, torch):
    _w = torch.randn(1024, 1024, device="tpu") / 32

    def _chain(y):
        for _ in range(8):
            y = torch.tanh(y @ _w)
        return y

    for _ in range(2):  # warm-up: compile and cache the programs
        _chain(_w).sum().item()

    _t0 = time.perf_counter()
    _out = _chain(_w)
    _t1 = time.perf_counter()
    torch.tpu.synchronize()
    _t2 = time.perf_counter()
    _val = _out.sum().item()  # .item() waits too
    _t3 = time.perf_counter()
    mo.md(
        f"""
    | Phase | Time |
    |---|---|
    | enqueue 16 ops (the Python loop) | {(_t1 - _t0) * 1e3:.2f} ms |
    | `torch.tpu.synchronize()` (waiting for the device) | {(_t2 - _t1) * 1e3:.2f} ms |
    | one more `sum()` + `.item()` | {(_t3 - _t2) * 1e3:.2f} ms |

    The loop returns long before the work is done: almost all of the time is
    spent in the wait. When you time tpu code, always synchronize (or read a
    value) before stopping the clock.
    """
    )
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Time per op: tpu vs CPU

    Each op pays a small fixed cost (dispatch, cache lookup, launch) plus the
    real work. The chart times a square matrix product, synchronizing each time,
    for a few sizes on `tpu` and on plain PyTorch CPU. PyTorch runs on one
    thread here: its thread pool stalls badly when the machine's cores are busy
    (as on a shared CI runner), which would distort the picture.
    """)
    return


@app.cell
def _(plt, time, torch):
    def _time_matmul(n, device, reps=10):
        _x = torch.randn(n, n, device=device)
        for _ in range(2):
            (_x @ _x).sum().item()
        _t = time.perf_counter()
        _ys = [_x @ _x for _ in range(reps)]  # keep every result alive until the wait
        if device == "tpu":
            torch.tpu.synchronize()
        return (time.perf_counter() - _t) / reps * 1e3

    sizes = [32, 64, 128, 256, 512]
    _threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        op_times = {d: [_time_matmul(n, d) for n in sizes] for d in ("tpu", "cpu")}
    finally:
        torch.set_num_threads(_threads)
    _fig, _ax = plt.subplots(figsize=(6, 3.5))
    for _d, _ms in op_times.items():
        _ax.plot(sizes, _ms, marker="o", label="PyTorch CPU, 1 thread" if _d == "cpu" else _d)
    _ax.set_xscale("log", base=2)
    _ax.set_yscale("log")
    _ax.set_xlabel("matrix size n (n×n @ n×n)")
    _ax.set_ylabel("ms per matmul")
    _ax.set_title("Time per matmul, measured live")
    _ax.legend()
    _fig.tight_layout()
    _fig
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What ran: the metrics report

    torch_tpu counts what it does: ops dispatched, programs compiled (and how
    long that took, per op), cache hits per tier, transfers between host and
    device. `torch_tpu.debug.reset_metrics()` starts the counters over,
    `metrics_report()` prints them, and `metrics()` returns them as a dict.

    Below, the counters are reset and the same four ops run twice on a 5×7
    tensor. The first pass needs their programs (compiled, or loaded from the
    disk cache if an earlier run compiled them); the second pass is all
    memory-cache hits.
    """)
    return


@app.cell
def _(mo, torch, torch_tpu):
    torch_tpu.debug.reset_metrics()
    for _ in range(2):
        _x = torch.randn(5, 7, device="tpu")
        (_x.exp() + 1).log().mean().item()
    _m = torch_tpu.debug.metrics()
    _keys = ["ops_dispatched", "executions", "compiles", "compile_ms", "cache_hits", "cache_misses"]
    mo.vstack(
        [
            mo.plain_text(torch_tpu.debug.metrics_report()),
            mo.md("The same counters from `torch_tpu.debug.metrics()`, a plain dict:"),
            mo.ui.table([{"key": _k, "value": round(_m[_k], 1)} for _k in _keys], selection=None),
        ]
    )
    return


@app.cell
def _(mo):
    mo.md(r"""
    Things to remember:

    - `"tpu"` works like `"cuda"`: factory `device=` arguments, `.to()`, `Module.to()`.
    - Ops are asynchronous; synchronize before you read a clock.
    - The first run of a shape compiles; later runs hit the cache (memory, then
      disk, see chapter 3).
    - `torch_tpu.debug.metrics_report()` is the first thing to look at when
      something is slow.
    """)
    return


@app.cell
def _(torch_tpu):
    # Write this notebook's programs to the disk cache now (see chapter 3).
    torch_tpu.cache.flush()
    return


if __name__ == "__main__":
    app.run()
