"""torch.binomial on tpu (csrc/ops/random/gamma.cc). The draws are not CPU's
stream, so they are checked against the binomial distribution itself: the
frequency of every value against its probability (a chi-square bound) and
the mean, on both sampling paths (inversion below count * min(p, 1 - p) =
10, BTRS rejection above) and their reflections for p > 0.5."""
import math

import pytest
import torch

from tests.helpers import TPU, both_raise

N = 20000


def _chi2_against_pmf(x, count, p):
    n = x.numel()
    ks = torch.arange(count + 1, dtype=torch.float64)
    lpmf = (
        torch.lgamma(torch.tensor(count + 1.0, dtype=torch.float64))
        - torch.lgamma(ks + 1)
        - torch.lgamma(count - ks + 1)
        + ks * math.log(p)
        + (count - ks) * math.log1p(-p)
    )
    pmf = lpmf.exp()
    obs = torch.bincount(x.long(), minlength=count + 1).double()
    # Values with an expected count of at least 20, the rest pooled at
    # each tail; 99.99th-percentile bound as in test_poisson.py.
    keep = (pmf * n >= 20).nonzero().flatten()
    lo, hi = int(keep[0]), int(keep[-1])
    o = torch.cat([obs[:lo].sum(0, keepdim=True), obs[lo: hi + 1], obs[hi + 1:].sum(0, keepdim=True)])
    e = torch.cat([pmf[:lo].sum(0, keepdim=True), pmf[lo: hi + 1], pmf[hi + 1:].sum(0, keepdim=True)]) * n
    mask = e > 0
    chi2 = float(((o[mask] - e[mask]) ** 2 / e[mask]).sum())
    dof = int(mask.sum()) - 1
    return chi2, dof


@pytest.mark.parametrize(
    "count,p,dtype",
    [
        (5, 0.3, torch.float32),  # inversion
        (30, 0.2, torch.float64),  # inversion, mean 6
        (25, 0.5, torch.float32),  # BTRS at its smallest spread
        (1000, 0.3, torch.float32),  # BTRS
        (1000, 0.3, torch.float64),
        (1000, 0.005, torch.float32),  # inversion with a large count
        (200, 0.98, torch.float32),  # reflected inversion
        (1000, 0.97, torch.float64),  # reflected BTRS
    ],
)
def test_binomial_follows_the_distribution(count, p, dtype):
    x = torch.binomial(
        torch.full((N,), float(count), dtype=dtype, device=TPU), torch.full((N,), p, dtype=dtype, device=TPU)
    ).cpu()
    assert x.dtype == dtype
    assert bool((x == x.round()).all()) and bool((x >= 0).all()) and bool((x <= count).all())
    chi2, dof = _chi2_against_pmf(x, count, p)
    assert chi2 < dof + 4.5 * math.sqrt(2 * dof) + 10, (chi2, dof)
    # Mean within 5 standard errors.
    assert abs(float(x.double().mean()) - count * p) < 5 * math.sqrt(count * p * (1 - p) / N)


def test_binomial_edge_values_as_cpu():
    # CPU's cases: count <= 0 or p <= 0 give 0, p >= 1 gives count, NaN p NaN.
    count = torch.tensor([0.0, -3.0, 5.0, 5.0, 5.0, 5.0, 7.0, 12.0])
    prob = torch.tensor([0.5, 0.5, 0.0, -0.5, 1.0, 1.5, float("nan"), 1.0])
    torch.testing.assert_close(
        torch.binomial(count.to(TPU), prob.to(TPU)).cpu(), torch.binomial(count, prob), equal_nan=True
    )


def test_binomial_broadcasts_seeds_and_shapes():
    count, prob = torch.tensor([[10.0], [400.0]], device=TPU), torch.tensor([0.1, 0.5, 0.9], device=TPU)
    torch.manual_seed(5)
    a = torch.binomial(count, prob).cpu()
    torch.manual_seed(5)
    assert a.shape == (2, 3) and torch.equal(a, torch.binomial(count, prob).cpu())
    assert torch.binomial(torch.full((2,), 5.0, device=TPU), torch.full((1,), 0.5, device=TPU)).shape == (2,)
    g = torch.Generator(device=TPU).manual_seed(2)
    b = torch.binomial(count, prob, generator=g).cpu()
    g.manual_seed(2)
    assert torch.equal(b, torch.binomial(count, prob, generator=g).cpu())
    for shape in [(0,), (3, 0)]:
        assert torch.binomial(torch.ones(shape, device=TPU), torch.ones(shape, device=TPU)).shape == shape


def test_binomial_bfloat16():
    # No CPU kernel (CUDA has one); counts below 256 are exact in bfloat16.
    x = torch.binomial(
        torch.full((N,), 40.0, dtype=torch.bfloat16, device=TPU), torch.full((N,), 0.25, dtype=torch.bfloat16, device=TPU)
    ).cpu()
    assert x.dtype == torch.bfloat16 and bool((x == x.round()).all())
    assert abs(float(x.double().mean()) - 10.0) < 5 * math.sqrt(7.5 / N)


def test_binomial_bad_input_raises_as_cpu():
    f = torch.tensor([10.0, 10.0])
    both_raise(ValueError, torch.binomial, torch.tensor([10, 10]), f)  # integer count
    both_raise(ValueError, torch.binomial, f, torch.tensor([1, 0]))  # integer prob
    both_raise(RuntimeError, torch.binomial, f, f.double() / 20)  # mixed dtypes
    both_raise(RuntimeError, torch.binomial, f, torch.full((3,), 0.5))  # shapes
