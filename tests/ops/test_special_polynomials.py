"""Orthogonal polynomials (torch.special.*_polynomial_*), igamma/igammac,
polygamma at negative x, nextafter and frexp against PyTorch CPU."""
import math

import pytest
import torch

from tests.helpers import TPU, both_raise, to_tpu, tols
from tests.helpers import check as _check


def check(fn, *args, grad=False, **kw):
    """helpers.check, but NaN == NaN (these functions return NaN by design
    outside their domain)."""
    if grad:
        return _check(fn, *args, grad=True, **kw)
    expected = fn(*args)
    actual = fn(*[to_tpu(a) for a in args])
    dts = [a.dtype for a in args if isinstance(a, torch.Tensor)]
    tol = tols(dts[0]) if dts else {}
    if isinstance(expected, tuple):
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a.cpu(), e, equal_nan=True, **tol)
    else:
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)
    return actual

POLYS = [
    "chebyshev_polynomial_t", "chebyshev_polynomial_u", "chebyshev_polynomial_v", "chebyshev_polynomial_w",
    "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "shifted_chebyshev_polynomial_v",
    "shifted_chebyshev_polynomial_w", "hermite_polynomial_h", "hermite_polynomial_he", "laguerre_polynomial_l",
    "legendre_polynomial_p",
]

NAN, INF = float("nan"), float("inf")


def _xn():
    # Special points: |x| == 1, x == 0 and 0.5 (the shifted forms' edges),
    # |x| < 1 with large n (trig branch), |x| > 1 with large n (overflow ->
    # NaN stop), negative / fractional / non-finite n.
    xs = torch.tensor([-1.0, 1.0, 0.0, 0.5, 0.3, -0.7, 0.999, 1.5, -2.0, 3.0, NAN, 0.25, INF, -INF])
    ns = torch.tensor([0.0, 1.0, 2.0, 3.0, 4.7, -1.0, -0.5, 5.0, 7.0, 9.0, 12.0, 20.0, 30.0, NAN, INF, 1e30])
    return xs.view(-1, 1).expand(-1, ns.numel()).contiguous(), ns.view(1, -1).expand(xs.numel(), -1).contiguous()


@pytest.mark.parametrize("name", POLYS)
def test_polynomial_values(name):
    fn = getattr(torch.special, name)
    x, n = _xn()
    if not name.endswith(("_t", "_v", "_h", "_he")):
        # CPU returns an uninitialised value for NaN x with n >= 2 here.
        x = torch.where(x.isnan(), 0.75, x)
    check(fn, x, n)
    # Random x over a wider range and integer degrees (the OpInfo inputs).
    torch.manual_seed(0)
    xr = torch.empty(5, 6).uniform_(-3, 3)
    nr = torch.randint(-2, 11, (5, 6)).float()
    check(fn, xr, nr)
    if name.startswith("hermite"):
        # Degrees past Hermite's cut-off (128 in float32) give NaN.
        check(fn, torch.tensor([0.5, -0.2, 1.1]), torch.tensor([128.0, 129.0, 150.0]))


def test_polynomial_dtypes_scalars_layouts():
    fn = torch.special.chebyshev_polynomial_t
    xi = torch.tensor([[-2, -1, 0], [1, 2, 3]])
    ni = torch.tensor([[0, 1, 2], [3, 4, 5]])
    check(fn, xi, ni)  # int64 -> float32
    check(fn, xi > 0, ni > 2)  # bool -> float32
    x = torch.linspace(-1.5, 1.5, 12).reshape(3, 4)
    check(fn, x, 3)  # n_scalar
    check(fn, 0.5, torch.tensor([0.0, 1.0, 5.0, 9.0]))  # x_scalar
    check(fn, x, torch.tensor([1.0, 2.0, 3.0, 8.0]))  # broadcasting
    big = torch.linspace(-1.2, 1.2, 40).reshape(5, 8)
    check(lambda a, b: fn(a.t(), b[:, ::2]), big, torch.arange(80.0).reshape(8, 10) % 7)
    # out= into a non-contiguous view of a bigger tensor.
    check(lambda a, b: fn(a, b, out=torch.zeros(4, 6, device=a.device)[:3, 1:5]), x, torch.full((3, 4), 4.0))


def test_polynomial_out_and_errors():
    x = torch.linspace(-1, 1, 6)
    n = torch.tensor([0.0, 1, 2, 3, 4, 5])
    base = torch.zeros(2, 6, device=TPU)
    torch.special.legendre_polynomial_p(x.to(TPU), n.to(TPU), out=base[1])
    torch.testing.assert_close(base[1].cpu(), torch.special.legendre_polynomial_p(x, n))
    assert base[0].abs().sum().item() == 0
    both_raise(NotImplementedError, torch.special.chebyshev_polynomial_t, x.bfloat16(), n.bfloat16())
    both_raise(RuntimeError, lambda a, b: torch.special.chebyshev_polynomial_t(a, b, out=torch.empty(6, dtype=torch.long, device=a.device)), x, n)


# --- igamma / igammac ------------------------------------------------------------------

def _gamma_inputs():
    a = torch.tensor([0.5, 1.0, 2.5, 9.0, 0.1, 3.0, 7.5, 30.0, 0.0, 0.0, -1.0, INF, INF, 2.0, 2.0, NAN, 150.0, 1.0])
    x = torch.tensor([0.3, 1.0, 2.0, 0.5, 8.0, 3.2, 9.0, 28.0, 1.0, 0.0, 1.0, 1.0, INF, 0.0, INF, 1.0, 140.0, 1.05])
    return a, x


@pytest.mark.parametrize("op", [torch.igamma, torch.igammac])
def test_igamma_values(op):
    a, x = _gamma_inputs()
    check(op, a, x)
    torch.manual_seed(0)
    ar = torch.empty(6, 7).uniform_(0.01, 9)
    xr = torch.empty(6, 7).uniform_(0.01, 9)
    check(op, ar, xr)
    check(op, ar[:, ::2], torch.tensor([0.5, 2.0, 4.0, 8.0]))  # broadcasting, non-contiguous
    check(op, ar.bfloat16(), xr.bfloat16())


@pytest.mark.parametrize("op", ["igamma", "igammac"])
def test_igamma_inplace_out_grad(op):
    fn = getattr(torch, op)
    torch.manual_seed(1)
    a = torch.empty(6, 7).uniform_(0.1, 5)
    x = torch.empty(6, 7).uniform_(0.1, 5)
    check(lambda p, q: getattr(p.clone(), op + "_")(q), a, x)
    check(lambda p, q: fn(p, q, out=torch.zeros(2, 6, 7, device=p.device)[1]), a, x)
    # Autograd differentiates only w.r.t. the second argument.
    xg = x.clone().requires_grad_()
    xt = x.to(TPU).requires_grad_()
    g = torch.randn(6, 7)
    fn(a, xg).backward(g)
    fn(a.to(TPU), xt).backward(g.to(TPU))
    torch.testing.assert_close(xt.grad.cpu(), xg.grad)
    both_raise(NotImplementedError, fn, torch.tensor([1, 2]), torch.tensor([1, 2]))


# --- polygamma at negative x -------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6])
def test_polygamma_negative_x(n):
    x = torch.tensor([-8.3, -3.7, -2.5, -0.4, -0.01, -5.99, 0.2, 1.5, 7.0, -1.0, -4.0])
    check(lambda t: torch.polygamma(n, t), x)


def test_polygamma_grad_random():
    # The OpInfo case: n = 3 on a 5x5 input over [-9, 9] (grad needs n = 4).
    torch.manual_seed(2)
    x = torch.empty(5, 5).uniform_(-9, 9)
    for n in range(5):
        check(lambda t: torch.polygamma(n, t), x, grad=True)
    check(lambda t: torch.special.polygamma(0, t), x, grad=True)


# --- nextafter ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nextafter(dtype):
    a = torch.tensor([0.0, 0.0, -0.0, 1.0, 1.0, -1.0, INF, NAN, 1.0, 3.5, -INF, 1e-40])
    b = torch.tensor([1.0, -1.0, 1.0, 2.0, 0.0, -2.0, 0.0, 1.0, NAN, 3.5, 0.0, 1.0])
    check(torch.nextafter, a.to(dtype), b.to(dtype))
    check(lambda p, q: torch.nextafter(p.t(), q), torch.randn(4, 3).to(dtype), torch.randn(4).to(dtype))
    check(lambda p, q: p.clone().nextafter_(q), torch.randn(3, 4).to(dtype), torch.zeros(4).to(dtype))
    check(lambda p, q: torch.nextafter(p, q, out=torch.zeros(2, 6, dtype=dtype, device=p.device)[1]),
          torch.randn(6).to(dtype), torch.full((6,), INF).to(dtype))


def test_nextafter_errors():
    both_raise(NotImplementedError, torch.nextafter, torch.tensor([1, 2]), torch.tensor([2, 3]))


# --- frexp -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_frexp(dtype):
    x = torch.tensor([0.0, -0.0, INF, -INF, NAN, 1e-40, -3e-45, 1.5, -6.0, 1e30, 0.75, 2.0 ** -126])
    check(torch.frexp, x.to(dtype))
    y = torch.randn(4, 6, dtype=dtype) * 100
    check(lambda t: torch.frexp(t.t()[1:]), y)
    m = torch.zeros(2, 12, dtype=dtype)
    e = torch.zeros(2, 12, dtype=torch.int32)
    mt, et = m.to(TPU), e.to(TPU)
    torch.frexp(x.to(dtype).to(TPU), out=(mt[1], et[1]))
    ref = torch.frexp(x.to(dtype))
    torch.testing.assert_close(mt[1].cpu(), ref.mantissa, equal_nan=True)
    torch.testing.assert_close(et[1].cpu(), ref.exponent)


def test_frexp_errors():
    both_raise(RuntimeError, torch.frexp, torch.tensor([1, 2]))
    x = torch.randn(3)
    both_raise(RuntimeError, lambda t: torch.frexp(t, out=(torch.empty(3, device=t.device),
                                                        torch.empty(3, dtype=torch.long, device=t.device))), x)
    both_raise(RuntimeError, lambda t: torch.frexp(t, out=(torch.empty(3, dtype=torch.double, device=t.device),
                                                        torch.empty(3, dtype=torch.int, device=t.device))), x)
