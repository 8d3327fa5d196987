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
    # 10. Loops, JAX kernels and export

    Three things an XLA backend does that a CUDA-style one does not:

    1. **Loops that compile once.** `torch.cond`, `while_loop`, `scan` and
       `torch_tpu.scan_layers` become `stablehlo.while` loops of the program,
       so a longer loop or a deeper stack adds no copies of the body to the program
       (`docs/control_flow.md`).
    2. **Kernels written in JAX or Pallas**, inlined into tpu programs, with
       gradients from `jax.vjp` (`docs/custom_kernels.md`).
    3. **Export to StableHLO**: a `torch.export` program as a module that runs
       on tpu and, serialized, in JAX (`docs/export.md`).
    """)
    return


@app.cell
def _(mo):

    import numpy as np
    import torch
    import torch.nn.functional as F

    import torch_tpu
    from torch_tpu import _control_flow as control_flow
    from torch_tpu import debug

    mo.md(f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__} on **{torch.tpu.get_device_name()}**")
    return F, control_flow, debug, np, torch, torch_tpu


@app.cell
def _(mo):
    mo.md(r"""
    ## 1. A loop whose trip count is data

    `while_loop(cond_fn, body_fn, carried)` runs `body_fn` while `cond_fn` holds.
    On tpu it is one loop of one program: the count is read on the device, so
    a new count compiles nothing. Below, Newton's method for a square root
    runs until every element has converged, and the count of programs
    fetched stays the same on the second call with other data.
    """)
    return


@app.cell
def _(debug, mo, torch):
    from torch._higher_order_ops.while_loop import while_loop

    def newton_sqrt(a):
        def cond(i, x):
            return ((x * x - a).abs() > 1e-5 * a).any() & (i < 50)

        def body(i, x):
            return i + 1, 0.5 * (x + a / x)

        return while_loop(cond, body, (torch.zeros((), dtype=torch.int64, device=a.device), a.clone()))

    _rows = []
    for _a in (torch.tensor([2.0, 9.0, 1e4]), torch.tensor([3.0, 0.25, 7e7])):
        _before = debug.metrics()["cache_misses"]
        _steps, _root = newton_sqrt(_a.to("tpu"))
        torch.testing.assert_close(_root.cpu(), _a.sqrt(), rtol=1e-5, atol=0)
        _rows.append(f"| {_a.tolist()} | {_steps.item()} | {_root.cpu().tolist()} | "
                     f"{debug.metrics()['cache_misses'] - _before} |")
    mo.md("| input | iterations | square roots | programs fetched |\n|---|---|---|---|\n" + "\n".join(_rows))
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## 2. `scan_layers`: a deep stack as one loop

    `torch_tpu.scan_layers(blocks, x)` computes what `for b in blocks: x = b(x)`
    computes, with the blocks' weights stacked and one block traced as the
    loop body. Gradients reach every block's own parameters, so optimizers and
    checkpoints see the model unchanged. Below, the same 8-block stack, run
    both ways under `torch.compile`, trains to the same loss as on the CPU;
    the scanned step holds two loops (the blocks' forward and their
    backward) where the unrolled one holds eight copies of each. How compile
    time and speed change with depth is in `docs/benchmarks.md`
    (`python -m torch_tpu.bench depth`).
    """)
    return


@app.cell
def _(F, control_flow, mo, torch, torch_tpu):
    class Block(torch.nn.Module):
        def __init__(self, d):
            super().__init__()
            self.ln = torch.nn.LayerNorm(d)
            self.fc = torch.nn.Linear(d, 4 * d)
            self.out = torch.nn.Linear(4 * d, d)

        def forward(self, x):
            return x + self.out(F.gelu(self.fc(self.ln(x))))

    torch.manual_seed(0)
    _ref = torch.nn.ModuleList(Block(32) for _ in range(8))
    _x, _y = torch.randn(16, 32), torch.randn(16, 32)

    def train(blocks, device, scanned):
        blocks = blocks.to(device)
        opt = torch.optim.SGD(blocks.parameters(), lr=0.05)

        def fwd(x):
            if scanned:
                return torch_tpu.scan_layers(blocks, x)
            for b in blocks:
                x = b(x)
            return x

        def step(x, y):
            loss = F.mse_loss(fwd(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        if device == "tpu":
            step = torch.compile(step, backend="tpu")
        loops = control_flow.stats["loops"]["scan"]
        losses = [step(_x.to(device), _y.to(device)).item() for _ in range(5)]
        return losses, control_flow.stats["loops"]["scan"] - loops

    import copy

    _cpu, _ = train(copy.deepcopy(_ref), "cpu", scanned=False)
    _unrolled, _ops_u = train(copy.deepcopy(_ref), "tpu", scanned=False)
    _scanned, _ops_s = train(copy.deepcopy(_ref), "tpu", scanned=True)
    torch.testing.assert_close(torch.tensor(_scanned), torch.tensor(_cpu), rtol=1e-4, atol=1e-5)
    mo.md(f"""
    | | loss after 5 steps | loops recorded |
    |---|---|---|
    | CPU, eager | {_cpu[-1]:.6f} | |
    | tpu, unrolled | {_unrolled[-1]:.6f} | {_ops_u} |
    | tpu, `scan_layers` | {_scanned[-1]:.6f} | {_ops_s} |
    """)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## 3. A kernel written in JAX

    `custom_jax_kernel` makes a JAX function an op on tpu tensors. Its
    StableHLO is inlined into the program, and its gradient comes from
    `jax.vjp`. Here, RMSNorm, checked against PyTorch on the CPU, forward and
    backward.
    """)
    return


@app.cell
def _(mo, torch):
    import jax

    from torch_tpu.pallas import custom_jax_kernel

    @custom_jax_kernel(static_argnums=(2,))
    def rms_norm(x, w, eps):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * w

    _x = torch.randn(4, 16, requires_grad=True)
    _w = torch.randn(16, requires_grad=True)
    _xt, _wt = (_t.detach().to("tpu").requires_grad_() for _t in (_x, _w))
    rms_norm(_xt, _wt, 1e-6).square().sum().backward()
    _ref = _x * torch.rsqrt(_x.pow(2).mean(-1, keepdim=True) + 1e-6) * _w
    _ref.square().sum().backward()
    torch.testing.assert_close(_xt.grad.cpu(), _x.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(_wt.grad.cpu(), _w.grad, rtol=1e-4, atol=1e-5)
    mo.md("RMSNorm in JAX on tpu: forward and both gradients equal PyTorch's on the CPU.")
    return (jax,)


@app.cell
def _(mo):
    mo.md(r"""
    ## 4. Export to StableHLO, serve with JAX

    `torch_tpu.export.to_stablehlo` takes what `torch.export.export` returns
    and gives the module, its weights and its signature. The module runs on
    tpu, and `jax_exported()` wraps it for `jax.export`: serialized, it loads
    anywhere JAX runs, without PyTorch.
    """)
    return


@app.cell
def _(jax, mo, np, torch):
    from torch_tpu.export import to_stablehlo

    torch.manual_seed(0)
    _model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).eval()
    _x = torch.randn(3, 8)
    _m = to_stablehlo(torch.export.export(_model, (_x,)))
    _blob = _m.jax_exported().serialize()
    _served = jax.export.deserialize(_blob).call(*[_w.numpy() for _w in _m.weights.values()], _x.numpy())
    with torch.no_grad():
        _expected = _model(_x)
    torch.testing.assert_close(torch.from_numpy(np.array(_served[0])), _expected)
    torch.testing.assert_close(_m(_x.to("tpu")).cpu(), _expected)
    _sig = "\n".join(f"| {_s.kind} | `{_s.name}` | {_s.shape} |" for _s in _m.inputs)
    mo.md(
        "The module's `@main` takes:\n\n| kind | name | shape |\n|---|---|---|\n" + _sig
        + f"\n\n{len(_m.text.splitlines())} lines of StableHLO, {len(_blob):,} bytes serialized; JAX's and "
        "tpu's results equal PyTorch's on the CPU."
    )
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What to take away

    - Write loops with `torch.cond`, `while_loop` and `scan`; on tpu each is
      one loop of the program, in eager and under `torch.compile`.
    - `torch_tpu.scan_layers(blocks, x)` keeps a deep stack's program one block
      big; the weights stay the blocks' own.
    - `torch_tpu.pallas.custom_jax_kernel` runs JAX (and Pallas) code as a tpu op
      with gradients.
    - `torch_tpu.export.to_stablehlo` turns a `torch.export` program into
      StableHLO that tpu and JAX both run.
    """)
    return


if __name__ == "__main__":
    app.run()
