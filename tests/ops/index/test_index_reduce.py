"""index_reduce (prod/mean/amax/amin, with or without self) vs CPU
(csrc/ops/index/index_reduce.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check

# --- index_reduce ---------------------------------------------------------------------

REDUCES = ["prod", "mean", "amax", "amin"]


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("include_self", [True, False])
def test_index_reduce_float(reduce, include_self):
    x = torch.randn(5, 4)
    src = torch.randn(6, 4)
    idx = torch.tensor([0, 4, 2, 0, 4, 4])  # repeats; rows 1 and 3 untouched
    check(lambda x, s: x.index_reduce(0, idx.to(x.device), s, reduce, include_self=include_self), x, src, grad=True)
    # along dim 1, non-contiguous self and source
    x2 = torch.randn(4, 5).t()
    s2 = torch.randn(5, 8)[:, ::2]
    i2 = torch.tensor([3, 0, 3, 1])
    check(lambda x, s: x.index_reduce(1, i2.to(x.device), s, reduce, include_self=include_self), x2, s2, grad=True)


@pytest.mark.parametrize("reduce", REDUCES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.int64, torch.int32])
def test_index_reduce_dtypes(reduce, dtype):
    x = torch.randint(-9, 9, (5, 3)).to(dtype)
    src = torch.randint(-9, 9, (7, 3)).to(dtype)
    idx = torch.tensor([1, 1, 3, 0, 1, 3, 0])
    for inc in (True, False):
        check(lambda x, s: x.index_reduce(0, idx.to(x.device), s, reduce, include_self=inc), x, src)


def test_index_reduce_inplace_out_and_errors():
    x = torch.randn(4, 3)
    src = torch.randn(3, 3)
    idx = torch.tensor([2, 0, 2])
    xt = x.to(TPU)
    xt.index_reduce_(0, idx.to(TPU), src.to(TPU), "amax", include_self=False)
    x.index_reduce_(0, idx, src, "amax", include_self=False)
    torch.testing.assert_close(xt.cpu(), x)
    big = torch.zeros(4, 6, device=TPU)
    out = big[:, ::2]
    torch.index_reduce(x.to(TPU), 0, idx.to(TPU), src.to(TPU), "prod", out=out)
    torch.testing.assert_close(out.cpu(), torch.index_reduce(x, 0, idx, src, "prod"))
    both_raise(RuntimeError, lambda x, i, s: x.index_reduce(0, i, s, "sum"), x, idx, src)  # bad reduce
    both_raise(RuntimeError, lambda x, i, s: x.index_reduce(0, i, s, "mean"), x, idx, src.double())
    both_raise(IndexError, lambda x, i, s: x.index_reduce(0, i, s, "mean"), x, idx.view(3, 1), src)
