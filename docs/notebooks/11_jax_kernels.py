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
    # 11. Kernels written in JAX and Pallas

    When an op is missing, or a hand-fused kernel would be faster, write it in
    JAX. `torch_tpu.pallas.custom_jax_kernel` turns a JAX function into an op
    on tpu tensors: JAX lowers it to StableHLO once per signature, and tpu
    inlines that into its own programs, so the kernel fuses with the ops
    around it and sits inside `torch.compile` graphs. Its gradient comes from
    `jax.vjp` of the same function, or from a `backward=` you give. Pallas
    kernels work the same way; on XLA:CPU they run through Pallas's interpreter
    (`interpret=True`), on TPU and GPU natively. `docs/custom_kernels.md` has
    the details.
    """)
    return


@app.cell
def _(mo):
    import jax
    import torch

    import torch_tpu
    from torch_tpu import debug
    from torch_tpu.pallas import custom_jax_kernel

    mo.md(f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__}, JAX {jax.__version__} "
          f"on **{torch.tpu.get_device_name()}**")
    return custom_jax_kernel, debug, jax, torch


@app.cell
def _(mo):
    mo.md(r"""
    ## 1. RMSNorm in JAX, forward and backward

    `static_argnums` marks arguments that are Python values, not tensors: here
    the epsilon. The backward is `jax.vjp` of the function, so nothing more is
    written.
    """)
    return


@app.cell
def _(custom_jax_kernel, jax, mo, torch):
    @custom_jax_kernel(static_argnums=(2,))
    def rms_norm(x, w, eps):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * w

    def rms_norm_ref(x, w, eps):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w

    _x = torch.randn(4, 16, requires_grad=True)
    _w = torch.randn(16, requires_grad=True)
    _xt, _wt = (_t.detach().to("tpu").requires_grad_() for _t in (_x, _w))
    _out = rms_norm(_xt, _wt, 1e-6)
    _out.square().sum().backward()
    _ref = rms_norm_ref(_x, _w, 1e-6)
    _ref.square().sum().backward()
    torch.testing.assert_close(_out.detach().cpu(), _ref.detach())
    torch.testing.assert_close(_xt.grad.cpu(), _x.grad, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(_wt.grad.cpu(), _w.grad, rtol=1e-4, atol=1e-5)
    mo.md("RMSNorm in JAX on tpu: the output and both gradients equal PyTorch's on the CPU.")
    return rms_norm, rms_norm_ref


@app.cell
def _(mo):
    mo.md(r"""
    ## 2. Fused with its neighbours

    In fused eager (`EagerMode.DEFER_AND_FUSE`) the kernel is one more op of
    the pending graph. A multiply before it and an add after it run in the
    same program: one execution for all three.
    """)
    return


@app.cell
def _(debug, mo, rms_norm, rms_norm_ref, torch):
    _x, _w = torch.randn(4, 8), torch.randn(8)
    _prev = torch.tpu.eager_mode
    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    try:
        _before = debug.metrics()["executions"]
        _got = (rms_norm(_x.to("tpu") * 2, _w.to("tpu"), 1e-6) + 1).cpu()
        _runs = debug.metrics()["executions"] - _before
    finally:
        torch.tpu.eager_mode = _prev
    torch.testing.assert_close(_got, rms_norm_ref(_x * 2, _w, 1e-6) + 1)
    mo.md(f"`rms_norm(x * 2, w) + 1` in fused eager: **{_runs}** program execution(s), result equal to the CPU's.")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## 3. A Pallas kernel in a compiled training step

    `pallas_call` has no JAX derivative, so this kernel gives its backward.
    Inside `torch.compile`, dynamo sees the kernel as one opaque op, and its
    backward is traced into the step's graph, which becomes one program. The
    step below trains a linear layer and a weight through the kernel for three
    steps, against the same step on the CPU.
    """)
    return


@app.cell
def _(custom_jax_kernel, jax, mo, torch):
    from jax.experimental import pallas as pl

    def _kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + 2 * y_ref[...]

    @custom_jax_kernel(backward=lambda x, y, g: (g, 2 * g))
    def add_twice(x, y):
        # interpret=True: XLA:CPU runs Pallas through its interpreter.
        return pl.pallas_call(_kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, y)

    torch.manual_seed(0)
    _ref_lin = torch.nn.Linear(8, 8)
    _lin = torch.nn.Linear(8, 8).to("tpu")
    _lin.load_state_dict(_ref_lin.state_dict())
    _w0 = torch.randn(8)
    _w, _wc = _w0.to("tpu").requires_grad_(), _w0.clone().requires_grad_()
    _opt = torch.optim.SGD([*_lin.parameters(), _w], lr=0.1)
    _ref_opt = torch.optim.SGD([*_ref_lin.parameters(), _wc], lr=0.1)

    @torch.compile(backend="tpu")
    def _step(x):
        _opt.zero_grad()
        loss = add_twice(_lin(x), _w.expand(x.shape[0], 8)).pow(2).mean()
        loss.backward()
        _opt.step()
        return loss

    _rows = []
    _x = torch.randn(5, 8)
    for _i in range(3):
        _loss = _step(_x.to("tpu"))
        _ref_opt.zero_grad()
        _ref = (_ref_lin(_x) + 2 * _wc).pow(2).mean()
        _ref.backward()
        _ref_opt.step()
        torch.testing.assert_close(_loss.detach().cpu(), _ref.detach())
        _rows.append(f"| {_i + 1} | {_loss.item():.6f} | {_ref.item():.6f} |")
    torch.testing.assert_close(_lin.weight.detach().cpu(), _ref_lin.weight.detach())
    mo.md("| step | loss on tpu (Pallas) | loss on CPU |\n|---|---|---|\n" + "\n".join(_rows))
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What to take away

    - `@custom_jax_kernel` makes any JAX function a tpu op, with gradients from
      `jax.vjp` or from `backward=`.
    - The kernel's StableHLO is inlined: it fuses with neighbouring ops in fused
      eager and is part of the program under `torch.compile`.
    - Pallas kernels use the same decorator; pass `interpret=True` on XLA:CPU.
    - Without JAX installed, the decorator raises an `ImportError` that names
      what to install.
    """)
    return


if __name__ == "__main__":
    app.run()
