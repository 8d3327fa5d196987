"""torch_tpu.pallas: functions written in JAX or Pallas as ops on tpu
tensors, in strict eager, fused eager and compiled graphs, with gradients
from jax.vjp or a given backward; checked against PyTorch on CPU."""
from __future__ import annotations

import pytest
import torch

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from torch_tpu import _compile, debug  # noqa: E402
from torch_tpu.pallas import custom_jax_kernel  # noqa: E402

TPU = torch.device("tpu")


@custom_jax_kernel
def softmax(x):
    return jax.nn.softmax(x, axis=-1)


@custom_jax_kernel(static_argnums=(2,))
def rms_norm(x, w, eps):
    return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps) * w


def rms_norm_ref(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


@custom_jax_kernel
def softmax_upcast(x):
    # As PyTorch's CPU kernel computes a bfloat16 softmax: in float32.
    return jax.nn.softmax(x.astype(jnp.float32), axis=-1).astype(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_softmax_forward_and_backward_match_cpu(dtype):
    kernel = softmax if dtype == torch.float32 else softmax_upcast
    x, w = torch.randn(6, 10, dtype=dtype), torch.randn(6, 10, dtype=dtype)
    xt = x.to(TPU).requires_grad_()
    (kernel(xt) * w.to(TPU)).sum().backward()
    # The reference gradient in float32: the kernel's vjp runs in float32 and
    # rounds once, where CPU's bfloat16 softmax backward rounds along the
    # way (they differ by a few bfloat16 ulps).
    xc = x.float().requires_grad_()
    (torch.softmax(xc, -1) * w.float()).sum().backward()
    torch.testing.assert_close(kernel(x.to(TPU)).cpu(), torch.softmax(x, -1))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad.to(dtype))


@pytest.mark.parametrize("eps", [1e-6, 0.5])
def test_rms_norm_with_a_static_argument_matches_cpu(eps):
    x, w = torch.randn(3, 5, 16), torch.randn(16)
    xt, wt = x.to(TPU).requires_grad_(), w.to(TPU).requires_grad_()
    xc, wc = x.clone().requires_grad_(), w.clone().requires_grad_()
    g = torch.randn(3, 5, 16)
    out = rms_norm(xt, wt, eps)
    expected = rms_norm_ref(xc, wc, eps)
    torch.testing.assert_close(out.cpu(), expected.detach())
    out.backward(g.to(TPU))
    expected.backward(g)
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    torch.testing.assert_close(wt.grad.cpu(), wc.grad)


def test_inputs_may_be_views():
    x = torch.randn(8, 12)
    torch.testing.assert_close(softmax(x.to(TPU).t()[2:6]).cpu(), torch.softmax(x.t()[2:6], -1))


def test_several_outputs_and_their_gradients():
    @custom_jax_kernel
    def split_stats(x):
        return x.mean(-1), (x * x).sum(-1)

    x = torch.randn(4, 7)
    xt, xc = x.to(TPU).requires_grad_(), x.clone().requires_grad_()
    m, s = split_stats(xt)
    (m.sum() * 3 + s.sum()).backward()
    (xc.mean(-1).sum() * 3 + (xc * xc).sum(-1).sum()).backward()
    torch.testing.assert_close(m.cpu(), x.mean(-1))
    torch.testing.assert_close(s.cpu(), (x * x).sum(-1))
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    # Only one output used: the other's cotangent is zeros.
    xt.grad = None
    split_stats(xt)[1].sum().backward()
    torch.testing.assert_close(xt.grad.cpu(), 2 * x)


def test_fused_eager_runs_the_kernel_in_the_ops_program():
    x, w = torch.randn(4, 8), torch.randn(8)
    prev = torch.tpu.eager_mode
    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    try:
        before = debug.metrics()["executions"]
        got = (rms_norm(x.to(TPU) * 2, w.to(TPU), 1e-6) + 1).cpu()
        runs = debug.metrics()["executions"] - before
    finally:
        torch.tpu.eager_mode = prev
    torch.testing.assert_close(got, rms_norm_ref(x * 2, w, 1e-6) + 1)
    assert runs == 1  # the multiply, the kernel and the add: one program


def _pallas_add():
    from jax.experimental import pallas as pl

    def kernel(x_ref, y_ref, o_ref):
        o_ref[...] = x_ref[...] + 2 * y_ref[...]

    # pallas_call has no JAX derivative: the backward is given.
    @custom_jax_kernel(backward=lambda x, y, g: (g, 2 * g))
    def add(x, y):
        # interpret=True: XLA:CPU runs Pallas through its interpreter.
        return pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(x.shape, x.dtype), interpret=True)(x, y)

    return add


def test_a_pallas_kernel_in_interpret_mode():
    add = _pallas_add()
    a, c = torch.randn(8, 16), torch.randn(8, 16)
    at, ct = a.to(TPU).requires_grad_(), c.to(TPU).requires_grad_()
    out = add(at, ct)
    torch.testing.assert_close(out.cpu(), a + 2 * c)
    out.sum().backward()
    torch.testing.assert_close(at.grad.cpu(), torch.ones_like(a))
    torch.testing.assert_close(ct.grad.cpu(), torch.full_like(c, 2.0))


@pytest.mark.usefixtures("fresh_dynamo")
@pytest.mark.parametrize("kernel", ["rms_norm", "pallas"])
def test_the_kernel_inside_a_compiled_training_step(kernel):
    # Dynamo sees an opaque op; its backward (jax.vjp, or the given one) is
    # traced into the step's graph, which is captured as one program.
    add = _pallas_add() if kernel == "pallas" else None

    def body(lin, w, x):
        h = lin(x)
        return rms_norm(h, w, 1e-6) if add is None else add(h, w.expand_as(h))

    torch.manual_seed(0)
    ref_lin = torch.nn.Linear(8, 8)
    lin = torch.nn.Linear(8, 8).to(TPU)
    lin.load_state_dict(ref_lin.state_dict())
    w0 = torch.randn(8)
    w, wc = w0.to(TPU).requires_grad_(), w0.clone().requires_grad_()
    opt = torch.optim.SGD([*lin.parameters(), w], lr=0.1)
    ref_opt = torch.optim.SGD([*ref_lin.parameters(), wc], lr=0.1)

    @torch.compile(backend="tpu")
    def step(x):
        opt.zero_grad()
        loss = body(lin, w, x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    captured = _compile.stats["captured"]
    x = torch.randn(5, 8)
    for _ in range(3):
        loss = step(x.to(TPU))
        ref_opt.zero_grad()
        ref = (rms_norm_ref(ref_lin(x), wc, 1e-6) if add is None else ref_lin(x) + 2 * wc).pow(2).mean()
        ref.backward()
        ref_opt.step()
        torch.testing.assert_close(loss.detach().cpu(), ref.detach())
    torch.testing.assert_close(w.detach().cpu(), wc.detach())
    torch.testing.assert_close(lin.weight.detach().cpu(), ref_lin.weight.detach())
    assert _compile.stats["captured"] > captured


def test_bad_arguments_raise_like_pytorch():
    x = torch.randn(3, 4)
    with pytest.raises(TypeError, match="static_argnums"):
        rms_norm(x.to(TPU), 2.0, 1e-6)
    with pytest.raises(RuntimeError, match="on tpu"):
        softmax(x)
    if not jax.config.jax_enable_x64:
        with pytest.raises(TypeError, match="64-bit"):
            softmax(x.double().to(TPU))


def test_without_jax_the_error_says_what_to_install(monkeypatch):
    import sys

    from torch_tpu import pallas

    monkeypatch.setitem(sys.modules, "jax", None)
    with pytest.raises(ImportError, match="pip install jax"):
        pallas._jax()
