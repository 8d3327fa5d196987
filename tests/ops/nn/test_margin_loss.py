"""multi_margin_loss and multilabel_margin_loss vs CPU
(csrc/ops/nn/margin_loss.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import both_raise, check

# --- margin losses ---------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    x = torch.randn(5, 4)
    t = torch.randint(0, 4, (5,))
    w = torch.rand(4)
    check(lambda x: F.multi_margin_loss(x, t.to(x.device), p=p, margin=0.7, reduction=reduction), x, grad=True)
    check(lambda x: F.multi_margin_loss(x.t(), t[:4].to(x.device), p=p, weight=w.to(x.device), reduction=reduction),
          torch.randn(4, 4), grad=True)
    check(lambda x: F.multi_margin_loss(x, t[0].to(x.device), reduction=reduction), torch.randn(4), grad=True)


def test_multi_margin_loss_errors():
    both_raise(RuntimeError, lambda x, t: torch.ops.aten.multi_margin_loss(x, t, 3), torch.randn(2, 3),
               torch.tensor([0, 1]))
    both_raise(RuntimeError, F.multi_margin_loss, torch.randn(2, 3), torch.tensor([0, 1, 2]))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = torch.randn(4, 5)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4], [4, 4, 1, -1, 0]])
    check(lambda x: F.multilabel_margin_loss(x, t.to(x.device), reduction=reduction), x, grad=True)
    check(lambda x: F.multilabel_margin_loss(x.t()[:4], t.to(x.device), reduction=reduction), torch.randn(5, 4),
          grad=True)
    check(lambda x: F.multilabel_margin_loss(x, t[0].to(x.device), reduction=reduction), torch.randn(5), grad=True)
    both_raise(RuntimeError, F.multilabel_margin_loss, x, t[:3])
