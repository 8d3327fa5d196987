"""Scans (cumsum/cumprod, cummax/cummin, logcumsumexp) on tpu vs PyTorch
CPU (csrc/ops/reduce/scan.cc)."""

import pytest
import torch

from tests.helpers import TPU, both_raise, check
from tests.ops.reduce._common import ALL, OURS, check_grad, rand, rnd, views

FLOATS = [torch.float32, torch.bfloat16]












# --- cumsum / cumprod ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_cumsum_cumprod(dtype):
    x = rand(4, 6, dtype=dtype)
    if dtype.is_floating_point:
        xp = (x.float().abs() * 0.5 + 0.75).to(dtype)
    else:
        xp = x
    for v in views(x):
        check(lambda t: t.cumsum(0), v)
        check(lambda t: t.cumsum(-1), v)
    for v in views(xp):
        check(lambda t: t.cumprod(1), v)
        check(lambda t: t.cumprod(-2), v)
    check(lambda t: t.cumsum(0, dtype=torch.float64), x)
    check(lambda t: t.cumsum(0), torch.tensor(3))
    check(lambda t: t.cumsum(1), torch.empty(0, 3))
    check(lambda t: t.cumsum(2), rand(2, 3, 5, dtype=dtype))


def test_cumsum_exact_for_ints():
    x = torch.full((3, 1000), 2**40 + 1, dtype=torch.int64)
    check(lambda t: t.cumsum(1), x)
    check(lambda t: t.cumprod(0), torch.full((30,), 3, dtype=torch.int64))


def test_cumsum_inplace_and_out():
    x = rand(4, 6)
    check(lambda t: t.clone().cumsum_(1), x)
    check(lambda t: t.clone().cumprod_(0), x)
    xi = rand(4, 6, dtype=torch.int32)
    check(lambda t: t.clone().cumsum_(0), xi)
    with pytest.raises(RuntimeError, match="Bad in-place call"):
        xi.to(TPU).cumsum_(0, dtype=torch.float32)
    check(lambda t, o: torch.cumsum(t, 0, out=o), xi, torch.empty(0))
    check(lambda t, o: torch.cumprod(t, 1, out=o), x, torch.empty(0, dtype=torch.float64))
    big = torch.zeros(5, 8)
    check(lambda t, b: (torch.cumsum(t, 1, out=b[1:, 1:7]), b)[1], x, big)
    with pytest.raises(RuntimeError, match="Expected out tensor to have dtype"):
        torch.cumsum(x.to(TPU), 0, dtype=torch.float64, out=torch.empty(0, device=TPU))


def test_cumsum_cumprod_grad():
    x = torch.randn(3, 5)
    check_grad(lambda t: t.cumsum(1), x)
    check_grad(lambda t: t.cumsum(0), x)
    check_grad(lambda t: t.cumprod(1), torch.rand(3, 5) + 0.5)


# --- cummax / cummin ------------------------------------------------------------------

@pytest.mark.parametrize("fn", [torch.cummax, torch.cummin])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_cummaxmin(fn, dtype):
    a = torch.tensor([[1, 3, 3, 2, 5, 5, 0], [2, 2, 1, 1, 4, 0, 4]]).to(dtype)
    if dtype.is_floating_point:
        b = a.clone()
        b[0, 3] = float("nan")
        b[0, 5] = float("nan")
        e, t = fn(b, 1), fn(b.to(TPU), 1)
        torch.testing.assert_close(t.values.cpu(), e.values, equal_nan=True)
        torch.testing.assert_close(t.indices.cpu(), e.indices)
    check(lambda x: fn(x, 1), a)
    check(lambda x: fn(x, 0), a)
    check(lambda x: fn(x.t(), 0), a)
    check(lambda x: fn(x, 0), torch.tensor(3).to(dtype))
    if dtype.is_floating_point:
        check(lambda x: fn(x, -1).values, rnd(3, 6, dtype=dtype), grad=True)
    vals, idx = torch.empty(0, dtype=dtype, device=TPU), torch.empty(0, dtype=torch.long, device=TPU)
    fn(a.to(TPU), 1, out=(vals, idx))
    e = fn(a, 1)
    torch.testing.assert_close(vals.cpu(), e.values)
    torch.testing.assert_close(idx.cpu(), e.indices)


# --- cumsum along each axis -----------------------------------------------------------

@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cumsum_axes(dim):
    x = torch.randn(3, 4, 5)
    check(lambda x: torch.cumsum(x, dim), x, grad=True, atol=1e-5, rtol=1e-5)
    check(lambda x: torch.cumsum(x, dim), x.transpose(0, 2).contiguous().transpose(0, 2)[1:], grad=True,
          atol=1e-5, rtol=1e-5)
    check(lambda x: torch.cumsum(x, dim), torch.randint(-5, 5, (3, 4, 5)))


# --- logcumsumexp ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp(dtype):
    x = torch.randn(4, 9, dtype=dtype) * 5
    check(lambda x: torch.logcumsumexp(x, 1), x, grad=True)
    check(lambda x: torch.logcumsumexp(x.t(), 0), x, grad=True)
    check(lambda x: torch.logcumsumexp(x, 0), x, grad=True)
    y = torch.tensor([float("-inf"), float("-inf"), 1.0, float("inf"), 2.0, float("nan"), 3.0])
    torch.testing.assert_close(torch.logcumsumexp(y.to(TPU), 0).cpu(), torch.logcumsumexp(y, 0), equal_nan=True)
    check(lambda y: torch.logcumsumexp(y, 0), torch.tensor(2.5))


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_logcumsumexp_out_forms_follow_cpu():
    # Functional and out= from one declaration (ops/variants.h): out= is
    # resized; CPU refuses an out of any other dtype, float64 included; a
    # bool out of cumsum is CPU's NotImplementedError.
    x = torch.randn(3, 5)
    for shape in [(3, 5), (1,), (0,)]:
        check(lambda t, o: (torch.logcumsumexp(t, 1, out=o), o)[1], x, torch.empty(shape))
    for out_dtype in [torch.float64, torch.int64]:
        both_raise(RuntimeError, lambda t, o: torch.logcumsumexp(t, 0, out=o), x, torch.empty(0, dtype=out_dtype))
    both_raise(NotImplementedError, lambda t, o: torch.cumsum(t, 0, out=o), x, torch.empty(0, dtype=torch.bool))
