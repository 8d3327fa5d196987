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
    # 10. Loops that compile once

    A CUDA-style backend runs a Python loop op by op, and a compiler that
    traces it unrolls it: a 24-layer model becomes 24 copies of its block, and
    every new trip count is a new program. XLA has loops of its own
    (`stablehlo.while`), and tpu lowers PyTorch's control-flow operators to
    them, in strict eager, fused eager and under `torch.compile` alike:

    - `torch.cond`: only the branch taken runs, and the predicate never
      leaves the device;
    - `while_loop`: the trip count is read on the device;
    - `scan` and `map`: one body, with gradients (PyTorch's backward of a scan
      is itself a scan);
    - `torch_tpu.scan_layers`: a stack of identical blocks as one loop.

    `docs/control_flow.md` has the details and what falls back to running op
    by op. Chapter 11 covers kernels written in JAX, chapter 12 export.
    """)
    return


@app.cell
def _(mo):

    import torch
    import torch.nn.functional as F

    import torch_tpu
    from torch_tpu import _control_flow as control_flow
    from torch_tpu import debug

    mo.md(f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__} on **{torch.tpu.get_device_name()}**")
    return F, control_flow, debug, torch, torch_tpu


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
    ## 2. A branch on data, with gradients

    `torch.cond(pred, true_fn, false_fn, operands)` picks a branch from a
    tensor. On tpu the predicate stays on the device and only the branch
    taken runs. Below, a compiled training loss switches branch from call to
    call, and each gradient equals PyTorch's on the CPU: the program does not
    remember the branch of its first call.
    """)
    return


@app.cell
def _(mo, torch):
    def loss_fn(p, x):
        return torch.cond(p.sum() > 0, lambda x: (x.sin() * 2).sum(), lambda x: (x.cos() - 1).sum(), (x,))

    _compiled = torch.compile(loss_fn, backend="tpu")
    _x = torch.randn(6)
    _rows = []
    for _sign in (1.0, -1.0, 1.0):
        _p = torch.full((3,), _sign)
        _xc = _x.clone().requires_grad_()
        loss_fn(_p, _xc).backward()
        _xt = _x.to("tpu").requires_grad_()
        _compiled(_p.to("tpu"), _xt).backward()
        torch.testing.assert_close(_xt.grad.cpu(), _xc.grad)
        _branch = "sin" if _sign > 0 else "cos"
        _rows.append(f"| {_sign:+.0f} | {_branch} | {(_xt.grad.cpu() - _xc.grad).abs().max().item():.1e} |")
    mo.md("| sign of p | branch | max gradient difference from CPU |\n|---|---|---|\n" + "\n".join(_rows))
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## 3. `scan_layers`: a deep stack as one loop

    `torch_tpu.scan_layers(blocks, x)` computes what `for b in blocks: x = b(x)`
    computes, with the blocks' weights stacked and one block traced as the
    loop body. Gradients reach every block's own parameters, so optimizers and
    checkpoints see the model unchanged. Below, the same 8-block stack, run
    both ways under `torch.compile`, trains to the same loss as on the CPU;
    the scanned step holds two loops (the blocks' forward and their
    backward) where the unrolled one holds eight copies of each. How compile
    time and speed change with depth is in `docs/benchmarks.md`
    (`python -m torch_tpu.bench depth`).

    `torch_tpu.ScannedLayers(blocks)` goes one step further: it holds the
    weights stacked (one `[8, ...]` parameter per parameter of the block), so
    the optimizer steps 6 tensors instead of 48 and nothing is stacked per
    call. Its `state_dict()` keeps the module list's names. It trains to the
    same loss too (the last row).
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
        if scanned == "stacked":
            blocks = torch_tpu.ScannedLayers(blocks)
        opt = torch.optim.SGD(blocks.parameters(), lr=0.05)

        def fwd(x):
            if scanned == "stacked":
                return blocks(x)
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
    _stacked, _ops_k = train(copy.deepcopy(_ref), "tpu", scanned="stacked")
    torch.testing.assert_close(torch.tensor(_scanned), torch.tensor(_cpu), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(torch.tensor(_stacked), torch.tensor(_cpu), rtol=1e-4, atol=1e-5)
    mo.md(f"""
    | | loss after 5 steps | loops recorded |
    |---|---|---|
    | CPU, eager | {_cpu[-1]:.6f} | |
    | tpu, unrolled | {_unrolled[-1]:.6f} | {_ops_u} |
    | tpu, `scan_layers` | {_scanned[-1]:.6f} | {_ops_s} |
    | tpu, `ScannedLayers` | {_stacked[-1]:.6f} | {_ops_k} |
    """)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What to take away

    - Write loops and branches with `torch.cond`, `while_loop` and `scan`; on
      tpu each is one loop of the program, in eager and under
      `torch.compile`, and a new trip count or branch compiles nothing.
    - Gradients through them equal PyTorch's on the CPU, whichever branch a
      call takes.
    - `torch_tpu.scan_layers(blocks, x)` keeps a deep stack's program one block
      big; the weights stay the blocks' own. `torch_tpu.ScannedLayers(blocks)`
      holds them stacked, so the optimizer's part stops growing with depth
      too.
    """)
    return


if __name__ == "__main__":
    app.run()
