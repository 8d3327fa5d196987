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
    # 12. Export to StableHLO

    A trained model often has to leave PyTorch: to a serving system, to JAX,
    to a runtime with no Python. `torch_tpu.export.to_stablehlo` takes what
    `torch.export.export` returns and gives a StableHLO module, its weights
    and its signature. The module comes from the same lowerings the device
    runs, loops included, so what runs on tpu exports. It runs on tpu, and,
    serialized through `jax.export`, anywhere JAX runs. `docs/export.md` has
    the details.
    """)
    return


@app.cell
def _(mo):
    import jax
    import numpy as np
    import torch

    import torch_tpu
    from torch_tpu.export import to_stablehlo

    mo.md(f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, JAX {jax.__version__} "
          f"on **{torch.tpu.get_device_name()}**")
    return jax, np, to_stablehlo, torch


@app.cell
def _(mo):
    mo.md(r"""
    ## 1. A model, its module and its signature

    `@main` takes the weights first, then the inputs. `inputs` and `outputs`
    name each argument and result with its shape and dtype; `weights` holds
    the values, in `@main`'s order.
    """)
    return


@app.cell
def _(mo, to_stablehlo, torch):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.GELU(), torch.nn.Linear(32, 4)).eval()
    example = torch.randn(3, 8)
    module = to_stablehlo(torch.export.export(model, (example,)))
    with torch.no_grad():
        expected = model(example)
    torch.testing.assert_close(module(example.to("tpu")).cpu(), expected)
    _sig = "\n".join(f"| {_s.kind} | `{_s.name}` | {tuple(_s.shape)} | {_s.dtype} |"
                     for _s in [*module.inputs, *module.outputs])
    mo.md(
        "| kind | name | shape | dtype |\n|---|---|---|---|\n" + _sig
        + f"\n\nThe module is {len(module.text.splitlines())} lines of StableHLO; run on tpu "
        "with its own weights, it gives PyTorch's CPU result.\n\n```mlir\n"
        + "\n".join(module.text.splitlines()[:6]) + "\n...\n```"
    )
    return example, expected, module


@app.cell
def _(mo):
    mo.md(r"""
    ## 2. Serve it with JAX

    `jax_exported()` wraps the module as a `jax.export.Exported`. Its
    serialized bytes are what a server stores beside the weights;
    `jax.export.deserialize` loads them without PyTorch.
    """)
    return


@app.cell
def _(example, expected, jax, mo, module, np, torch):
    _blob = module.jax_exported().serialize()
    _served = jax.export.deserialize(_blob).call(*[_w.numpy() for _w in module.weights.values()], example.numpy())
    torch.testing.assert_close(torch.from_numpy(np.array(_served[0])), expected)
    mo.md(f"{len(_blob):,} bytes serialized; JAX's result equals PyTorch's on the CPU. "
          f"The portable artifact (`module.bytecode()`) is {len(module.bytecode()):,} bytes.")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## 3. A loop stays a loop

    A recurrent model written with `scan` exports as one `stablehlo.while`,
    not one copy of its step per time step, and it still matches the CPU.
    """)
    return


@app.cell
def _(mo, to_stablehlo, torch):
    from torch._higher_order_ops.scan import scan

    class Rnn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.5)

        def forward(self, h, xs):
            def step(h, x):
                h = torch.tanh(h @ self.w + x)
                return h, h.sum(-1)

            return scan(step, h, xs)[1]

    torch.manual_seed(0)
    _rnn = Rnn().eval()
    _h, _xs = torch.randn(2, 4), torch.randn(50, 2, 4)
    _m = to_stablehlo(torch.export.export(_rnn, (_h, _xs)))
    with torch.no_grad():
        torch.testing.assert_close(_m(_h.to("tpu"), _xs.to("tpu")).cpu(), _rnn(_h, _xs), rtol=1e-5, atol=1e-5)
    mo.md(f"50 time steps: the module holds **{_m.text.count('stablehlo.while')}** `stablehlo.while` and "
          f"{len(_m.text.splitlines())} lines in all.")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## 4. One module for every length

    Give a dynamic dimension a bound and the module takes it padded to the
    bound, with the real length as one more input; masks keep the padding out
    of every reduction. Here a sequence model's mean over the sequence, at
    three lengths, from one module.
    """)
    return


@app.cell
def _(mo, to_stablehlo, torch):
    class Pool(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            return torch.softmax(self.proj(x), dim=1).mul(x).mean(1)

    torch.manual_seed(0)
    _pool = Pool().eval()
    _seq = torch.export.Dim("seq", min=2, max=64)
    _m = to_stablehlo(torch.export.export(_pool, (torch.randn(2, 5, 8),), dynamic_shapes=({1: _seq},)))
    _rows = []
    for _n in (3, 20, 64):
        _x = torch.randn(2, _n, 8)
        with torch.no_grad():
            torch.testing.assert_close(_m(_x.to("tpu")).cpu(), _pool(_x), rtol=1e-5, atol=1e-5)
        _rows.append(f"| {_n} | equal to PyTorch on the CPU |")
    _d = _m.dynamic[0]
    mo.md(f"`{_d.name}` is bounded by **{_d.bound}**; @main takes the input as "
          f"{_m.inputs[len(_m.weights)].shape} and the real length as argument {_d.length_input}.\n\n"
          "| length | result |\n|---|---|\n" + "\n".join(_rows))
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What to take away

    - `torch_tpu.export.to_stablehlo(torch.export.export(model, args))` gives
      the module, its weights and a named signature.
    - The module runs on tpu and, through `jax.export`, in JAX without PyTorch.
    - Loops written with `scan`, `while_loop` or `torch.cond` stay loops.
    - A dynamic dimension with a bound (`Dim(max=...)`) gives one module for
      every size up to the bound: padded, with the real size as an input.
    """)
    return


if __name__ == "__main__":
    app.run()
