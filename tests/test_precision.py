"""torch.set_float32_matmul_precision picks the StableHLO dot precision
(highest -> HIGHEST, high -> HIGH, medium -> DEFAULT) for float32 products;
each setting is its own program, and results stay close to CPU."""
import pytest
import torch
from helpers import TPU

import torch_tpu.debug

# Per setting: the tolerance a TPU needs. HIGHEST is full f32 (the default
# f32 tolerance); HIGH is 3-pass bf16 (~f32 within a few ulps times K);
# MEDIUM/DEFAULT is a single bf16 pass: ~2^-8 relative error per product,
# ~0.4% * sqrt(K) * |a||b| for K=32 standard-normal operands.
TOLS = {
    "highest": {},
    "high": dict(atol=1e-3, rtol=1e-3),
    "medium": dict(atol=5e-2, rtol=1.6e-2),
}


@pytest.fixture(autouse=True)
def _restore_precision():
    old = torch.get_float32_matmul_precision()
    yield
    torch.set_float32_matmul_precision(old)


def _compiles():
    torch.tpu.synchronize()
    return torch_tpu.debug.metrics()["compiles"]


# Shapes used nowhere else in the suite, so the first call always compiles.
def _operands(dtype=torch.float32):
    g = torch.Generator().manual_seed(0)
    return torch.randn(13, 32, generator=g).to(dtype), torch.randn(32, 11, generator=g).to(dtype)


@pytest.mark.parametrize("op", ["mm", "matmul", "addmm", "bmm"])
def test_each_setting_is_its_own_program(op):
    a, b = _operands()
    c = torch.randn(13, 11)
    fns = {
        "mm": lambda a, b, c: torch.mm(a, b),
        "matmul": lambda a, b, c: a[:7] @ b,  # a shape of its own (mm above compiled 13x11)
        "addmm": lambda a, b, c: torch.addmm(c, a, b, beta=0.5),
        "bmm": lambda a, b, c: torch.bmm(a.unsqueeze(0), b.unsqueeze(0) + 1),
    }
    fn = fns[op]
    ta, tb, tc = a.to(TPU), b.to(TPU), c.to(TPU)
    new_programs = {}
    for setting in ("highest", "high", "medium"):
        torch.set_float32_matmul_precision(setting)
        before = _compiles()
        out = fn(ta, tb, tc)
        new_programs[setting] = _compiles() - before
        torch.testing.assert_close(out.cpu(), fn(a, b, c), **TOLS[setting])
    # A setting not seen before compiles a new program (the dot's
    # precision_config is part of it) ...
    assert new_programs["high"] >= 1 and new_programs["medium"] >= 1, new_programs
    # ... and switching back reuses the cached one.
    for setting in ("highest", "high", "medium"):
        torch.set_float32_matmul_precision(setting)
        before = _compiles()
        fn(ta, tb, tc)
        assert _compiles() == before, setting


def test_setting_does_not_affect_bfloat16():
    """Only float32 products read the setting; bf16 always uses DEFAULT."""
    a, b = _operands(torch.bfloat16)
    ta, tb = a.to(TPU), b.to(TPU)
    torch.set_float32_matmul_precision("highest")
    ta @ tb
    for setting in ("high", "medium"):
        torch.set_float32_matmul_precision(setting)
        before = _compiles()
        out = ta @ tb
        assert _compiles() == before, setting
    torch.testing.assert_close(out.cpu(), a @ b, atol=1e-2, rtol=1.6e-2)


def test_linear_backward_follows_setting():
    torch.set_float32_matmul_precision("medium")
    x = torch.randn(6, 17, requires_grad=True)
    lin = torch.nn.Linear(17, 9)
    tlin = torch.nn.Linear(17, 9).to(TPU)
    tlin.load_state_dict(lin.state_dict())
    tx = x.detach().to(TPU).requires_grad_()
    lin(x).sum().backward()
    tlin(tx).sum().backward()
    torch.testing.assert_close(tx.grad.cpu(), x.grad, **TOLS["medium"])
    torch.testing.assert_close(tlin.weight.grad.cpu(), lin.weight.grad, **TOLS["medium"])
