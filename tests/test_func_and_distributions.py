"""Sweeps of the libraries built on ATen, on tpu against CPU: torch.func
transforms, torch.nn.utils.parametrizations, and every common
torch.distributions family (sample on tpu, log_prob against CPU's on the
same samples). Each entry failed or had no kernel at some point."""
from __future__ import annotations

import pytest
import torch
import torch.distributions as D
from torch.func import functional_call, grad, hessian, jacfwd, jacrev, vmap
from torch.nn.utils import parametrizations as P

TPU = torch.device("tpu")


def _f(r):
    return (r.sin() * r).sum()


@pytest.mark.parametrize("name,transform", [
    ("grad", grad(_f)),
    ("vmap_grad", vmap(grad(_f))),
    ("jacrev", jacrev(lambda x: x.sin() * 2)),
    ("jacfwd", jacfwd(lambda x: x.cos() * 2)),
    ("hessian", lambda x: hessian(lambda r: (r ** 3).sum())(x[0])),
], ids=lambda v: v if isinstance(v, str) else "")
def test_torch_func_transforms_match_cpu(name, transform):
    x = torch.randn(4, 3)
    torch.testing.assert_close(transform(x.to(TPU)).cpu(), transform(x))


def test_functional_call_matches_cpu():
    lin = torch.nn.Linear(3, 2)
    params = dict(lin.named_parameters())
    x = torch.randn(4, 3)
    got = functional_call(lin, {k: v.to(TPU) for k, v in params.items()}, (x.to(TPU),))
    torch.testing.assert_close(got.cpu(), functional_call(lin, params, (x,)))


@pytest.mark.parametrize("make", [P.orthogonal, P.weight_norm, P.spectral_norm],
                         ids=["orthogonal", "weight_norm", "spectral_norm"])
def test_parametrizations_forward_and_backward_match_cpu(make):
    torch.manual_seed(0)
    ref = make(torch.nn.Linear(3, 3)).eval()  # eval: spectral_norm's power iteration does not run
    torch.manual_seed(0)
    mod = make(torch.nn.Linear(3, 3)).to(TPU).eval()
    x = torch.randn(5, 3)
    # orthogonal goes through matrix_exp (a Padé approximant): float32 noise.
    torch.testing.assert_close(mod(x.to(TPU)).cpu(), ref(x), rtol=1e-4, atol=1e-5)
    mod(x.to(TPU)).sum().backward()
    ref(x).sum().backward()
    for (name, p), (_, q) in zip(mod.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-5, msg=name)


def _families(d):
    def full(v, n=3):
        return torch.full((n,), v, device=d)

    return {
        "normal": D.Normal(full(0.0), full(1.0)),
        "bernoulli": D.Bernoulli(full(0.3)),
        "categorical": D.Categorical(logits=torch.zeros(3, 4, device=d)),
        "multinomial": D.Multinomial(5, full(0.25, 4)),
        "multivariate_normal": D.MultivariateNormal(torch.zeros(2, device=d), torch.eye(2, device=d)),
        "uniform": D.Uniform(full(0.0), full(1.0)),
        "exponential": D.Exponential(full(1.0)),
        "laplace": D.Laplace(full(0.0), full(1.0)),
        "cauchy": D.Cauchy(full(0.0), full(1.0)),
        "gamma": D.Gamma(full(1.5), full(1.0)),
        "beta": D.Beta(full(1.0), full(2.0)),
        "dirichlet": D.Dirichlet(full(1.0)),
        "student_t": D.StudentT(full(3.0)),
        "chi2": D.Chi2(full(3.0)),
        "poisson": D.Poisson(full(3.0)),
        "binomial": D.Binomial(10, full(0.3)),
        "geometric": D.Geometric(full(0.3)),
        "log_normal": D.LogNormal(full(0.0), full(1.0)),
        "gumbel": D.Gumbel(full(0.0), full(1.0)),
        "von_mises": D.VonMises(full(0.0), full(1.0)),
        "negative_binomial": D.NegativeBinomial(5, full(0.3)),
        "lkj_cholesky": D.LKJCholesky(3, torch.tensor(1.0, device=d)),
        "wishart": D.Wishart(torch.tensor(4.0, device=d), torch.eye(2, device=d)),
        "relaxed_bernoulli": D.RelaxedBernoulli(torch.tensor(0.5, device=d), probs=full(0.3)),
    }


@pytest.mark.parametrize("family", list(_families("cpu")))
def test_distribution_samples_on_tpu_and_log_prob_matches_cpu(family):
    torch.manual_seed(0)
    s = _families(TPU)[family].sample((5,))
    assert s.device.type == "tpu"
    expected = _families("cpu")[family].log_prob(s.cpu())
    # Special functions (lgamma, digamma, log1p) on XLA:CPU and CPU differ
    # in the last float32 bits.
    torch.testing.assert_close(_families(TPU)[family].log_prob(s).cpu(), expected, rtol=1e-4, atol=1e-4)
