"""cdist / pdist vs CPU (csrc/ops/linalg/distance.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import both_raise, check

# --- distances -----------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0, 0.5, 1, 2, 3, float("inf")])
def test_cdist(p):
    a = torch.randn(2, 4, 3)
    b = torch.randn(5, 3)
    b[1] = a[0, 1]  # a zero distance
    check(lambda a, b: torch.cdist(a, b, p), a, b, grad=True)
    check(lambda a, b: torch.cdist(a.transpose(1, 2), b.t()[1:], p), a, torch.randn(4, 6), grad=True)


def test_cdist_errors():
    both_raise(RuntimeError, torch.cdist, torch.randn(3, 4), torch.randn(3, 5))
    both_raise(RuntimeError, torch.cdist, torch.randn(3), torch.randn(3, 3))
    both_raise(RuntimeError, lambda a, b: torch.cdist(a, b, -1.0), torch.randn(3, 3), torch.randn(3, 3))


@pytest.mark.parametrize("p", [0, 1.5, 2, float("inf")])
def test_pdist(p):
    x = torch.randn(6, 4)
    check(lambda x: F.pdist(x, p), x, grad=True)
    check(lambda x: F.pdist(x.t(), p), torch.randn(3, 5), grad=True)
    both_raise(RuntimeError, F.pdist, torch.randn(3))
