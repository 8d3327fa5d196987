"""native_dropout (+ backward): F.dropout's identity cases, statistics, RNG
reproducibility and the backward kernel's dtypes (csrc/ops/nn/dropout.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, check, rnd

# --- dropout -------------------------------------------------------------------------

def test_dropout_identity():
    x = torch.randn(10, 10)
    check(lambda x: F.dropout(x, 0.0, training=True), x, grad=True)
    check(lambda x: F.dropout(x, 0.5, training=False), x, grad=True)
    tx = x.to(TPU)
    out, mask = torch.native_dropout(tx, 0.5, False)
    torch.testing.assert_close(out.cpu(), x)
    assert mask.cpu().all()


def test_dropout_statistics_and_grad():
    p = 0.3
    x = torch.randn(200, 100).abs() + 0.1  # nonzero, so zeros mark dropped elements
    tx = x.to(TPU).requires_grad_()
    y = F.dropout(tx, p, training=True)
    yc = y.detach().cpu()
    kept = yc != 0
    frac = kept.float().mean().item()
    # 20000 Bernoulli(0.7) draws: std of the mean is ~0.003.
    assert abs(frac - (1 - p)) < 0.02
    torch.testing.assert_close(yc[kept], x[kept] / (1 - p))
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(tx.grad.cpu(), kept.float() / (1 - p))


def test_dropout_rng():
    x = torch.ones(1000, device=TPU)
    torch.manual_seed(123)
    a = F.dropout(x, 0.5).cpu()
    b = F.dropout(x, 0.5).cpu()
    torch.manual_seed(123)
    c = F.dropout(x, 0.5).cpu()
    assert torch.equal(a, c)
    assert not torch.equal(a, b)
    out, mask = torch.native_dropout(x, 1.0, True)
    assert not out.cpu().any() and not mask.cpu().any()
    bf = F.dropout(torch.ones(100, dtype=torch.bfloat16, device=TPU), 0.5).cpu()
    assert set(bf.unique().tolist()) <= {0.0, 2.0}


# --- native_dropout_backward ----------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_native_dropout_backward_dtype(dtype):
    g = rnd(3, 4, dtype=dtype)
    m = torch.rand(3, 4) > 0.5
    check(lambda g, m: torch.ops.aten.native_dropout_backward(g, m, 2.0), g, m)
