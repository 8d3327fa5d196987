"""Ops added from the OpInfo sweep: rsub, equal, nansum, logaddexp(2),
heaviside, sinc, signbit, aminmax, logspace, lgamma/digamma/polygamma and
the parametric activations (elu, hardtanh, leaky_relu, softplus,
hardsigmoid, hardswish, mish, glu). Expected values come from CPU."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


def rnd(*shape, dtype=torch.float32, lo=-3.0, hi=3.0):
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, dtype=dtype)
    return (torch.rand(*shape) * (hi - lo) + lo).to(dtype)


# --- rsub / equal ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_rsub(dtype):
    a, b = rnd(3, 4, dtype=dtype), rnd(4, dtype=dtype)
    check(lambda x, y: torch.rsub(x, y), a, b, grad=dtype.is_floating_point)
    check(lambda x, y: torch.rsub(x, y, alpha=2), a, b)
    check(lambda x: torch.rsub(x, 3), a)
    check(lambda x: torch.rsub(x.t(), 1), rnd(4, 3, dtype=dtype))


def test_rsub_bool_raises():
    both_raise(RuntimeError, torch.rsub, rnd(3, dtype=torch.bool), rnd(3, dtype=torch.bool))


def test_equal():
    a = rnd(3, 4)
    t = a.to(TPU)
    assert torch.equal(t, a.clone().to(TPU)) is True
    b = a.clone()
    b[1, 2] += 1
    assert torch.equal(t, b.to(TPU)) is False
    assert torch.equal(t, a[:2].to(TPU)) is False
    assert torch.equal(t.t(), a.t().contiguous().to(TPU)) is True
    n = torch.tensor([float("nan")])
    assert torch.equal(n.to(TPU), n.to(TPU)) == torch.equal(n, n)
    i = rnd(5, dtype=torch.int64)
    assert torch.equal(i.to(TPU), i.to(TPU))
    assert torch.equal(torch.empty(0, device=TPU), torch.empty(0, device=TPU))


# --- nansum / aminmax -------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_nansum(dtype):
    a = rnd(4, 5, dtype=dtype)
    if dtype.is_floating_point:
        a[1, 2] = float("nan")
        a[3, 0] = float("nan")
    g = dtype.is_floating_point
    check(lambda x: torch.nansum(x), a, grad=g)
    check(lambda x: torch.nansum(x, dim=1), a, grad=g)
    check(lambda x: torch.nansum(x, dim=0, keepdim=True), a)
    check(lambda x: torch.nansum(x[:, ::2], dim=1), a)


def test_nansum_out():
    a = rnd(4, 5)
    a[0, 0] = float("nan")
    out = torch.empty(4, device=TPU)
    torch.nansum(a.to(TPU), dim=1, out=out)
    torch.testing.assert_close(out.cpu(), torch.nansum(a, dim=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_aminmax(dtype):
    a = rnd(4, 5, dtype=dtype)
    check(lambda x: torch.aminmax(x), a)
    check(lambda x: torch.aminmax(x, dim=1), a)
    check(lambda x: torch.aminmax(x, dim=0, keepdim=True), a)
    check(lambda x: torch.aminmax(x.t(), dim=-1), a)


def test_aminmax_out_and_errors():
    a = rnd(4, 5)
    mn, mx = torch.empty(0, device=TPU), torch.empty(0, device=TPU)
    torch.aminmax(a.to(TPU), dim=1, out=(mn, mx))
    e = torch.aminmax(a, dim=1)
    torch.testing.assert_close(mn.cpu(), e.min)
    torch.testing.assert_close(mx.cpu(), e.max)
    both_raise(RuntimeError, torch.aminmax, torch.empty(0))


# --- logspace ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_logspace(dtype):
    for start, end, steps, base in [(0, 3, 4, 10.0), (-1.0, 2.0, 7, 2.0), (1, 1, 1, 10.0), (0, 1, 0, 10.0)]:
        e = torch.logspace(start, end, steps, base=base, dtype=dtype)
        a = torch.logspace(start, end, steps, base=base, dtype=dtype, device=TPU)
        torch.testing.assert_close(a.cpu(), e)
    out = torch.empty(2, dtype=dtype, device=TPU)
    torch.logspace(0, 2, 5, out=out.resize_(0))
    torch.testing.assert_close(out.cpu(), torch.logspace(0, 2, 5, dtype=dtype))


# --- binary elementwise ------------------------------------------------------------------

@pytest.mark.parametrize("fn", [torch.logaddexp, torch.logaddexp2])
@pytest.mark.parametrize("dtype", FLOATS)
def test_logaddexp(fn, dtype):
    a, b = rnd(3, 4, dtype=dtype), rnd(4, dtype=dtype)
    check(fn, a, b, grad=True)
    check(lambda x, y: fn(x.t(), y[1:]), rnd(4, 3, dtype=dtype), rnd(5, dtype=dtype))
    inf = float("inf")
    s = torch.tensor([inf, -inf, inf, -inf, 1.0, 100.0], dtype=dtype)
    t = torch.tensor([inf, -inf, -inf, 2.0, -inf, 100.0], dtype=dtype)
    check(fn, s, t)
    out = torch.empty(3, 4, device=TPU, dtype=dtype)
    fn(a.to(TPU), b.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), fn(a, b), **({} if dtype == torch.float32 else dict(atol=1e-2, rtol=1.6e-2)))


def test_logaddexp_int_raises():
    both_raise(NotImplementedError, torch.logaddexp, torch.tensor([1, 2]), torch.tensor([1, 2]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_heaviside(dtype):
    a = rnd(3, 4, dtype=dtype)
    if dtype.is_floating_point:
        a[0, 0] = 0
        a[1, 1] = float("nan")
    v = rnd(4, dtype=dtype)
    check(torch.heaviside, a, v)
    check(lambda x, y: x.clone().heaviside_(y), a, v)
    big = torch.zeros(5, 6, dtype=dtype, device=TPU)
    torch.heaviside(a.to(TPU), v.to(TPU), out=big[1:4, 1:5])
    torch.testing.assert_close(big[1:4, 1:5].cpu(), torch.heaviside(a, v))
    both_raise(RuntimeError, torch.heaviside, rnd(3), rnd(3, dtype=torch.int64))


# --- unary elementwise --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_sinc(dtype):
    a = rnd(3, 5, dtype=dtype)
    if dtype.is_floating_point:
        a[0, 0] = 0
    check(torch.sinc, a, grad=dtype.is_floating_point)
    check(lambda x: torch.sinc(x[:, ::2]), a)
    if dtype.is_floating_point:
        check(lambda x: x.clone().sinc_(), a)
    out = torch.empty(0, dtype=torch.sinc(a).dtype, device=TPU)
    torch.sinc(a.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.sinc(a), **({} if dtype != torch.bfloat16 else dict(atol=1e-2, rtol=1.6e-2)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_signbit(dtype):
    a = rnd(3, 5, dtype=dtype)
    if dtype.is_floating_point:
        a[0, :3] = torch.tensor([0.0, -0.0, float("-inf")], dtype=dtype)
    check(torch.signbit, a)
    check(lambda x: torch.signbit(x.t()), a)
    out = torch.empty(15, dtype=torch.bool, device=TPU)
    torch.signbit(a.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.signbit(a))


@pytest.mark.parametrize("fn", [torch.lgamma, torch.digamma])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_gamma_family(fn, dtype):
    a = rnd(3, 5, dtype=dtype, lo=0.1, hi=6.0) if dtype.is_floating_point else torch.randint(1, 8, (3, 5))
    check(fn, a, grad=dtype.is_floating_point and fn is torch.lgamma)
    neg = torch.tensor([-2.5, -0.5, 0.5, 10.0, 30.0])
    check(fn, neg, atol=1e-4, rtol=1e-4)  # chlo and CPU use different series
    out = torch.empty(0, dtype=fn(a).dtype, device=TPU)
    fn(a.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), fn(a), **({} if dtype != torch.bfloat16 else dict(atol=1e-2, rtol=1.6e-2)))
    if dtype == torch.float32:
        check(lambda x: getattr(x.clone(), fn.__name__ + "_")(), a)


def test_digamma_pole():
    check(torch.digamma, torch.tensor([0.0, -0.0, 1.0]))
    check(torch.digamma, torch.tensor([-0.0, 0.0]))


@pytest.mark.parametrize("n", [0, 1, 2, 3])
def test_polygamma(n):
    a = rnd(3, 5, lo=0.5, hi=5.0)
    check(lambda x: torch.polygamma(n, x), a, grad=True, atol=1e-4, rtol=1e-4)  # series vs CPU
    check(lambda x: torch.polygamma(n, x), torch.randint(1, 6, (4,)), atol=1e-4, rtol=1e-4)
    out = torch.empty(0, device=TPU)
    torch.polygamma(n, a.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.polygamma(n, a), atol=1e-4, rtol=1e-4)
    both_raise(RuntimeError, torch.polygamma, -1, a)


# --- activations -------------------------------------------------------------------------------

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


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_native_dropout_backward_dtype(dtype):
    g = rnd(3, 4, dtype=dtype)
    m = torch.rand(3, 4) > 0.5
    check(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 2.0), g, m)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_take(dtype):
    a = rnd(3, 4, dtype=dtype)
    idx = torch.tensor([[0, 5, -1], [11, 2, -12]])
    check(torch.take, a, idx, grad=dtype.is_floating_point)
    check(lambda x, i: torch.take(x.t(), i), a, idx)
    out = torch.empty(0, dtype=dtype, device=TPU)
    torch.take(a.to(TPU), idx.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.take(a, idx))
    # out-of-range indices are only checked with TORCH_TPU_DEBUG_CHECKS=1 (see ops/index_checks.h)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_put(accumulate, dtype):
    a = rnd(3, 4, dtype=dtype)
    idx = torch.tensor([1, -2, 7, 1]) if accumulate else torch.tensor([1, -2, 7, 0])
    src = rnd(4, dtype=dtype)
    check(lambda x, i, s: x.clone().put_(i, s, accumulate=accumulate), a, idx, src)
    check(lambda x, i, s: torch.put(x, i, s, accumulate=accumulate), a, idx, src, grad=dtype.is_floating_point)
    # non-contiguous self is indexed in logical row-major order
    check(lambda x, i, s: x.t().clone().t().put_(i, s, accumulate=accumulate), a, idx, src)
    both_raise(IndexError, lambda x, i, s: x.put_(i, s), a.clone(), idx, src[:3])


@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_cummaxmin(fn, dtype):
    a = torch.tensor([[1, 3, 3, 2, 5, 5, 0], [2, 2, 1, 1, 4, 0, 4]]).to(dtype)
    if dtype.is_floating_point:
        b = a.clone()
        b[0, 3] = float("nan")
        b[0, 5] = float("nan")
        e, t = fn(b, 1), fn(b.to(TPU), 1)
        torch.testing.assert_close(t.values.cpu(), e.values, equal_nan=True)
        torch.testing.assert_close(t.indices.cpu(), e.indices)
    check(lambda x: fn(x, 1), a)
    check(lambda x: fn(x, 0), a)
    check(lambda x: fn(x.t(), 0), a)
    check(lambda x: fn(x, 0), torch.tensor(3).to(dtype))
    if dtype.is_floating_point:
        check(lambda x: fn(x, -1).values, rnd(3, 6, dtype=dtype), grad=True)
    vals, idx = torch.empty(0, dtype=dtype, device=TPU), torch.empty(0, dtype=torch.long, device=TPU)
    fn(a.to(TPU), 1, out=(vals, idx))
    e = fn(a, 1)
    torch.testing.assert_close(vals.cpu(), e.values)
    torch.testing.assert_close(idx.cpu(), e.indices)


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_negative_and_poles(n):
    x = torch.tensor([-2.5, -1.0, -0.5, 0.0, 0.3, 1.0, -8.7, 0.2, -3.3])
    if n == 1:
        x = x[x != -1.0]  # CPU's value at this pole is 1/sin(pi*x)^2 rounding noise
    # the reflection formula cancels digits near the poles: 1e-3 relative
    check(lambda t: torch.polygamma(n, t), x, atol=1e-3, rtol=1e-3)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_i0(dtype):
    if dtype.is_floating_point:
        x = torch.cat([torch.linspace(-100, 100, 401), torch.tensor([0.0, 3.75, -3.75, 3.7501])]).to(dtype)
    else:
        x = rnd(3, 5, dtype=dtype)
    check(torch.i0, x)
    check(lambda t: torch.i0(t[::2]), x)
    out = torch.empty(0, dtype=torch.i0(x).dtype, device=TPU)
    torch.i0(x.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.i0(x), **({} if dtype != torch.bfloat16 else dict(atol=1e-2, rtol=1.6e-2)))
    if dtype.is_floating_point:
        check(lambda t: t.clone().i0_(), x)
