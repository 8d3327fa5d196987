"""NN activations and their backward kernels against PyTorch CPU
(csrc/ops/nn/activation.cc): gelu, silu, the parametric activations (elu,
hardtanh, leaky_relu, softplus, hardsigmoid, hardswish, mish, glu),
threshold, soft/hardshrink, prelu, rrelu, logsigmoid and logit's
gradient."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check, rnd

FLOATS = [torch.float32, torch.bfloat16]


# --- activations -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype, approximate):
    x = torch.randn(4, 7, dtype=dtype) * 3
    check(lambda x: F.gelu(x, approximate=approximate), x, grad=True)
    check(lambda x: F.gelu(x.t()[1:], approximate=approximate), x, grad=True)


def test_gelu_out_inplace_errors():
    x = torch.randn(3, 5)
    out = torch.empty(0, device=TPU)
    torch._C._nn.gelu(x.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), F.gelu(x))
    tx = x.to(TPU)
    torch._C._nn.gelu_(tx, approximate="tanh")
    torch.testing.assert_close(tx.cpu(), F.gelu(x, approximate="tanh"))
    both_raise(RuntimeError, lambda x: F.gelu(x, approximate="foo"), x)
    both_raise(NotImplementedError, F.gelu, torch.arange(3))


@pytest.mark.parametrize("dtype", FLOATS)
def test_silu(dtype):
    x = torch.randn(6, 5, dtype=dtype) * 4
    check(F.silu, x, grad=True)
    check(lambda x: F.silu(x[::2]), x, grad=True)
    tx = x.to(TPU)
    F.silu(tx, inplace=True)
    torch.testing.assert_close(tx.cpu(), F.silu(x))


# --- logsigmoid -----------------------------------------------------------------------

def test_logsigmoid():
    x = torch.randn(6, 4) * 30
    check(F.logsigmoid, x, grad=True)
    check(F.logsigmoid, x[:, ::2].bfloat16(), grad=True)


# --- parametric activations --------------------------------------------------------------------

ACTS = [
    ("elu", lambda x: F.elu(x)),
    ("elu_alpha", lambda x: F.elu(x, alpha=0.5)),
    ("celu", lambda x: F.celu(x, alpha=1.5)),
    ("selu", lambda x: F.selu(x)),
    ("hardtanh", lambda x: F.hardtanh(x, -1.5, 2.0)),
    ("relu6", lambda x: F.relu6(x)),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2)),
    ("softplus", lambda x: F.softplus(x)),
    ("softplus_beta", lambda x: F.softplus(x, beta=2.0, threshold=3.0)),
    ("hardsigmoid", F.hardsigmoid),
    ("hardswish", F.hardswish),
    ("mish", F.mish),
    ("glu", lambda x: F.glu(x, dim=-1)),
    ("glu0", lambda x: F.glu(x, dim=0)),
]


@pytest.mark.parametrize("name,fn", ACTS, ids=[a[0] for a in ACTS])
@pytest.mark.parametrize("dtype", FLOATS)
def test_activation(name, fn, dtype):
    a = rnd(4, 6, dtype=dtype, lo=-5, hi=5)
    check(fn, a, grad=True)
    check(lambda x: fn(x.t()[1:]), rnd(6, 5, dtype=dtype, lo=-5, hi=5), grad=True)


INPLACE = [
    ("elu_", lambda x: F.elu(x, inplace=True)),
    ("hardtanh_", lambda x: F.hardtanh(x, -0.5, 0.5, inplace=True)),
    ("leaky_relu_", lambda x: F.leaky_relu(x, 0.1, inplace=True)),
    ("hardsigmoid_", lambda x: F.hardsigmoid(x, inplace=True)),
    ("hardswish_", lambda x: F.hardswish(x, inplace=True)),
    ("mish_", lambda x: F.mish(x, inplace=True)),
]


@pytest.mark.parametrize("name,fn", INPLACE, ids=[a[0] for a in INPLACE])
def test_activation_inplace(name, fn):
    a = rnd(4, 6, lo=-5, hi=5)
    # in-place on a non-leaf so autograd can record it
    check(lambda x: fn(x * 1.0), a, grad=True)
    check(lambda x: fn(x.detach().clone()[:, 1:]), a)


def test_activation_out():
    a = rnd(3, 4)
    for op, args in [(torch._C._nn.elu, ()), (torch._C._nn.hardtanh, ()), (torch._C._nn.leaky_relu, ()),
                     (torch._C._nn.softplus, ()), (torch._C._nn.hardsigmoid, ()), (torch._C._nn.hardswish, ()),
                     (torch._C._nn.mish, ()), (torch._C._nn.glu, (1,))]:
        e = op(a, *args)
        big = torch.zeros(5, 6, device=TPU)
        dst = big[1:1 + e.shape[0], :e.shape[1]]
        op(a.to(TPU), *args, out=dst)
        torch.testing.assert_close(dst.cpu(), e)


def test_hardtanh_int():
    check(lambda x: F.hardtanh(x, -2, 3), rnd(10, dtype=torch.int64))


def test_activation_errors():
    both_raise(NotImplementedError, F.elu, torch.tensor([1, 2]))
    both_raise(NotImplementedError, F.leaky_relu, torch.tensor([1, 2]))
    both_raise(RuntimeError, F.glu, torch.randn(3, 5))
    # in-place forward with a negative slope cannot be differentiated
    for fn in (lambda x: F.leaky_relu(x * 1, -0.1, inplace=True), lambda x: F.elu(x * 1, -0.5, inplace=True)):
        for dev in ("cpu", TPU):
            x = torch.randn(4, device=dev, requires_grad=True)
            with pytest.raises(RuntimeError):
                fn(x).sum().backward()


def test_backward_kernels_direct():
    g, x = rnd(3, 4), rnd(3, 4)
    check(lambda g, x: torch.ops.aten.elu_backward(g, 1.0, 1.0, 1.0, False, x), g, x)
    check(lambda g, y: torch.ops.aten.elu_backward(g, 1.0, 1.0, 1.0, True, y), g, F.elu(x))
    check(lambda g, x: torch.ops.aten.softplus_backward(g, x, 1.0, 20.0), g, x)
    check(lambda g, x: torch.ops.aten.hardswish_backward(g, x), g, x)
    check(lambda g, x: torch.ops.aten.glu_backward(g, x, 1), rnd(3, 2), x)
    # exact boundary points
    edge = torch.tensor([-3.0, 3.0, -1.0, 1.0, 0.0])
    check(lambda g, x: torch.ops.aten.hardsigmoid_backward(g, x), torch.ones(5), edge)
    check(lambda g, x: torch.ops.aten.hardswish_backward(g, x), torch.ones(5), edge)
    check(lambda g, x: torch.ops.aten.hardtanh_backward(g, x, -1.0, 1.0), torch.ones(5), edge)


A = torch.ops.aten
# Each backward kernel in its out= (.grad_input) form: fn(grad, x, out).
OUT_FORMS = {
    "gelu": lambda g, x, o: A.gelu_backward(g, x, approximate="tanh", grad_input=o),
    "silu": lambda g, x, o: A.silu_backward(g, x, grad_input=o),
    "elu": lambda g, x, o: A.elu_backward(g, 1.0, 1.0, 1.0, False, x, grad_input=o),
    "hardtanh": lambda g, x, o: A.hardtanh_backward(g, x, -1.0, 1.0, grad_input=o),
    "leaky_relu": lambda g, x, o: A.leaky_relu_backward(g, x, 0.1, False, grad_input=o),
    "softplus": lambda g, x, o: A.softplus_backward(g, x, 1.0, 20.0, grad_input=o),
    "hardsigmoid": lambda g, x, o: A.hardsigmoid_backward(g, x, grad_input=o),
    "glu": lambda g, x, o: A.glu_backward(g[:, :2], x, 1, grad_input=o),
    "softshrink": lambda g, x, o: A.softshrink_backward(g, x, 0.5, grad_input=o),
    "hardshrink": lambda g, x, o: A.hardshrink_backward(g, x, 0.5, grad_input=o),
    "logit": lambda g, x, o: A.logit_backward(g, x, 0.1, grad_input=o),
    "log_sigmoid": lambda g, x, o: A.log_sigmoid_backward(g, x, A.log_sigmoid_forward(x)[1], grad_input=o),
}


@pytest.mark.parametrize("name", sorted(OUT_FORMS))
def test_backward_kernels_out_forms(name):
    # Into an empty out (resized), and into a transposed one, which is
    # written through; values and layout as on CPU.
    fn = OUT_FORMS[name]
    g, x = rnd(3, 4), rnd(3, 4, lo=0.05, hi=0.95)
    for make in (lambda d: torch.empty(0, device=d), lambda d: torch.empty(4, 3, device=d).t()):
        want = fn(g, x, make("cpu"))
        got = fn(g.to(TPU), x.to(TPU), make(TPU))
        assert got.stride() == want.stride()
        torch.testing.assert_close(got.cpu(), want)


def test_glu_and_logit_out_forms_and_errors():
    x = rnd(4, 6)
    for fn in (lambda x, out: A.glu(x, -1, out=out), lambda x, out: torch.logit(x.sigmoid(), 1e-3, out=out)):
        want = fn(x, torch.empty(0))
        got = fn(x.to(TPU), torch.empty(0, device=TPU))
        torch.testing.assert_close(got.cpu(), want)
    # An integer out cannot take a float result; glu halves an even dim only.
    both_raise(RuntimeError, lambda x, o: A.glu(x, -1, out=o), x, torch.empty(0, dtype=torch.long))
    both_raise(RuntimeError, lambda x: A.glu(x, 0), rnd(3, 4))


# --- threshold / shrink / prelu / rrelu / logit ----------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_threshold(dtype):
    x = (torch.randn(5, 6) * 4).to(dtype)
    check(lambda x: F.threshold(x, 0.5, -2.0), x, grad=dtype.is_floating_point)
    check(lambda x: F.threshold(x.t()[1:], 1, 7), x, grad=dtype.is_floating_point)
    cx, tx = x.clone(), x.to(TPU)
    F.threshold(cx, 0.0, 3.0, inplace=True)
    F.threshold(tx, 0.0, 3.0, inplace=True)
    torch.testing.assert_close(tx.cpu(), cx)
    big = torch.zeros(4, 8, dtype=dtype, device=TPU)
    torch.threshold(x.to(TPU)[:4, :3], 0.0, 1.0, out=big[:, ::3])
    cbig = torch.zeros(4, 8, dtype=dtype)
    torch.threshold(x[:4, :3], 0.0, 1.0, out=cbig[:, ::3])
    torch.testing.assert_close(big.cpu(), cbig)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", [F.softshrink, F.hardshrink])
def test_shrink(dtype, fn):
    x = torch.randn(6, 5, dtype=dtype) * 2
    x[0, 0] = 0.5  # on the boundary
    check(lambda x: fn(x, 0.5), x, grad=True)
    check(lambda x: fn(x[:, ::2], 1.2), x, grad=True)
    out_c, out_t = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device=TPU)
    op = getattr(torch.ops.aten, fn.__name__).out
    op(x, 0.3, out=out_c)
    op(x.to(TPU), 0.3, out=out_t)
    torch.testing.assert_close(out_t.cpu(), out_c)


def test_softshrink_bad_lambda():
    both_raise(RuntimeError, lambda x: F.softshrink(x, -1.0), torch.randn(3))


@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu(dtype):
    x = torch.randn(3, 4, 5, dtype=dtype)
    check(F.prelu, x, torch.rand(4, dtype=dtype), grad=True)
    check(F.prelu, x, torch.rand(1, dtype=dtype), grad=True)
    check(lambda x, w: F.prelu(x.transpose(1, 2), w), x, torch.rand(5, dtype=dtype), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rrelu_eval(dtype):
    x = torch.randn(4, 6, dtype=dtype)
    check(lambda x: F.rrelu(x, 0.1, 0.3, training=False), x, grad=True)
    check(lambda x: F.rrelu(x.t(), training=False), x, grad=True)


def test_rrelu_train():
    x = torch.randn(200, device=TPU, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x).detach().cpu()
    xc = x.detach().cpu()
    assert torch.all(slope[xc >= 0] == 1)
    neg = slope[xc < 0]
    assert torch.all((neg >= 0.1 - 1e-6) & (neg <= 0.3 + 1e-6))
    assert neg.std() > 0.01  # random, not the mean slope
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), slope)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("eps", [None, 0.1])
def test_logit_grad(dtype, eps):
    x = torch.rand(5, 4, dtype=dtype) * 0.9 + 0.05
    x[0, :3] = torch.tensor([0.01, 0.99, 0.5])
    check(lambda x: torch.logit(x, eps), x, grad=True)
    # Outside [0, 1] the gradient is NaN without eps and 0 with it.
    y = torch.tensor([-0.1, 0.0, 0.3, 1.0, 1.2], dtype=dtype, requires_grad=True)
    yt = y.detach().to(TPU).requires_grad_()
    torch.logit(y, eps).sum().backward()
    torch.logit(yt, eps).sum().backward()
    torch.testing.assert_close(yt.grad.cpu(), y.grad, equal_nan=True)


def test_rrelu_with_noise_forms_and_log_sigmoid_out():
    A = torch.ops.aten
    x = torch.randn(4, 5)
    # Eval: the mean slope in every form; noise is left alone.
    noise = torch.ones(4, 5)
    check(lambda t, n: A.rrelu_with_noise(t, n, 0.1, 0.3, False), x, noise)
    check(lambda t, n, o: (A.rrelu_with_noise.out(t, n, 0.1, 0.3, False, out=o), o)[1], x, noise, torch.empty(0))
    check(lambda t, n: A.rrelu_with_noise_(t.clone(), n, 0.1, 0.3, False), x, noise)
    # Training in place: self becomes self * noise, and noise holds the slopes.
    xt, nt = x.to(TPU), torch.empty(4, 5, device=TPU)
    r = A.rrelu_with_noise_(xt.clone(), nt, 0.1, 0.3, True)
    n = nt.cpu()
    assert torch.all(n[x >= 0] == 1) and torch.all((n[x < 0] >= 0.1 - 1e-6) & (n[x < 0] <= 0.3 + 1e-6))
    torch.testing.assert_close(r.cpu(), x * n)
    both_raise(NotImplementedError, lambda t, n: A.rrelu_with_noise(t, n, 0.1, 0.3, False), x.long(), noise)
    # log_sigmoid_forward's out= form: the output, and an empty buffer.
    check(lambda t, o, b: A.log_sigmoid_forward.output(t, output=o, buffer=b)[0], x, torch.empty(0), torch.empty(0))
