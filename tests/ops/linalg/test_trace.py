"""trace vs CPU (csrc/ops/linalg/trace.cc)."""
import pytest
import torch

from tests.helpers import both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_trace(dtype):
    x = (torch.randn(5, 4) * 3).to(dtype)
    check(torch.trace, x, grad=dtype.is_floating_point)
    check(lambda x: torch.trace(x.t()[1:]), x, grad=dtype.is_floating_point)
    both_raise(RuntimeError, torch.trace, torch.randn(3))
    both_raise(NotImplementedError, torch.trace, torch.ones(2, 2, dtype=torch.bool))
