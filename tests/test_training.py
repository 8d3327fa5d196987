"""End to end: a 2-layer MLP (Linear-ReLU-Linear, CrossEntropyLoss) trained
for 50 steps on tpu and on CPU from the same init and data must follow the
same loss curve, with SGD(momentum) and AdamW, foreach and per-tensor
optimizer paths."""
import copy

import pytest
import torch
import torch.nn as nn

from tests.helpers import TPU


def needs(*ops):
    """Skips until kernels owned by other op families are registered."""
    missing = [o for o in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{o}", "PrivateUse1")]
    return pytest.mark.skipif(bool(missing), reason=f"tpu kernels missing: {missing}")


# relu/threshold_backward (elementwise), sum (the bias gradient of Linear).
MLP_OPS = ("relu", "threshold_backward", "sum.dim_IntList")
# AdamW's per-tensor and foreach paths: lerp_, addcmul_, sqrt, addcdiv_.
ADAM_OPS = ("lerp_.Scalar", "addcmul_", "addcdiv_", "sqrt")

STEPS = 50
BATCHES = 4


def data():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCHES, 32, 20, generator=g)
    y = torch.randint(0, 5, (BATCHES, 32), generator=g)
    return x, y


def make_opt(kind, params, foreach):
    if kind == "sgd":
        return torch.optim.SGD(params, lr=0.05, momentum=0.9, foreach=foreach)
    return torch.optim.AdamW(params, lr=1e-2, weight_decay=0.05, foreach=foreach)


def train(model, device, kind, foreach):
    model = copy.deepcopy(model).to(device)
    opt = make_opt(kind, model.parameters(), foreach)
    loss_fn = nn.CrossEntropyLoss()
    x, y = data()
    x, y = x.to(device), y.to(device)
    losses = []
    for step in range(STEPS):
        opt.zero_grad()
        loss = loss_fn(model(x[step % BATCHES]), y[step % BATCHES])
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack([l.cpu() for l in losses]), [p.detach().cpu() for p in model.parameters()]


def mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(20, 32), nn.ReLU(), nn.Linear(32, 5))


# Tolerance: the tpu program sums in a different order than CPU's
# MKL/OpenMP kernels, so each step differs by f32 rounding (~1e-7
# relative). 50 optimizer steps amplify this a little (momentum and Adam's
# 1/sqrt(v) scaling), but training here is not chaotic: observed drift is
# ~1e-6, so 1e-4 relative / 1e-5 absolute leaves margin while still
# catching any real mistake (a wrong gradient changes the curve at 1e-2).
TOL = dict(rtol=1e-4, atol=1e-5)


@needs(*MLP_OPS)
@pytest.mark.parametrize("foreach", [False, True])
def test_mlp_sgd_momentum(foreach):
    model = mlp()
    cpu_losses, cpu_params = train(model, "cpu", "sgd", foreach)
    tpu_losses, tpu_params = train(model, TPU, "sgd", foreach)
    assert cpu_losses[-1] < cpu_losses[0] * 0.7, "the reference run should learn"
    for step in range(STEPS):
        torch.testing.assert_close(tpu_losses[step], cpu_losses[step], **TOL, msg=f"step {step}")
    for t, c in zip(tpu_params, cpu_params):
        torch.testing.assert_close(t, c, rtol=1e-4, atol=1e-4)


@needs(*MLP_OPS, *ADAM_OPS)
@pytest.mark.parametrize("foreach", [False, True])
def test_mlp_adamw(foreach):
    model = mlp()
    cpu_losses, cpu_params = train(model, "cpu", "adamw", foreach)
    tpu_losses, tpu_params = train(model, TPU, "adamw", foreach)
    assert cpu_losses[-1] < cpu_losses[0] * 0.7, "the reference run should learn"
    for step in range(STEPS):
        torch.testing.assert_close(tpu_losses[step], cpu_losses[step], **TOL, msg=f"step {step}")
    for t, c in zip(tpu_params, cpu_params):
        torch.testing.assert_close(t, c, rtol=1e-4, atol=1e-4)


def test_optimizer_defaults_to_foreach_on_tpu():
    # torch.optim picks the foreach path for PrivateUse1 by default, which
    # is why the _foreach_* kernels are needed at all.
    from torch.optim.optimizer import _default_to_fused_or_foreach

    p = [torch.zeros(2, device=TPU, requires_grad=True)]
    _, foreach = _default_to_fused_or_foreach(p, differentiable=False, use_fused=False)
    assert foreach
