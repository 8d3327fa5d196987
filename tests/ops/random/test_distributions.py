"""torch.distributions on tpu through the gamma-family kernels
(csrc/ops/random/gamma.cc): .sample() of Gamma, Beta, Dirichlet, StudentT,
Chi2 and Binomial against their moments, and the reparameterised gradients
of Gamma/Beta/Dirichlet.rsample() against CPU's gradient kernels evaluated
at the same samples."""
import pytest
import torch
from torch import distributions as D

from tests.helpers import TPU

N = 20000
CONC = [0.5, 2.0, 7.0]


def _t(values, dtype=torch.float32):
    return torch.tensor(values, dtype=dtype, device=TPU)


@pytest.mark.parametrize(
    "make",
    [
        lambda: D.Gamma(_t(CONC), _t(2.0)),
        lambda: D.Beta(_t(CONC), _t(CONC) + 1),
        lambda: D.Dirichlet(torch.stack([_t(CONC), _t(CONC) + 1])),
        lambda: D.StudentT(_t([6.0, 10.0]), _t([1.0, -2.0]), _t([1.0, 3.0])),
        lambda: D.Chi2(_t([1.0, 4.0])),
        lambda: D.Binomial(_t([10.0, 1000.0]), probs=_t([0.2, 0.7])),
    ],
    ids=["gamma", "beta", "dirichlet", "studentt", "chi2", "binomial"],
)
def test_samples_follow_their_moments(make):
    d = make()
    s = d.sample((N,))
    assert s.device.type == "tpu" and s.shape == (N,) + d.batch_shape + d.event_shape
    s = s.cpu().double()
    mean, var = d.mean.cpu().double(), d.variance.cpu().double()
    # Mean within 5 standard errors; variance within 12% (at least 4 of its
    # standard errors for every case here: excess kurtosis at most 12).
    assert bool(((s.mean(0) - mean).abs() < 5 * (var / N).sqrt()).all()), (s.mean(0), mean)
    assert bool(((s.var(0) / var - 1).abs() < 0.12).all()), (s.var(0), var)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gamma_rsample_gradient(dtype):
    conc = _t(CONC, dtype).requires_grad_()
    s = D.Gamma(conc, torch.ones_like(conc)).rsample((500,))  # rate 1: s is the standard draw
    w = torch.randn(500, 3, dtype=dtype)
    (s * w.to(TPU)).sum().backward()
    x = s.detach().cpu()
    expected = (torch._standard_gamma_grad(conc.detach().cpu().expand(500, 3), x) * w).sum(0)
    torch.testing.assert_close(conc.grad.cpu(), expected)


def _dirichlet_backward(x, conc, g):
    # torch.distributions.dirichlet._Dirichlet_backward, on CPU.
    total = conc.sum(-1, True).expand_as(conc)
    return torch._dirichlet_grad(x, conc, total) * (g - (x * g).sum(-1, True))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_dirichlet_rsample_gradient(dtype):
    conc = _t(CONC, dtype).requires_grad_()
    x = D.Dirichlet(conc).rsample((500,))
    w = torch.randn(500, 3, dtype=dtype)
    (x * w.to(TPU)).sum().backward()
    expected = _dirichlet_backward(x.detach().cpu(), conc.detach().cpu().expand(500, 3), w).sum(0)
    torch.testing.assert_close(conc.grad.cpu(), expected)


def test_beta_rsample_gradient():
    a, b = _t(CONC).requires_grad_(), (_t(CONC) + 1).requires_grad_()
    x0 = D.Beta(a, b).rsample((500,))  # the first component of Dirichlet([a, b])
    w = torch.randn(500, 3)
    (x0 * w.to(TPU)).sum().backward()
    x0 = x0.detach().cpu()
    # The second component is 1 - x0 up to rounding, which moves the result
    # by a few float32 ulps of x: hence rtol 1e-4.
    x = torch.stack([x0, 1 - x0], -1)
    conc = torch.stack([a.detach().cpu(), b.detach().cpu()], -1).expand(500, 3, 2)
    g = _dirichlet_backward(x, conc, torch.stack([w, torch.zeros_like(w)], -1)).sum(0)
    torch.testing.assert_close(a.grad.cpu(), g[:, 0], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(b.grad.cpu(), g[:, 1], rtol=1e-4, atol=1e-5)
