"""sort and topk vs CPU (csrc/ops/reduce/sort.cc)."""
import pytest
import torch

from tests.helpers import TPU, check

# --- sort / topk ------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_sort(dtype):
    x = torch.randperm(24).reshape(4, 6).to(dtype)
    check(lambda a: a.sort(), x)
    check(lambda a: a.sort(0, descending=True), x)
    check(lambda a: a.t().sort(-1), x)


def test_sort_stable_nan_bool_grad():
    x = torch.tensor([3., 1., 2., 1., float("nan"), 3.])
    for desc in (False, True):  # NaN sorts as the largest value
        ev, ei = torch.sort(x, stable=True, descending=desc)
        tv, ti = torch.sort(x.to(TPU), stable=True, descending=desc)
        torch.testing.assert_close(tv.cpu(), ev, equal_nan=True)
        torch.testing.assert_close(ti.cpu(), ei)
    check(lambda a: torch.sort(a, stable=True), torch.tensor([True, False, True, False]))
    check(lambda a: torch.sort(a, 1)[0], torch.randn(3, 5), grad=True)
    check(lambda a: torch.sort(a), torch.tensor(2.0))


def test_topk():
    x = torch.randperm(30).reshape(5, 6).float()
    check(lambda a: a.topk(3), x)
    check(lambda a: a.topk(2, 0, largest=False), x)
    check(lambda a: a[:, 1:].topk(1, 1), x)
    check(lambda a: a.topk(2)[0], torch.randn(3, 5), grad=True)
    with pytest.raises(RuntimeError):
        torch.randn(3).to(TPU).topk(4)


def test_sort_out():
    x = torch.randn(3, 4)
    v, i = torch.empty(0, device=TPU), torch.empty(0, dtype=torch.long, device=TPU)
    torch.sort(x.to(TPU), 1, out=(v, i))
    ev, ei = torch.sort(x, 1)
    torch.testing.assert_close(v.cpu(), ev)
    torch.testing.assert_close(i.cpu(), ei)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_sort_and_topk_out_forms(dtype):
    from tests.helpers import check_pair_out

    x = torch.randperm(20).reshape(4, 5).to(dtype)
    check_pair_out(lambda a, out: torch.sort(a, 1, descending=True, out=out), x, (dtype, torch.long))
    check_pair_out(lambda a, out: torch.sort(a.t(), stable=True, dim=0, out=out), x, (dtype, torch.long))
    check_pair_out(lambda a, out: torch.topk(a, 2, 0, out=out), x, (dtype, torch.long))
    check_pair_out(lambda a, out: torch.topk(a, 3, largest=False, out=out), x, (dtype, torch.long))
