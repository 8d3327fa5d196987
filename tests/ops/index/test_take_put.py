"""take and put_ vs CPU (csrc/ops/index/take_put.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check, rnd


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_take(dtype):
    a = rnd(3, 4, dtype=dtype)
    idx = torch.tensor([[0, 5, -1], [11, 2, -12]])
    check(torch.take, a, idx, grad=dtype.is_floating_point)
    check(lambda x, i: torch.take(x.t(), i), a, idx)
    out = torch.empty(0, dtype=dtype, device=TPU)
    torch.take(a.to(TPU), idx.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.take(a, idx))
    # A strided out= is written through, and an out of another dtype raises as on CPU.
    big = torch.zeros(2, 6, dtype=dtype)
    check(lambda x, i, b: (torch.take(x, i, out=b[:, ::2]), b)[1], a, idx, big)
    other = torch.float64 if dtype != torch.float64 else torch.float32
    both_raise(RuntimeError, lambda x, i: torch.take(x, i, out=torch.empty(0, dtype=other, device=x.device)), a, idx)
    # out-of-range indices are only checked with TORCH_TPU_DEBUG_CHECKS=1 (see ops/index/checks.h)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_put(accumulate, dtype):
    a = rnd(3, 4, dtype=dtype)
    idx = torch.tensor([1, -2, 7, 1]) if accumulate else torch.tensor([1, -2, 7, 0])
    src = rnd(4, dtype=dtype)
    check(lambda x, i, s: x.clone().put_(i, s, accumulate=accumulate), a, idx, src)
    check(lambda x, i, s: torch.put(x, i, s, accumulate=accumulate), a, idx, src, grad=dtype.is_floating_point)
    # non-contiguous self is indexed in logical row-major order
    check(lambda x, i, s: x.t().clone().t().put_(i, s, accumulate=accumulate), a, idx, src)
    both_raise(IndexError, lambda x, i, s: x.put_(i, s), a.clone(), idx, src[:3])
