"""index_reduce, median/nanmedian/kthvalue/mode, unfold backward,
count_nonzero, nonzero_static, repeat_interleave and segment_reduce vs CPU."""
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


# --- unfold backward, count_nonzero, nonzero_static, repeat_interleave -----------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unfold_grad(dtype):
    x = torch.randn(4, 9, 3).to(dtype)
    for dim, size, step in [(1, 3, 2), (1, 2, 3), (0, 4, 1), (-1, 1, 1), (1, 9, 1)]:
        check(lambda x: x.unfold(dim, size, step), x, grad=True)
        check(lambda x: torch.unfold_copy(x, dim, size, step), x, grad=True)
    check(lambda x: x.unfold(0, 1, 1), torch.tensor(1.5).to(dtype), grad=True)
    check(lambda x: x.unfold(0, 2, 2), torch.randn(6, 4).t().to(dtype), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_count_nonzero(dtype):
    x = torch.randint(-1, 2, (3, 4, 5)).to(dtype)
    check(torch.count_nonzero, x)
    check(lambda x: torch.count_nonzero(x, 1), x)
    check(lambda x: torch.count_nonzero(x, (0, -1)), x)
    check(lambda x: torch.count_nonzero(x, 0), x[:, ::2].transpose(0, 1))
    check(torch.count_nonzero, torch.tensor(0).to(dtype))
    both_raise(RuntimeError, lambda x: torch.count_nonzero(x, (1, 1)), x)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_nonzero_static(dtype):
    x = torch.randint(0, 2, (4, 5)).to(dtype)
    n = int(torch.count_nonzero(x))
    for size in (0, 1, n, n + 3):
        check(lambda x: torch.nonzero_static(x, size=size), x)
        check(lambda x: torch.nonzero_static(x, size=size, fill_value=7), x)
    check(lambda x: torch.nonzero_static(x, size=4), x.t())
    check(lambda x: torch.nonzero_static(x, size=3), torch.zeros(2, 0, 3).to(dtype))
    check(lambda x: torch.nonzero_static(x, size=2), torch.tensor(1).to(dtype))
    out = torch.empty(0, dtype=torch.long, device=TPU)
    torch.nonzero_static(x.to(TPU), size=5, out=out)
    torch.testing.assert_close(out.cpu(), torch.nonzero_static(x, size=5))
    both_raise(RuntimeError, lambda x: torch.nonzero_static(x, size=-1), x)


def test_repeat_interleave():
    r = torch.tensor([2, 0, 3, 1])
    check(torch.repeat_interleave, r)
    check(torch.repeat_interleave, r.int())
    check(torch.repeat_interleave, torch.tensor([0, 0], dtype=torch.long))
    check(lambda r: torch.repeat_interleave(r, output_size=6), r)
    x = torch.randn(4, 3)
    check(lambda x: torch.repeat_interleave(x, r.to(x.device), dim=0), x, grad=True)
    check(lambda x: torch.repeat_interleave(x, 2, dim=1), x.bfloat16())
    both_raise(RuntimeError, torch.repeat_interleave, torch.tensor([1, -1]))
    both_raise(RuntimeError, torch.repeat_interleave, torch.tensor([[1, 2]]))


# --- segment_reduce and hash_tensor ---------------------------------------------------


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce(reduce, initial):
    data = torch.randn(7, 3)
    data[2, 1] = data[3, 1]  # a tie for max/min
    data[5, 0] = 0.0  # a zero for prod's gradient
    # An empty segment's mean is NaN, which check() would call unequal.
    empty_ok = not (reduce == "mean" and initial is None)
    lengths = torch.tensor([2, 0, 3, 2]) if empty_ok else torch.tensor([2, 1, 2, 2])
    kw = dict(initial=initial) if initial is not None else {}
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, **kw), data, lengths, grad=True)
    offsets = torch.tensor([0, 2, 2, 5, 7]) if empty_ok else torch.tensor([0, 2, 3, 5, 7])
    check(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, **kw), data, offsets, grad=True)
    # batched lengths along axis 1
    d2 = torch.randn(2, 5, 3)
    l2 = torch.tensor([[1, 4], [3, 2]])
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, axis=1, **kw), d2, l2, grad=True)
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, **kw), data.bfloat16(), lengths)


def test_segment_reduce_errors():
    data = torch.randn(5, 2)
    both_raise(RuntimeError, lambda d, l: torch.segment_reduce(d, "sum", lengths=l), data, torch.tensor([2, 2]))
    both_raise(RuntimeError, lambda d, l: torch.segment_reduce(d, "sum", lengths=l), data, torch.tensor([6, -1]))
    both_raise(RuntimeError, lambda d, l: torch.segment_reduce(d, "avg", lengths=l), data, torch.tensor([5]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_hash_tensor(dtype):
    x = torch.randn(4, 5).mul(10).to(dtype)
    check(torch.hash_tensor, x)
    check(lambda x: torch.hash_tensor(x, 1), x)
    check(lambda x: torch.hash_tensor(x, (0,), keepdim=True), x)
    check(lambda x: torch.hash_tensor(x, 0), x.t())
    check(torch.hash_tensor, torch.tensor(3).to(dtype))
    h = torch.hash_tensor(x.to(TPU))
    assert h.dtype == torch.uint64 and h.device.type == "tpu"
