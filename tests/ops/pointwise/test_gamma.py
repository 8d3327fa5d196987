"""The gamma family vs CPU (csrc/ops/pointwise/gamma.cc): lgamma, digamma,
polygamma (incl. negative x and poles), igamma/igammac, and nextafter and
frexp."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check, rnd, to_tpu, tols
from tests.ops.pointwise._common import check_equal_nan

NAN, INF = float("nan"), float("inf")


# --- igamma / igammac ------------------------------------------------------------------

def _gamma_inputs():
    a = torch.tensor([0.5, 1.0, 2.5, 9.0, 0.1, 3.0, 7.5, 30.0, 0.0, 0.0, -1.0, INF, INF, 2.0, 2.0, NAN, 150.0, 1.0])
    x = torch.tensor([0.3, 1.0, 2.0, 0.5, 8.0, 3.2, 9.0, 28.0, 1.0, 0.0, 1.0, 1.0, INF, 0.0, INF, 1.0, 140.0, 1.05])
    return a, x


@pytest.mark.parametrize("op", [torch.igamma, torch.igammac])
def test_igamma_values(op):
    a, x = _gamma_inputs()
    check_equal_nan(op, a, x)
    torch.manual_seed(0)
    ar = torch.empty(6, 7).uniform_(0.01, 9)
    xr = torch.empty(6, 7).uniform_(0.01, 9)
    check_equal_nan(op, ar, xr)
    check_equal_nan(op, ar[:, ::2], torch.tensor([0.5, 2.0, 4.0, 8.0]))  # broadcasting, non-contiguous
    check_equal_nan(op, ar.bfloat16(), xr.bfloat16())


@pytest.mark.parametrize("op", ["igamma", "igammac"])
def test_igamma_inplace_out_grad(op):
    fn = getattr(torch, op)
    torch.manual_seed(1)
    a = torch.empty(6, 7).uniform_(0.1, 5)
    x = torch.empty(6, 7).uniform_(0.1, 5)
    check_equal_nan(lambda p, q: getattr(p.clone(), op + "_")(q), a, x)
    check_equal_nan(lambda p, q: fn(p, q, out=torch.zeros(2, 6, 7, device=p.device)[1]), a, x)
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
    check_equal_nan(lambda t: torch.polygamma(n, t), x)


def test_polygamma_grad_random():
    # The OpInfo case: n = 3 on a 5x5 input over [-9, 9] (grad needs n = 4).
    torch.manual_seed(2)
    x = torch.empty(5, 5).uniform_(-9, 9)
    for n in range(5):
        check_equal_nan(lambda t: torch.polygamma(n, t), x, grad=True)
    check_equal_nan(lambda t: torch.special.polygamma(0, t), x, grad=True)


# --- nextafter ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_nextafter(dtype):
    a = torch.tensor([0.0, 0.0, -0.0, 1.0, 1.0, -1.0, INF, NAN, 1.0, 3.5, -INF, 1e-40])
    b = torch.tensor([1.0, -1.0, 1.0, 2.0, 0.0, -2.0, 0.0, 1.0, NAN, 3.5, 0.0, 1.0])
    check_equal_nan(torch.nextafter, a.to(dtype), b.to(dtype))
    check_equal_nan(lambda p, q: torch.nextafter(p.t(), q), torch.randn(4, 3).to(dtype), torch.randn(4).to(dtype))
    check_equal_nan(lambda p, q: p.clone().nextafter_(q), torch.randn(3, 4).to(dtype), torch.zeros(4).to(dtype))
    check_equal_nan(lambda p, q: torch.nextafter(p, q, out=torch.zeros(2, 6, dtype=dtype, device=p.device)[1]),
          torch.randn(6).to(dtype), torch.full((6,), INF).to(dtype))


def test_nextafter_errors():
    both_raise(NotImplementedError, torch.nextafter, torch.tensor([1, 2]), torch.tensor([2, 3]))


# --- frexp -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_frexp(dtype):
    x = torch.tensor([0.0, -0.0, INF, -INF, NAN, 1e-40, -3e-45, 1.5, -6.0, 1e30, 0.75, 2.0 ** -126])
    check_equal_nan(torch.frexp, x.to(dtype))
    y = torch.randn(4, 6, dtype=dtype) * 100
    check_equal_nan(lambda t: torch.frexp(t.t()[1:]), y)
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


# --- lgamma / digamma / polygamma -----------------------------------------------------

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


@pytest.mark.parametrize("n", [1, 2, 3])
def test_polygamma_negative_and_poles(n):
    x = torch.tensor([-2.5, -1.0, -0.5, 0.0, 0.3, 1.0, -8.7, 0.2, -3.3])
    if n == 1:
        x = x[x != -1.0]  # CPU's value at this pole is 1/sin(pi*x)^2 rounding noise
    # the reflection formula cancels digits near the poles: 1e-3 relative
    check(lambda t: torch.polygamma(n, t), x, atol=1e-3, rtol=1e-3)


def test_polygamma_out_inplace_and_layout():
    x = rnd(4, 5, lo=0.5, hi=4.0)
    check(lambda t, o: (torch.polygamma(2, t, out=o[:, ::2]), o)[1], x, torch.zeros(4, 10))
    check(lambda t: t.clone().polygamma_(1), x)
    check(lambda t, o: (torch.polygamma(1, t, out=o), o)[1], torch.arange(1, 6), torch.empty(0))
    # Results of these TensorIterator ops take a transposed operand's layout, as on CPU.
    xt = x.t()
    for fn in (lambda t: torch.polygamma(1, t), lambda t: torch.igamma(t, t), lambda t: torch.nextafter(t, t * 2)):
        e, a = fn(xt), fn(xt.to(TPU))
        assert a.stride() == e.stride(), (a.stride(), e.stride())
        torch.testing.assert_close(a.cpu(), e)
