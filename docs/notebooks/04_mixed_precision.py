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
    # 4. Mixed precision

    TPUs do matrix products fastest in **bfloat16**: the same 8-bit exponent as
    float32 (so the same range, no overflow worries) but only 8 bits of mantissa.
    Automatic mixed precision runs the products in bfloat16 and keeps the
    sensitive parts (reductions, softmax, normalisation, losses) in float32.

    On `tpu`, `torch.autocast("tpu")` picks **bfloat16 by default**, so no
    `dtype=` is needed. `torch.amp.autocast("tpu")` and `torch.tpu.amp.autocast()`
    are the same thing under other names.
    """)
    return


@app.cell
def _():
    import matplotlib.pyplot as plt
    import torch

    import torch_tpu

    _ = torch.manual_seed(0)
    return plt, torch, torch_tpu


@app.cell
def _(torch):
    print("default autocast dtype for tpu:", torch.get_autocast_dtype("tpu"))
    _x = torch.randn(4, 8, device="tpu")
    _w = torch.randn(8, 8, device="tpu")
    with torch.autocast("tpu"):
        print("torch.autocast('tpu'):        ", (_x @ _w).dtype, "| enabled:", torch.is_autocast_enabled("tpu"))
    with torch.amp.autocast("tpu", dtype=torch.bfloat16):
        print("torch.amp.autocast(...bf16):  ", (_x @ _w).dtype)
    with torch.tpu.amp.autocast():
        print("torch.tpu.amp.autocast():     ", (_x @ _w).dtype)
    print("outside autocast:             ", (_x @ _w).dtype)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Which ops run in bfloat16?

    tpu uses the same per-op lists as CUDA: matrix products and convolutions are
    cast down to bfloat16; ops that lose accuracy in low precision (softmax,
    `exp`, sums, norms, losses) are computed in float32 even when their input is
    bfloat16; simple elementwise ops keep their input's dtype, and mixing
    dtypes promotes to the wider one. PyTorch's CPU autocast uses a shorter
    float32 list, which the last column shows. Each row starts from
    `h = linear(x, w)` computed under autocast, so `h` is bfloat16.
    """)
    return


@app.cell
def _(mo, torch):
    def _dtypes(device):
        _x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0)).to(device)
        _w = torch.randn(16, 16, generator=torch.Generator().manual_seed(1)).to(device)
        _t = torch.zeros(8, dtype=torch.long, device=device)
        with torch.autocast(device, dtype=torch.bfloat16):
            h = torch.nn.functional.linear(_x, _w)
            _ops = {
                "linear(x, w)": h,
                "h @ h.T": h @ h.T,
                "relu(h)": torch.relu(h),
                "h + 1": h + 1,
                "h + x  (x is float32)": h + _x,
                "softmax(h)": torch.softmax(h, -1),
                "log_softmax(h)": torch.log_softmax(h, -1),
                "layer_norm(h)": torch.nn.functional.layer_norm(h, (16,)),
                "exp(h)": torch.exp(h),
                "h.sum()": h.sum(),
                "h.norm()": h.norm(),
                "cross_entropy(h, t)": torch.nn.functional.cross_entropy(h, _t),
            }
        return {_k: str(_v.dtype).removeprefix("torch.") for _k, _v in _ops.items()}

    _tpu, _cpu = _dtypes("tpu"), _dtypes("cpu")
    mo.ui.table(
        [{"op (under autocast)": _k, "tpu": _tpu[_k], "PyTorch CPU": _cpu[_k]} for _k in _tpu],
        selection=None,
        page_size=20,
    )
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## float32 matmul precision

    Outside autocast, `torch.set_float32_matmul_precision` tells torch_tpu how
    precisely to compute float32 products: `"highest"` (the default), `"high"`
    and `"medium"` map to XLA's HIGHEST, HIGH and DEFAULT precision. On a TPU
    the lower settings use bfloat16 passes in the matrix unit; XLA:CPU computes
    every float32 product fully, so on this machine the three give the same
    numbers. Each setting is its own program, though: the first product under
    each setting needs a new program, and going back to `"highest"` reuses the
    first one. PyTorch's CPU backend is shown for comparison.
    """)
    return


@app.cell
def _(mo, torch, torch_tpu):
    _g = torch.Generator().manual_seed(0)
    _a, _b = torch.randn(256, 256, generator=_g), torch.randn(256, 256, generator=_g)
    _ref = _a.double() @ _b.double()
    _rows = []
    for _p in ("highest", "high", "medium", "highest"):
        torch.set_float32_matmul_precision(_p)
        torch_tpu.debug.reset_metrics()
        _t = (_a.to("tpu") @ _b.to("tpu")).cpu()
        _m = torch_tpu.debug.metrics()
        _rows.append(
            {
                "precision": torch.get_float32_matmul_precision(),
                "tpu max abs error": f"{(_t.double() - _ref).abs().max().item():.2e}",
                "new tpu programs (memory-cache misses)": _m["cache_misses"],
                "tpu memory-cache hits": _m["cache_hits"],
                "CPU max abs error": f"{((_a @ _b).double() - _ref).abs().max().item():.2e}",
            }
        )
    torch.set_float32_matmul_precision("highest")  # back to the default
    mo.ui.table(_rows, selection=None)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## How much accuracy does bfloat16 cost?

    The error of a matrix product against a float64 reference, as the inner
    dimension grows: float32 on tpu, autocast bfloat16 on tpu, and autocast
    bfloat16 on PyTorch CPU. Inputs are rounded to bfloat16 while the sums are
    accumulated in float32, so the error comes mostly from rounding the inputs;
    the two bfloat16 lines lie on top of each other.
    """)
    return


@app.cell
def _(plt, torch):
    def _rel_err(out, ref):
        return ((out.double().cpu() - ref).norm() / ref.norm()).item()

    inner = [32, 128, 512, 2048]
    errors = {"tpu float32": [], "tpu autocast bf16": [], "CPU autocast bf16": []}
    for _k in inner:
        _g = torch.Generator().manual_seed(_k)
        _a, _b = torch.randn(64, _k, generator=_g), torch.randn(_k, 64, generator=_g)
        _ref = _a.double() @ _b.double()
        _ta, _tb = _a.to("tpu"), _b.to("tpu")
        errors["tpu float32"].append(_rel_err(_ta @ _tb, _ref))
        with torch.autocast("tpu"):
            errors["tpu autocast bf16"].append(_rel_err(_ta @ _tb, _ref))
        with torch.autocast("cpu", dtype=torch.bfloat16):
            errors["CPU autocast bf16"].append(_rel_err(_a @ _b, _ref))

    _fig, _ax = plt.subplots(figsize=(6, 3.5))
    for (_name, _e), _m in zip(errors.items(), ["o", "s", "x"]):
        _ax.plot(inner, _e, marker=_m, label=_name)
    _ax.set_xscale("log", base=2)
    _ax.set_yscale("log")
    _ax.set_xlabel("inner dimension k of (64×k) @ (k×64)")
    _ax.set_ylabel("relative error vs float64")
    _ax.legend()
    _fig.tight_layout()
    _fig
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Training under autocast

    Wrap the forward pass and the loss in autocast; call `backward()` and the
    optimizer outside it. Parameters and their gradients stay float32, so with
    bfloat16 no `GradScaler` is needed (`torch.amp.GradScaler("tpu")` exists
    for float16). The same MLP trains on the same data three ways.
    """)
    return


@app.cell
def _(plt, torch):
    def _train(device, amp, steps=30):
        _g = torch.Generator().manual_seed(0)
        _x = torch.randn(128, 16, generator=_g)
        _y = (_x[:, :4].sum(1, keepdim=True) > 0).float()
        torch.manual_seed(0)
        _model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1)).to(device)
        _opt = torch.optim.SGD(_model.parameters(), lr=0.5)
        _x, _y = _x.to(device), _y.to(device)
        _losses = []
        for _ in range(steps):
            _opt.zero_grad()
            with torch.autocast(device, dtype=torch.bfloat16, enabled=amp):
                _loss = torch.nn.functional.binary_cross_entropy_with_logits(_model(_x), _y)
            _loss.backward()
            _opt.step()
            _losses.append(_loss.detach())
        _grad_dtype = str(_model[0].weight.grad.dtype).removeprefix("torch.")
        return torch.stack(_losses).cpu().tolist(), _grad_dtype

    curves = {
        "CPU float32": _train("cpu", False),
        "tpu float32": _train("tpu", False),
        "tpu autocast bf16": _train("tpu", True),
    }
    _fig, (_a1, _a2) = plt.subplots(1, 2, figsize=(10, 3.5))
    _cpu = curves["CPU float32"][0]
    for (_name, (_l, _gd)), _style in zip(curves.items(), ["-", "--", ":"]):
        _a1.plot(_l, _style, label=f"{_name} (grads {_gd})", linewidth=2)
        if _name != "CPU float32":
            _a2.plot([max(abs(a - b), 1e-10) for a, b in zip(_l, _cpu)], _style, label=_name, linewidth=2)
    _a1.set(xlabel="step", ylabel="loss", title="loss curves (they overlap)")
    _a2.set(
        xlabel="step", ylabel="|loss - CPU loss| (0 drawn at 1e-10)", yscale="log", title="difference from CPU float32"
    )
    _a1.legend()
    _a2.legend()
    _fig.tight_layout()
    _fig
    return (curves,)


@app.cell
def _(curves, mo):
    _ref = curves["CPU float32"][0]
    _diff = {_n: max(abs(a - b) for a, b in zip(_l, _ref)) for _n, (_l, _) in curves.items()}
    mo.md(
        f"""
    Largest loss difference from CPU float32 over the run:
    tpu float32 **{_diff["tpu float32"]:.1e}** (rounding order only),
    tpu bfloat16 autocast **{_diff["tpu autocast bf16"]:.1e}**.
    bfloat16 tracks float32 closely; the gap is the price of 8-bit mantissas.
    """
    )
    return


@app.cell
def _(torch_tpu):
    torch_tpu.cache.flush()  # write this notebook's programs to the disk cache now
    return


if __name__ == "__main__":
    app.run()
