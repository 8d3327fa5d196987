"""max_unpool2d/3d vs CPU (csrc/ops/nn/unpool.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


# --- max_unpool ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_max_unpool(dtype):
    x = torch.randn(2, 3, 8, dtype=dtype)
    y, i = F.max_pool1d(x, 2, return_indices=True)
    check(lambda y: F.max_unpool1d(y, i if y.device.type == "cpu" else i.to(TPU), 2), y, grad=True)
    x = torch.randn(2, 3, 6, 8, dtype=dtype)
    y, i = F.max_pool2d(x, 3, 2, return_indices=True)
    check(lambda y: F.max_unpool2d(y, i.to(y.device), 3, 2, output_size=(6, 8)), y, grad=True)
    check(lambda y: F.max_unpool2d(y[0], i[0].to(y.device), 3, 2, output_size=(6, 8)), y, grad=True)
    x = torch.randn(1, 2, 4, 6, 4, dtype=dtype)
    y, i = F.max_pool3d(x, 2, return_indices=True)
    check(lambda y: F.max_unpool3d(y, i.to(y.device), 2), y, grad=True)


def test_max_unpool_errors():
    y = torch.randn(1, 2, 3, 3)
    both_raise(RuntimeError, lambda y, i: F.max_unpool2d(y, i, 2), y, torch.zeros(1, 2, 3, 3, dtype=torch.int32))
    both_raise(RuntimeError, lambda y, i: F.max_unpool2d(y, i, 2), y, torch.zeros(1, 2, 3, 2, dtype=torch.int64))
