"""bincount and histc vs CPU (csrc/ops/set/histogram.cc)."""
import pytest
import torch

from tests.helpers import TPU, check

# --- bincount / histc ------------------------------------------------------------------


def test_bincount():
    x = torch.tensor([0, 1, 1, 3, 2, 1, 7])
    check(torch.bincount, x)
    check(lambda x: torch.bincount(x, minlength=10), x)
    check(lambda x, w: torch.bincount(x, w), x, torch.rand(7))
    check(lambda x, w: torch.bincount(x, w), x.int(), torch.rand(7, dtype=torch.float64))
    check(lambda x, w: torch.bincount(x, w, minlength=3), x[::2], torch.rand(7)[::2])
    check(lambda x: torch.bincount(x, minlength=4), torch.empty(0, dtype=torch.long))
    for bad in [torch.tensor([-1, 2]), torch.tensor([[1, 2]])]:
        with pytest.raises(RuntimeError):
            torch.bincount(bad.to(TPU))
    with pytest.raises(RuntimeError):
        torch.bincount(torch.tensor([1, 2], device=TPU), minlength=-1)


def test_histc():
    x = torch.randn(100)
    check(lambda x: torch.histc(x, bins=10, min=-2, max=2), x)
    check(lambda x: torch.histc(x, bins=7), x)  # data range
    check(lambda x: torch.histc(x, bins=4, min=0, max=4), torch.tensor([0.0, 1.0, 1.0, 2.0, 4.0, 5.0, -1.0]))
    check(lambda x: torch.histc(x, bins=3), torch.ones(4))
    check(lambda x: torch.histc(x, bins=5, min=-1, max=1), x.reshape(10, 10)[:, ::2].double())
    with pytest.raises(RuntimeError):
        torch.histc(x.to(TPU), bins=0)
    with pytest.raises(RuntimeError):
        torch.histc(x.to(TPU), min=2, max=1)
