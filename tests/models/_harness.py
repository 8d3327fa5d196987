"""Shared driver for the model acceptance tests: trains the same model from
the same initial weights and data on CPU and on tpu, and compares what the
two produce. CPU fallback is off (tests/conftest.py), and every test also
asserts that no op fell back."""
from __future__ import annotations

import copy
import os

import torch

import torch_tpu
from tests.helpers import TPU


def to(batch, device):
    return tuple(b.to(device) for b in batch)


def train(model, make_opt, loss_fn, batches, device):
    """Runs len(batches) optimizer steps. Returns (losses, grads after the
    first backward by parameter name, final parameters by name)."""
    model = copy.deepcopy(model).to(device)
    # Module.to() keeps a shared (tied) Parameter shared only when the old and
    # new tensors have "compatible shallow-copy types", which PyTorch grants
    # to CPU<->CUDA but not to PrivateUse1: moving to tpu re-creates each
    # module's Parameter separately and silently unties them. So models
    # re-tie after the move (as torch_xla documents for XLA devices).
    if hasattr(model, "tie_weights"):
        model.tie_weights()
    opt = make_opt(model.parameters())
    run = model
    # TORCH_TPU_TEST_COMPILE=1 (make test-modes) trains the tpu model through
    # torch.compile(backend="tpu"); TORCH_TPU_DEFER_AND_FUSE=1 runs fused eager.
    if device.type == "tpu" and os.environ.get("TORCH_TPU_TEST_COMPILE", "0") != "0":
        torch._dynamo.reset()
        run = torch.compile(model, backend="tpu")
    losses, first_grads = [], None
    for i, batch in enumerate(batches):
        opt.zero_grad()
        loss = loss_fn(run, *to(batch, device))
        loss.backward()
        if i == 0:
            first_grads = {n: p.grad.detach().cpu().clone() for n, p in model.named_parameters()
                           if p.grad is not None}
        opt.step()
        losses.append(loss.detach().cpu())
    params = {n: p.detach().cpu() for n, p in model.named_parameters()}
    return torch.stack(losses), first_grads, params


def reset_fallbacks():
    torch_tpu.debug.reset_metrics()


def assert_no_fallbacks():
    fb = torch_tpu.debug.metrics()["fallbacks"]
    assert not fb, f"ops fell back to CPU: {fb}"


def compare_training(model, make_opt, loss_fn, batches, *, loss_tol, grad_tol):
    """Trains on both devices and asserts: every step's loss matches within
    loss_tol, every parameter gradient of the first step within grad_tol, and
    that the tpu run used no CPU fallback. Returns the tpu losses."""
    cpu_losses, cpu_grads, _ = train(model, make_opt, loss_fn, batches, torch.device("cpu"))
    reset_fallbacks()
    tpu_losses, tpu_grads, _ = train(model, make_opt, loss_fn, batches, TPU)
    assert_no_fallbacks()
    assert tpu_grads.keys() == cpu_grads.keys(), "different parameters received gradients"
    assert cpu_grads, "no parameter received a gradient"
    for name, g in cpu_grads.items():
        torch.testing.assert_close(tpu_grads[name], g, **grad_tol, msg=lambda m: f"grad of {name}: {m}")
    torch.testing.assert_close(tpu_losses, cpu_losses, **loss_tol)
    return tpu_losses
