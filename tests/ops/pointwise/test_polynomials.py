"""Orthogonal polynomials (torch.special.*_polynomial_*) against PyTorch CPU
(csrc/ops/pointwise/polynomials.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, to_tpu, tols
from tests.ops.pointwise._common import check_equal_nan as check

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
