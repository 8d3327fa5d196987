"""median/nanmedian/kthvalue/mode vs CPU (csrc/ops/reduce/order_stats.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check


def check_nan(fn, x):
    """Like check (values only) for results holding NaN, which check's
    assert_close would call unequal."""
    expected, actual = fn(x), fn(x.to(TPU))
    if isinstance(expected, torch.Tensor):
        expected, actual = (expected,), (actual,)
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a.cpu(), e, equal_nan=True)


# --- order statistics -----------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_median_all(dtype):
    x = torch.randint(-5, 5, (4, 7)).to(dtype)
    check(torch.median, x)
    check(torch.nanmedian, x)
    check(torch.median, x[:, ::2])
    if dtype == torch.float32:
        check(torch.median, torch.randn(3, 5), grad=True)
        check(torch.nanmedian, torch.randn(6), grad=True)
        y = torch.randn(3, 4)
        y[1, 2] = float("nan")
        check_nan(torch.median, y)
        check(torch.nanmedian, y)
        check_nan(torch.nanmedian, torch.full((3,), float("nan")))
        check(torch.median, torch.tensor(2.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
@pytest.mark.parametrize("fn", ["median", "nanmedian"])
def test_median_dim(dtype, fn):
    f = getattr(torch, fn)
    x = torch.randint(-3, 3, (5, 6, 4)).to(dtype)  # many ties: indices must match CPU
    for dim in (0, 1, -1):
        for keepdim in (False, True):
            check(lambda x: f(x, dim, keepdim), x)
    check(lambda x: f(x, 0), x.transpose(0, 2))
    check(lambda x: f(x, 0), torch.tensor(3).to(dtype))
    if dtype == torch.float32:
        y = torch.randn(4, 5)
        y[0, 1] = y[0, 3] = y[2, 0] = float("nan")
        y[3] = float("nan")
        check_nan(lambda x: f(x, 1), y)
        check(lambda x: f(x, 1), torch.randn(3, 6), grad=True)


def test_median_out_and_errors():
    x = torch.randint(-3, 3, (4, 5)).float()
    vals = torch.zeros(4, 2, device=TPU)[:, 0]
    idx = torch.zeros(4, dtype=torch.long, device=TPU)
    torch.median(x.to(TPU), 1, out=(vals, idx))
    ev, ei = torch.median(x, 1)
    torch.testing.assert_close(vals.cpu(), ev)
    torch.testing.assert_close(idx.cpu(), ei)
    both_raise(IndexError, lambda x: torch.median(x, 1), torch.randn(3, 0))
    both_raise(RuntimeError, torch.median, torch.tensor([True, False]))
    both_raise(IndexError, lambda x: torch.median(x, 2), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_kthvalue(dtype):
    x = torch.randn(5, 6, 4).to(dtype) if dtype != torch.int64 else torch.randperm(120).view(5, 6, 4)
    for k, dim, keepdim in [(1, 0, False), (3, 1, True), (4, -1, False)]:
        check(lambda x: torch.kthvalue(x, k, dim, keepdim), x)
    check(lambda x: torch.kthvalue(x, 2, 0), x.transpose(0, 2))
    if dtype == torch.float32:
        check(lambda x: torch.kthvalue(x, 2, 1), torch.randn(3, 5), grad=True)
        y = torch.randn(2, 5)
        y[0, 1] = float("nan")
        check_nan(lambda x: torch.kthvalue(x, 5, 1), y)
    both_raise(RuntimeError, lambda x: torch.kthvalue(x, 7, 1), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_mode(dtype):
    x = torch.randint(-2, 3, (5, 7, 6)).to(dtype)  # rows up to 7: CPU's sort is stable there
    for dim in (0, 1, -1):
        check(lambda x: torch.mode(x, dim), x)
        check(lambda x: torch.mode(x, dim, True), x)
    check(lambda x: torch.mode(x, 0), x.transpose(0, 2))
    check(lambda x: torch.mode(x), torch.tensor(1).to(dtype))
    if dtype == torch.float32:
        check(lambda x: torch.mode(x, 1), torch.randint(0, 3, (4, 6)).float(), grad=True)
    both_raise(IndexError, lambda x: torch.mode(x, 1), torch.randn(3, 0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_two_result_out_forms(dtype):
    from tests.helpers import check_pair_out

    x = torch.randint(0, 4, (5, 6)).to(dtype)  # ties, so that the indices rule is exercised
    dts = (dtype, torch.long)
    check_pair_out(lambda a, out: torch.median(a, 1, out=out), x, dts)
    check_pair_out(lambda a, out: torch.nanmedian(a.t(), 0, keepdim=True, out=out), x, dts)
    check_pair_out(lambda a, out: torch.mode(a, 1, out=out), x, dts)
    # Which tied element kthvalue's index names is left to the implementation
    # (CPU's comes from its quickselect), so its input has no ties.
    distinct = torch.randperm(30).reshape(5, 6).to(dtype)
    check_pair_out(lambda a, out: torch.kthvalue(a, 2, 0, out=out), distinct, dts)
    check_pair_out(lambda a, out: torch.kthvalue(a[0, 0], 1, out=out), distinct, dts)
    # A k out of range fails in the op's checks before any out= check.
    both_raise(RuntimeError, lambda a: torch.kthvalue(a, 9, 1, out=(torch.empty(0, dtype=torch.int32),
                                                                     torch.empty(0, dtype=torch.long))), x)
