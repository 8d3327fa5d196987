"""torch.special pointwise functions (Bessel, Airy, ndtri, log_ndtr, erfcx,
entr, xlog1py, zeta) and torch.i0 on tpu vs PyTorch CPU
(csrc/ops/pointwise/special.cc)."""
import pytest
import torch

from tests.helpers import TPU, check, rnd

S = torch.special
INF, NAN = float("inf"), float("nan")


# Unary ops: (fn, CPU accepts bfloat16).
UNARY = {
    "i0e": (S.i0e, True),
    "i1": (S.i1, True),
    "i1e": (S.i1e, True),
    "modified_bessel_i0": (S.modified_bessel_i0, False),
    "modified_bessel_i1": (S.modified_bessel_i1, False),
    "modified_bessel_k0": (S.modified_bessel_k0, False),
    "modified_bessel_k1": (S.modified_bessel_k1, False),
    "scaled_modified_bessel_k0": (S.scaled_modified_bessel_k0, False),
    "scaled_modified_bessel_k1": (S.scaled_modified_bessel_k1, False),
    "bessel_j0": (S.bessel_j0, False),
    "bessel_j1": (S.bessel_j1, False),
    "bessel_y0": (S.bessel_y0, False),
    "bessel_y1": (S.bessel_y1, False),
    "spherical_bessel_j0": (S.spherical_bessel_j0, False),
    "airy_ai": (S.airy_ai, False),
    "entr": (S.entr, True),
    "log_ndtr": (S.log_ndtr, False),
    "erfcx": (S.erfcx, False),
    "ndtri": (S.ndtri, False),
}

# Edge points every unary op is checked at (branch boundaries of the
# approximations, signed zeros, overflow, inf, nan).
EDGES = [0.0, -0.0, 1e-6, -1e-6, 0.5, -0.5, 2.0, -2.0, 2.09, -2.09, 5.0, -5.0, 8.0, -8.0,
         30.0, -30.0, 95.0, -95.0, 110.0, INF, -INF, NAN]
PROB_EDGES = [0.0, 1.0, 1e-30, 1e-7, 0.135, 0.865, 1 - 1e-7, 0.5, -0.1, 1.1, NAN]

# float32 tolerance of the conformance harness (tools/opinfo_check.py): the
# approximations are CPU's, but XLA's exp/log/sin differ from libm by a few
# ulp, which grows near the functions' zeros (Y0, Y1, Ai) and through
# exp(|x|) for large arguments, beyond assert_close's float32 default.
F32 = dict(atol=1e-4, rtol=1e-4)


def inputs(name, n=257, low=-12.0, high=12.0):
    if name == "ndtri":
        return torch.cat([torch.linspace(0, 1, n), torch.tensor(PROB_EDGES)])
    return torch.cat([torch.linspace(low, high, n), torch.tensor(EDGES)])


def assert_like_cpu(actual, expected, **tol):
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **(tol or F32))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32_values(name):
    fn, _ = UNARY[name]
    x = inputs(name)
    assert_like_cpu(fn(x.to(TPU)), fn(x))


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_bfloat16(name):
    fn, bf16_ok = UNARY[name]
    x = inputs(name, n=65, low=-9, high=9).bfloat16()
    if not bf16_ok:
        with pytest.raises(NotImplementedError):
            fn(x)
        with pytest.raises(NotImplementedError):
            fn(x.to(TPU))
        return
    # Computed in f32 and rounded once, as CPU does.
    assert_like_cpu(fn(x.to(TPU)), fn(x), atol=1e-2, rtol=1.6e-2)


@pytest.mark.parametrize("name", ["i1", "bessel_j0", "erfcx", "ndtri", "entr"])
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.bool])
def test_unary_int_promotes_to_float(name, dtype):
    fn, _ = UNARY[name]
    x = torch.tensor([0, 1, 1, 0]).to(dtype) if dtype == torch.bool else torch.arange(-4, 5, dtype=dtype)
    out = fn(x.to(TPU))
    assert out.dtype == torch.float32
    assert_like_cpu(out, fn(x))


@pytest.mark.parametrize("name", ["i0e", "bessel_y1", "airy_ai", "log_ndtr"])
def test_unary_noncontiguous_and_offset_views(name):
    fn, _ = UNARY[name]
    base = torch.rand(6, 8) * 10 - 2
    for view in (lambda t: t.t(), lambda t: t[:, ::2], lambda t: t[1:]):
        assert_like_cpu(fn(view(base.to(TPU))), fn(view(base)))


@pytest.mark.parametrize("name", ["i1e", "modified_bessel_k1", "ndtri", "spherical_bessel_j0"])
def test_unary_out(name):
    fn, _ = UNARY[name]
    x = torch.rand(3, 4) * 0.9 + 0.05
    out = torch.empty(0, device=TPU)
    r = fn(x.to(TPU), out=out)
    assert r is out
    assert_like_cpu(out, fn(x))
    # Into a view of a bigger tensor: only the view changes.
    big = torch.full((5, 4), 7.0)
    tbig = big.to(TPU)
    fn(x, out=big[1:4])
    fn(x.to(TPU), out=tbig[1:4])
    assert_like_cpu(tbig, big)


def test_unary_out_dtype_rules():
    x = torch.rand(4)
    with pytest.raises(RuntimeError):
        S.i0e(x, out=torch.empty(4, dtype=torch.int64))
    with pytest.raises(RuntimeError):
        S.i0e(x.to(TPU), out=torch.empty(4, dtype=torch.int64, device=TPU))
    out = torch.empty(4, dtype=torch.float64, device=TPU)
    S.erfcx(x.to(TPU), out=out)
    assert_like_cpu(out, S.erfcx(x).double())


# --- gradients (autograd formulas call these kernels, and i0's needs special_i1) ---

@pytest.mark.parametrize("fn", [torch.i0, S.i0e, S.i1, S.i1e], ids=["i0", "i0e", "i1", "i1e"])
def test_bessel_i_grads(fn):
    x = torch.tensor([-9.0, -3.5, -1.0, 0.0, 0.25, 2.0, 7.9, 8.5, 12.0])
    check(fn, x, grad=True, **F32)


@pytest.mark.parametrize("name,low,high", [("entr", 0.1, 5.0), ("ndtri", 0.02, 0.98),
                                           ("log_ndtr", -8.0, 6.0), ("erfcx", -4.0, 8.0)])
def test_grads(name, low, high):
    fn, _ = UNARY[name]
    x = torch.linspace(low, high, 33)
    check(fn, x, grad=True, **F32)


# --- xlog1py -----------------------------------------------------------------------

def test_xlog1py_values_and_edges():
    x = torch.tensor([0.0, 0.0, 0.0, 2.0, 0.0, NAN, -3.0, 1.0, 2.5, -1.0])
    y = torch.tensor([-1.0, -2.0, 0.0, 1.0, NAN, 3.0, -0.5, INF, -1.0, 1e-8])
    assert_like_cpu(S.xlog1py(x.to(TPU), y.to(TPU)), S.xlog1py(x, y))


def test_xlog1py_broadcast_scalars_and_grads():
    x = torch.randn(5, 1)
    y = torch.rand(4) * 5 - 0.5
    check(S.xlog1py, x, y, grad=True, **F32)
    assert_like_cpu(S.xlog1py(x.to(TPU), 2.5), S.xlog1py(x, 2.5))
    assert_like_cpu(S.xlog1py(3.0, y.to(TPU)), S.xlog1py(3.0, y))


def test_xlog1py_dtypes_and_out():
    a = torch.arange(-2, 4)
    b = torch.arange(0, 6)
    r = S.xlog1py(a.to(TPU), b.to(TPU))
    assert r.dtype == torch.float32
    assert_like_cpu(r, S.xlog1py(a, b))
    xb, yb = torch.randn(6).bfloat16(), torch.rand(6).bfloat16()
    assert_like_cpu(S.xlog1py(xb.to(TPU), yb.to(TPU)), S.xlog1py(xb, yb), atol=1e-2, rtol=1.6e-2)
    base = torch.randn(4, 6)
    out = torch.empty(0, device=TPU)
    S.xlog1py(base.to(TPU).t(), 0.5, out=out)
    assert_like_cpu(out, S.xlog1py(base.t(), 0.5))


# --- zeta ----------------------------------------------------------------------------

def test_zeta_values_and_edges():
    x = torch.tensor([2.0, 3.0, -1.0, 2.0, 2.0, 4.0, 1.0, 0.5, 1.5, 2.5, 3.0, 2.0, 2.0, NAN, 2.0, 10.0, -2.0])
    q = torch.tensor([1.0, 2.0, 1.0, -2.0, -2.5, -2.5, 3.0, 2.0, 0.1, 100.0, -0.5, 0.0, 1e-3, 1.0, NAN, 0.3, -1.5])
    assert_like_cpu(S.zeta(x.to(TPU), q.to(TPU)), S.zeta(x, q))


def test_zeta_broadcast_scalars_ints_and_grad():
    x = torch.linspace(1.1, 8, 6).reshape(6, 1)
    q = torch.linspace(0.2, 9, 5)
    assert_like_cpu(S.zeta(x.to(TPU), q.to(TPU)), S.zeta(x, q))
    assert_like_cpu(S.zeta(3.0, q.to(TPU)), S.zeta(3.0, q))
    assert_like_cpu(S.zeta(x.to(TPU), 2.0), S.zeta(x, 2.0))
    xi, qi = torch.tensor([2, 3, 4]), torch.tensor([1, 2, 3])
    assert_like_cpu(S.zeta(xi.to(TPU), qi.to(TPU)), S.zeta(xi, qi))
    # Only q is differentiable: d/dq zeta(x, q) = -x zeta(x + 1, q).
    xr = torch.tensor([2.0, 3.5, 6.0])
    qr = torch.tensor([0.5, 1.0, 4.0], requires_grad=True)
    qt = qr.detach().to(TPU).requires_grad_()
    S.zeta(xr, qr).sum().backward()
    S.zeta(xr.to(TPU), qt).sum().backward()
    assert_like_cpu(qt.grad, qr.grad)


def test_zeta_bfloat16_rejected_like_cpu():
    x = torch.tensor([2.0, 3.0]).bfloat16()
    with pytest.raises(NotImplementedError):
        S.zeta(x, x)
    with pytest.raises(NotImplementedError):
        S.zeta(x.to(TPU), x.to(TPU))


def test_zeta_negative_q():
    # q < 0 with integer x: finite values near the poles of (q + k)^-x.
    x = torch.tensor([2.0, 3.0, 4.0, 7.0, 12.0, 12.0, 5.0, 2.0])
    q = torch.tensor([-0.5, -1.25, -3.7, -8.7, -8.4, -0.1, -15.5, -2.5])
    assert_like_cpu(S.zeta(x.to(TPU), q.to(TPU)), S.zeta(x, q))


def test_bfloat16_rounds_log_like_cpu():
    # CPU's bfloat16 kernels round log/log1p to bfloat16 before multiplying;
    # matching that keeps sums of these results (broadcast gradients) exact.
    x = (torch.randn(4096) * 5).bfloat16()
    y = (torch.rand(4096) * 10 - 0.9).bfloat16()
    torch.testing.assert_close(S.xlog1py(x.to(TPU), y.to(TPU)).cpu(), S.xlog1py(x, y), atol=0, rtol=0)
    p = (torch.rand(4096) * 10).bfloat16()
    torch.testing.assert_close(S.entr(p.to(TPU)).cpu(), S.entr(p), atol=0, rtol=0)


# --- i0 -------------------------------------------------------------------------------

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
