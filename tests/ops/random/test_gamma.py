"""torch._standard_gamma, torch._sample_dirichlet and their reparameterised
gradients on tpu (csrc/ops/random/gamma.cc). The draws are not CPU's
stream, so the samplers are checked against the distributions themselves
(Kolmogorov-Smirnov against scipy, mean and variance); the gradients are
deterministic and are checked elementwise against CPU's kernels."""
import math

import pytest
import scipy.stats
import torch

from tests.helpers import TPU, both_raise

N = 20000
# Kolmogorov-Smirnov p-value floor: a correct sampler fails it about once in
# 10,000 runs (the seed is fixed, so a pass is a pass), a wrong one always.
P_MIN = 1e-4


def _gamma_var_se(alpha, n):
    # Standard error of the sample variance: sqrt((mu4 - sigma^4) / n), with
    # Gamma's excess kurtosis 6 / alpha.
    return alpha * math.sqrt((2 + 6 / alpha) / n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("alpha", [0.1, 0.5, 1.0, 2.5, 30.0])
def test_standard_gamma_follows_the_distribution(alpha, dtype):
    x = torch._standard_gamma(torch.full((N,), alpha, dtype=dtype, device=TPU)).cpu()
    assert x.dtype == dtype and bool((x > 0).all())
    x = x.double()
    assert scipy.stats.kstest(x.numpy(), scipy.stats.gamma(alpha).cdf).pvalue > P_MIN
    # Mean and variance within 5 standard errors.
    assert abs(float(x.mean()) - alpha) < 5 * math.sqrt(alpha / N)
    assert abs(float(x.var()) - alpha) < 5 * _gamma_var_se(alpha, N)


def test_standard_gamma_per_element_alphas_shapes_and_seeds():
    alpha = torch.tensor([[0.2, 1.0, 4.0], [50.0, 0.7, 2.0]], device=TPU)
    torch.manual_seed(3)
    a = torch._standard_gamma(alpha.expand(4000, 2, 3)).cpu()
    torch.manual_seed(3)
    b = torch._standard_gamma(alpha.expand(4000, 2, 3)).cpu()
    assert a.shape == (4000, 2, 3) and torch.equal(a, b)  # reproducible from the seed
    assert not torch.equal(a, torch._standard_gamma(alpha.expand(4000, 2, 3)).cpu())
    # Each element follows its own alpha (mean within 5 standard errors).
    se = (alpha.cpu() / 4000).sqrt()
    assert bool(((a.mean(0) - alpha.cpu()).abs() < 5 * se).all())
    g = torch.Generator(device=TPU).manual_seed(1)
    s1 = torch._standard_gamma(alpha, generator=g)
    g.manual_seed(1)
    assert torch.equal(s1.cpu(), torch._standard_gamma(alpha, generator=g).cpu())
    for shape in [(0,), (2, 0, 3)]:
        assert torch._standard_gamma(torch.ones(shape, device=TPU)).shape == shape
    assert torch._standard_gamma(torch.tensor(2.0, device=TPU)).shape == ()


def test_standard_gamma_edge_values_as_cpu():
    # CPU floors every draw at the smallest normal: alpha = 0, and alpha < 0
    # (which yields NaN inside) give exactly that value.
    for dtype in [torch.float32, torch.float64]:
        a = torch.tensor([0.0, 0.0, -1.0], dtype=dtype)
        torch.testing.assert_close(torch._standard_gamma(a.to(TPU)).cpu(), torch._standard_gamma(a), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_standard_gamma_half_types(dtype):
    # CPU has no half kernels (CUDA does): draws in float32, rounded once.
    x = torch._standard_gamma(torch.full((N,), 3.0, dtype=dtype, device=TPU)).cpu()
    assert x.dtype == dtype and bool((x > 0).all())
    assert abs(float(x.double().mean()) - 3.0) < 5 * math.sqrt(3.0 / N) + 0.01  # + rounding bias bound


def test_samplers_and_grads_reject_bad_dtypes_as_cpu():
    ints = torch.tensor([1, 2])
    both_raise(NotImplementedError, torch._standard_gamma, ints)
    both_raise(NotImplementedError, torch._sample_dirichlet, ints)
    both_raise(NotImplementedError, torch._standard_gamma_grad, ints, ints)
    both_raise(NotImplementedError, torch._dirichlet_grad, ints, ints, ints)
    f, d = torch.ones(2), torch.ones(2, dtype=torch.float64)
    both_raise(RuntimeError, torch._standard_gamma_grad, f, d)
    both_raise(RuntimeError, torch._dirichlet_grad, d, f, f)
    both_raise(RuntimeError, torch._standard_gamma_grad, torch.ones(2), torch.ones(3))


# --- Dirichlet ----------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_sample_dirichlet_follows_the_distribution(dtype):
    conc = torch.tensor([0.1, 0.5, 1.0, 4.0], dtype=torch.float64)
    x = torch._sample_dirichlet(conc.to(dtype).to(TPU).expand(N, 4)).cpu()
    assert x.dtype == dtype and x.shape == (N, 4)
    torch.testing.assert_close(x.double().sum(-1), torch.ones(N, dtype=torch.float64), rtol=0, atol=1e-5)
    x = x.double()
    total = float(conc.sum())
    # Each component is Beta(a, total - a).
    for i, a in enumerate(conc.tolist()):
        beta = scipy.stats.beta(a, total - a)
        assert scipy.stats.kstest(x[:, i].numpy(), beta.cdf).pvalue > P_MIN, i
        assert abs(float(x[:, i].mean()) - beta.mean()) < 5 * beta.std() / math.sqrt(N), i


def test_sample_dirichlet_tiny_concentrations_stay_apart():
    # Dirichlet(1e-3, 1e-3): one component holds almost all the mass. CPU draws
    # gammas in double and floors them at DBL_MIN, so about a quarter of its
    # rows tie at 1/2; tpu normalises log-gammas and keeps them apart.
    x = torch._sample_dirichlet(torch.full((4000, 2), 1e-3, device=TPU)).cpu()
    assert float(((x[:, 0] - 0.5).abs() < 0.4).float().mean()) < 0.01
    assert 0.45 < float((x[:, 0] > 0.5).float().mean()) < 0.55  # symmetric


def test_sample_dirichlet_edge_values_and_shapes_as_cpu():
    # Deterministic cases: all-zero concentrations give the uniform vector,
    # one category CPU's largest value below 1.
    for dtype in [torch.float32, torch.float64]:
        for conc in [torch.zeros(2, 3, dtype=dtype), torch.full((3, 1), 2.0, dtype=dtype), torch.tensor(2.0)]:
            conc = conc.to(dtype)
            torch.testing.assert_close(torch._sample_dirichlet(conc.to(TPU)).cpu(), torch._sample_dirichlet(conc))
    for shape in [(0, 3), (2, 0)]:
        assert torch._sample_dirichlet(torch.ones(shape, device=TPU)).shape == shape
    conc = torch.tensor([[0.5, 2.0, 3.0]], device=TPU).expand(5, 3)
    torch.manual_seed(7)
    a = torch._sample_dirichlet(conc).cpu()
    torch.manual_seed(7)
    assert torch.equal(a, torch._sample_dirichlet(conc).cpu())


# --- gradients ------------------------------------------------------------------------

# Alpha ranges that reach every branch of the formulas: small alpha, around
# 1, the rational-approximation middle, and Rice's expansion above 8.
RANGES = [(1e-3, 0.5), (0.5, 2.0), (2.0, 8.0), (8.0, 60.0)]


def _gamma_pairs(lo, hi, dtype, n=4000):
    alpha = torch.empty(n, dtype=torch.float64).uniform_(lo, hi)
    x = torch._standard_gamma(alpha)  # CPU samples: the x the gradient is evaluated at
    # Values a sampler of `dtype` can return (XLA:CPU flushes subnormals).
    x = x.to(dtype).clamp_min(torch.finfo(dtype).tiny)
    return alpha.to(dtype), x


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lo,hi", RANGES)
def test_standard_gamma_grad_matches_cpu(lo, hi, dtype):
    alpha, x = _gamma_pairs(lo, hi, dtype)
    # Branch edges: x = 0.8, x = 0.9 alpha and 1.1 alpha, alpha = 8.
    alpha = torch.cat([alpha, torch.tensor([0.5, 3.0, 8.0, 8.0, 20.0, 20.0, 20.0], dtype=dtype)])
    x = torch.cat([x, torch.tensor([0.8, 0.8, 7.9, 8.1, 18.0, 20.0, 22.0], dtype=dtype)])
    expected = torch._standard_gamma_grad(alpha, x)
    torch.testing.assert_close(torch._standard_gamma_grad(alpha.to(TPU), x.to(TPU)).cpu(), expected)


# CPU's kernels resize their output to the broadcast shape, and warn.
RESIZE_WARNING = "ignore:An output with one or more elements was resized"


@pytest.mark.filterwarnings(RESIZE_WARNING)
def test_standard_gamma_grad_broadcasts_and_half_types():
    alpha, x = torch.tensor([[0.5], [3.0], [20.0]]), torch.tensor([0.3, 1.5, 25.0])
    torch.testing.assert_close(
        torch._standard_gamma_grad(alpha.to(TPU), x.to(TPU)).cpu(), torch._standard_gamma_grad(alpha, x)
    )
    # bfloat16 (no CPU kernel): CPU's float32 result, rounded.
    a16, x16 = alpha.bfloat16(), x.bfloat16()
    out = torch._standard_gamma_grad(a16.to(TPU), x16.to(TPU)).cpu()
    assert out.dtype == torch.bfloat16
    torch.testing.assert_close(out, torch._standard_gamma_grad(a16.float(), x16.float()).bfloat16())
    assert torch._standard_gamma_grad(torch.ones(0, device=TPU), torch.ones(0, device=TPU)).shape == (0,)


def _dirichlet_triples(lo, hi, dtype, n=3000, k=3):
    conc = torch.empty(n, k, dtype=torch.float64).uniform_(lo, hi)
    x = torch._sample_dirichlet(conc).to(dtype).clamp_min(torch.finfo(dtype).tiny)
    conc = conc.to(dtype)
    return x, conc, conc.sum(-1, keepdim=True).expand_as(conc).contiguous()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("lo,hi", [(1e-2, 0.5), (0.5, 3.0), (3.0, 10.0), (6.0, 40.0)])
def test_dirichlet_grad_matches_cpu(lo, hi, dtype):
    x, conc, total = _dirichlet_triples(lo, hi, dtype)
    out = torch._dirichlet_grad(x.to(TPU), conc.to(TPU), total.to(TPU)).cpu()
    expected = torch._dirichlet_grad(x, conc, total)
    if dtype == torch.float64:
        torch.testing.assert_close(out, expected)
        return
    # CPU runs the series next to x = 0 and x = 1 in float32 (tpu in double):
    # CPU is off from the double result by up to ~4e-6 relative there, so the
    # two agree to 1e-5; against CPU's double kernel they agree to float32's
    # own tolerance.
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)
    reference = torch._dirichlet_grad(x.double(), conc.double(), total.double()).float()
    torch.testing.assert_close(out, reference)


@pytest.mark.filterwarnings(RESIZE_WARNING)
def test_dirichlet_grad_broadcasts_and_rejects_half_types():
    x, conc, total = torch.tensor([[0.2, 0.7]]), torch.tensor([[1.0], [3.0]]), torch.tensor(5.0)
    torch.testing.assert_close(
        torch._dirichlet_grad(x.to(TPU), conc.to(TPU), total.to(TPU)).cpu(), torch._dirichlet_grad(x, conc, total)
    )
    h = torch.tensor([0.5], dtype=torch.bfloat16)
    both_raise(NotImplementedError, torch._dirichlet_grad, h, h, h)
