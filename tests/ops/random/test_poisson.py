"""torch.poisson on tpu (csrc/ops/random/random.cc). The draws are not CPU's
stream, so they are checked against the Poisson distribution itself: the
frequency of every value against its probability (a chi-square bound), the
mean and the variance, on both sampling paths (below and above rate 10)."""
import math

import pytest
import torch

from tests.helpers import both_raise

TPU = torch.device("tpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("rate", [0.3, 3.0, 9.5, 10.0, 15.0, 60.0])
def test_poisson_follows_the_distribution(rate, dtype):
    n = 40000
    torch.manual_seed(0)
    x = torch.poisson(torch.full((n,), rate, dtype=dtype, device=TPU)).cpu()
    assert x.dtype == dtype and bool((x >= 0).all()) and bool((x == x.round()).all())
    # Chi-square over the values with an expected count of at least 20,
    # the rest pooled at each tail. 99.99th percentile bound: a correct
    # sampler fails this about once in 10,000 runs, a biased one always.
    counts = torch.bincount(x.long()).double()
    ks = torch.arange(len(counts) + 200, dtype=torch.float64)
    pmf = torch.exp(ks * math.log(rate) - rate - torch.lgamma(ks + 1))
    keep = (pmf * n >= 20).nonzero().flatten()
    lo, hi = int(keep[0]), int(keep[-1])
    obs = torch.zeros(len(ks), dtype=torch.float64)
    obs[: len(counts)] = counts
    o = torch.cat([obs[:lo].sum(0, keepdim=True), obs[lo: hi + 1], obs[hi + 1:].sum(0, keepdim=True)])
    e = torch.cat([pmf[:lo].sum(0, keepdim=True), pmf[lo: hi + 1], 1 - pmf[: hi + 1].sum(0, keepdim=True)]) * n
    mask = e > 0
    chi2 = float(((o[mask] - e[mask]) ** 2 / e[mask]).sum())
    dof = int(mask.sum()) - 1
    assert chi2 < dof + 4.5 * math.sqrt(2 * dof) + 10, (chi2, dof)
    # Mean within 5 standard errors.
    assert abs(float(x.double().mean()) - rate) < 5 * math.sqrt(rate / n)


def test_poisson_of_zero_rates_shapes_and_seeds():
    rates = torch.tensor([[0.0, 2.0, 50.0], [0.0, 0.5, 11.0]], device=TPU)
    torch.manual_seed(3)
    a = torch.poisson(rates).cpu()
    torch.manual_seed(3)
    b = torch.poisson(rates).cpu()
    assert a.shape == (2, 3) and torch.equal(a, b)  # reproducible from the seed
    assert bool((a[:, 0] == 0).all())
    assert torch.poisson(torch.empty(0, 3, device=TPU)).shape == (0, 3)
    g = torch.Generator(device=TPU).manual_seed(1)
    assert torch.poisson(rates, generator=g).device.type == "tpu"


def test_poisson_distribution_samples_on_tpu():
    d = torch.distributions.Poisson(torch.tensor([4.0, 40.0], device=TPU))
    s = d.sample((2000,))
    assert s.shape == (2000, 2) and s.device.type == "tpu"
    torch.testing.assert_close(s.mean(0).cpu(), torch.tensor([4.0, 40.0]), rtol=0.05, atol=0)


def test_poisson_of_integers_raises_as_cpu():
    both_raise(NotImplementedError, torch.poisson, torch.tensor([1, 2]))
