"""Reductions on tpu (incl. nansum, aminmax and count_nonzero), compared
against PyTorch CPU (csrc/ops/reduce/reductions.cc)."""
import math

import pytest
import torch

from tests.helpers import TPU, both_raise, check, to_tpu
from tests.ops.reduce._common import ALL, OURS, check_grad, rand, rnd, views


def check_nan(fn, *args):
    """Like check() (no gradients) but NaNs in matching places compare equal."""
    expected = fn(*args)
    actual = fn(*[to_tpu(a) for a in args])
    if isinstance(expected, torch.Tensor):
        expected, actual = [expected], [actual]
    for e, a in zip(expected, actual):
        assert a.device.type == "tpu"
        torch.testing.assert_close(a.cpu(), e, equal_nan=True)








# --- sum / mean / prod -------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_sum_dtypes(dtype):
    x = rand(4, 6, dtype=dtype)
    for v in views(x):
        check(lambda t: t.sum(), v)
        check(lambda t: t.sum(0), v)
        check(lambda t: t.sum(-1, keepdim=True), v)
        check(lambda t: t.sum((0, 1)), v)


def test_sum_dtype_arg_and_accumulation():
    x = rand(3, 5)
    check(lambda t: t.sum(1, dtype=torch.float64), x)
    check(lambda t: t.sum(dtype=torch.int32), (x * 10).int())
    # bf16 accumulates in f32: 4096 ones would stall at 256 in bf16.
    ones = torch.ones(4096, dtype=torch.bfloat16)
    assert ones.to(TPU).sum().item() == 4096
    check(lambda t: t.sum(), torch.rand(1000).bfloat16())


def test_sum_3d_multi_dims_and_empty():
    x = rand(2, 3, 4)
    check(lambda t: t.sum((0, 2)), x)
    check(lambda t: t.sum((-1, 0), keepdim=True), x)
    check(lambda t: t.sum([]), x)
    check(lambda t: t.sum(), torch.empty(0, 3))
    check(lambda t: t.sum(0), torch.empty(0, 3))
    check(lambda t: t.sum(1), torch.empty(0, 3))
    check(lambda t: t.sum(0), torch.tensor(2.5))
    check(lambda t: t.sum(-1, keepdim=True), torch.tensor(2.5))


def test_sum_out():
    x = rand(4, 6)
    out = torch.empty(0)
    check(lambda t, o: torch.sum(t, 1, out=o), x, out)
    check(lambda t, o: torch.sum(t, 1, out=o), x.int(), torch.empty(0))
    check(lambda t, o: torch.sum(t, 1, out=o), x, torch.empty(0, dtype=torch.int64))
    # out= into a view of a bigger tensor.
    big = torch.zeros(3, 8)
    check(lambda t, b: (torch.sum(t, 0, out=b[1, 1:7]), b)[1], x, big)
    with pytest.raises(RuntimeError):
        torch.sum(x.to(TPU), 0, dtype=torch.float64, out=torch.empty(0, device=TPU))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_mean(dtype):
    x = rand(4, 6, dtype=dtype)
    for v in views(x):
        check(lambda t: t.mean(), v)
        check(lambda t: t.mean(0), v)
        check(lambda t: t.mean((0, 1), keepdim=True), v)
    check(lambda t: t.mean(1, dtype=torch.float64), x)
    check(lambda t: t.mean(dtype=torch.float32), torch.arange(7))
    check_nan(lambda t: t.mean(), torch.empty(0))
    check(lambda t, o: torch.mean(t, 0, out=o), x, torch.empty(0, dtype=torch.float64))


@pytest.mark.parametrize("dtype", [torch.float16, torch.float32, torch.float64])
def test_mean_out_integral(dtype):
    # CPU's mean.out without dtype= sums into out and divides in place: an
    # integral out gets true division's "result type Float" error
    for out_dtype in (torch.int64, torch.bool):
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type"):
            torch.mean(torch.ones(3, dtype=dtype), 0, out=torch.empty(0, dtype=out_dtype))
        with pytest.raises(RuntimeError, match="result type Float can't be cast to the desired output type"):
            torch.mean(torch.ones(3, dtype=dtype, device=TPU), 0, out=torch.empty(0, dtype=out_dtype, device=TPU))


def test_mean_errors():
    for bad in [lambda: torch.ones(3, dtype=torch.long, device=TPU).mean(),
                lambda: torch.ones(3, device=TPU).mean(dtype=torch.long)]:
        with pytest.raises(RuntimeError, match="could not infer output dtype"):
            bad()


@pytest.mark.parametrize("dtype", ALL)
def test_prod(dtype):
    x = rand(3, 4, dtype=dtype)
    if dtype.is_floating_point:
        x = (x.float().abs() + 0.5).to(dtype)
    for v in views(x):
        check(lambda t: t.prod(), v)
        check(lambda t: t.prod(1), v)
        check(lambda t: t.prod(0, keepdim=True), v)
    check(lambda t: t.prod(), torch.empty(0, 2))
    check(lambda t: t.prod(1, dtype=torch.float64), x)


def test_prod_out():
    x = rand(3, 4, dtype=torch.int32)
    check(lambda t, o: torch.prod(t, 0, out=o), x, torch.empty(0, dtype=torch.int32))
    check(lambda t, o: torch.prod(t, 1, dtype=torch.int64, out=o), x, torch.empty(0, dtype=torch.int64))


def test_sum_mean_prod_grad():
    x = torch.randn(3, 4)
    check_grad(lambda t: t.sum(), x)
    check_grad(lambda t: t.sum(1, keepdim=True), x)
    check_grad(lambda t: t.sum((0, 1)), x)
    check_grad(lambda t: t.mean(0), x)
    check_grad(lambda t: t.mean(), x)


def test_prod_grad():
    x = torch.rand(3, 4) + 0.5
    check_grad(lambda t: t.prod(1), x)
    check_grad(lambda t: t.prod(), x)


# --- amax / amin / max / min --------------------------------------------------

@pytest.mark.parametrize("dtype", ALL)
def test_amax_amin(dtype):
    x = rand(4, 6, dtype=dtype)
    for v in views(x):
        for f in (torch.amax, torch.amin):
            check(lambda t: f(t), v)
            check(lambda t: f(t, 0), v)
            check(lambda t: f(t, (0, 1), keepdim=True), v)
            check(lambda t: f(t, -1), v)


@pytest.mark.parametrize("dtype", ALL)
def test_max_min(dtype):
    x = rand(4, 6, dtype=dtype)
    for v in views(x):
        check(lambda t: t.max(), v)
        check(lambda t: t.min(), v)
        check(lambda t: tuple(t.max(1)), v)
        check(lambda t: tuple(t.min(0, keepdim=True)), v)
    check(lambda t: tuple(t.max(0)), torch.tensor(3.0))
    check(lambda t: tuple(t.max(1)), torch.empty(0, 3))


def test_max_first_index_and_ties():
    x = torch.tensor([[1., 3., 3., 0.], [2., 2., 2., 2.], [-1., -5., -5., -1.]])
    check(lambda t: tuple(t.max(1)), x)
    check(lambda t: tuple(t.min(1)), x)
    check(lambda t: t.argmax(1), x)
    check(lambda t: t.argmin(1), x)
    xi = torch.tensor([[4, 1, 4, 1], [0, 0, 0, 0]], dtype=torch.int32)
    check(lambda t: tuple(t.max(1)), xi)
    check(lambda t: t.argmin(1), xi)
    # A long row: ties must still resolve to the first index however XLA splits it.
    big = torch.zeros(5000)
    big[1234] = big[4000] = 1
    check(lambda t: t.argmax(), big)
    check(lambda t: tuple(t.max(0)), big)


def test_nan_propagation():
    nan = float("nan")
    x = torch.tensor([[1., nan, 3., nan], [1., 2., 3., 4.], [-math.inf, nan, math.inf, 0.]])
    check_nan(lambda t: t.amax(1), x)
    check_nan(lambda t: t.amin(1), x)
    check_nan(lambda t: t.max(), x)
    check_nan(lambda t: t.min(), x)
    check_nan(lambda t: tuple(t.max(1)), x)
    check_nan(lambda t: tuple(t.min(1)), x)
    check_nan(lambda t: t.argmax(1), x)
    check_nan(lambda t: t.argmin(1), x)
    check_nan(lambda t: t.argmax(), x)


def test_max_min_out():
    x = rand(4, 6)
    check(lambda t, v, i: tuple(torch.max(t, 1, out=(v, i))), x, torch.empty(0), torch.empty(0, dtype=torch.long))
    check(lambda t, v, i: tuple(torch.min(t, 0, keepdim=True, out=(v, i))), x, torch.empty(0),
          torch.empty(0, dtype=torch.long))
    check(lambda t, o: torch.amax(t, 1, out=o), x, torch.empty(0))
    check(lambda t, o: torch.amin(t, 0, out=o), x, torch.empty(0))
    check(lambda t, o: torch.max(t, out=o), x, torch.empty(0))
    big = torch.zeros(2, 10)
    check(lambda t, b: (torch.amax(t, 0, out=b[1, 2:8]), b)[1], x, big)
    xt = x.to(TPU)
    with pytest.raises(RuntimeError):
        torch.max(xt, 0, out=(torch.empty(0, device=TPU), torch.empty(0, device=TPU)))
    with pytest.raises(RuntimeError):
        torch.amax(xt, 0, out=torch.empty(0, dtype=torch.long, device=TPU))


def test_empty_raises_like_cpu():
    e = torch.empty(0, 3)
    cases = [lambda t: t.max(), lambda t: t.min(), lambda t: t.max(0), lambda t: t.min(0), lambda t: t.amax(),
             lambda t: t.amax(0), lambda t: t.amin(0), lambda t: t.argmax(), lambda t: t.argmax(0),
             lambda t: t.argmin(0), lambda t: torch.linalg.vector_norm(t, math.inf),
             lambda t: torch.linalg.vector_norm(t, -1, dim=0)]
    for f in cases:
        with pytest.raises(Exception) as cpu_exc:
            f(e)
        with pytest.raises(type(cpu_exc.value)) as tpu_exc:
            f(e.to(TPU))
        assert str(tpu_exc.value).split("\n")[0] == str(cpu_exc.value).split("\n")[0]
    # Reducing a non-empty dim of an empty tensor is fine.
    check(lambda t: t.amax(1), e)
    check(lambda t: t.argmax(1), e)


def test_bad_dims_raise_like_cpu():
    x = torch.randn(2, 3)
    cases = [lambda t: t.sum(2), lambda t: t.amax(-3), lambda t: t.max(5), lambda t: t.argmax(2),
             lambda t: t.cumsum(2), lambda t: t.cumprod(-3), lambda t: t.var(3), lambda t: t.any(2),
             lambda t: t.mean(-3), lambda t: t.prod(2), lambda t: torch.logsumexp(t, 4),
             lambda t: torch.linalg.vector_norm(t, dim=2),
             lambda t: t.sum((0, 0)), lambda t: t.amax((1, -1)), lambda t: t.var((0, -2)),
             lambda t: t.any((0, 0))]
    for f in cases:
        with pytest.raises(Exception) as cpu_exc:
            f(x)
        with pytest.raises(type(cpu_exc.value)) as tpu_exc:
            f(x.to(TPU))
        assert str(tpu_exc.value).split("\n")[0] == str(cpu_exc.value).split("\n")[0]


def test_amax_max_grad():
    x = torch.randn(3, 5)
    check_grad(lambda t: t.amax(1), x)
    check_grad(lambda t: t.amin((0, 1)), x)
    check_grad(lambda t: t.max(1)[0], x)
    check_grad(lambda t: t.min(0, keepdim=True)[0], x)
    check_grad(lambda t: t.max(), x)
    # Ties share the gradient (amax) or go to one element (max.dim).
    tie = torch.tensor([[1., 2., 2.], [0., 0., 0.]])
    check_grad(lambda t: t.amax(1), tie)
    check_grad(lambda t: t.max(1)[0], tie)


# --- argmax / argmin -----------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_argmax_argmin(dtype):
    x = rand(4, 6, dtype=dtype)
    for v in views(x):
        check(lambda t: t.argmax(), v)
        check(lambda t: t.argmin(), v)
        check(lambda t: t.argmax(1), v)
        check(lambda t: t.argmin(0, keepdim=True), v)
        check(lambda t: t.argmax(keepdim=True), v)
    check(lambda t: t.argmax(0), torch.tensor(2.0))
    check(lambda t, o: torch.argmax(t, 1, out=o), x, torch.empty(0, dtype=torch.long))
    with pytest.raises(RuntimeError, match="does not support bool"):
        torch.ones(3, dtype=torch.bool, device=TPU).argmax()
    with pytest.raises(RuntimeError):
        torch.argmax(x.to(TPU), 0, out=torch.empty(0, device=TPU))


# --- var / std -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_var_std(dtype):
    x = rand(4, 6, dtype=dtype)
    for v in views(x):
        check(lambda t: t.var(), v)
        check(lambda t: t.std(0), v)
        check(lambda t: t.var(1, keepdim=True), v)
        check(lambda t: t.std((0, 1), correction=0), v)
        check(lambda t: t.var(0, unbiased=False), v)
        check(lambda t: torch.var(t, 1, correction=2.5), v)
        check(lambda t: torch.var_mean(t, 1), v)
        check(lambda t: torch.std_mean(t, 0, keepdim=True, correction=0), v)


def test_var_edge_cases():
    with pytest.warns(UserWarning, match="degrees of freedom"):
        check_nan(lambda t: t.var(), torch.ones(1))
    with pytest.warns(UserWarning, match="degrees of freedom"):
        check_nan(lambda t: t.std(0), torch.ones(1, 3))
    check(lambda t: t.var(0, correction=0), torch.tensor(2.0))
    check(lambda t, o: torch.var(t, 0, out=o), rand(4, 3), torch.empty(0))
    check(lambda t, o: torch.std(t, 1, out=o), rand(4, 3), torch.empty(0, dtype=torch.float64))
    # Large offset: a one-pass formula would cancel catastrophically.
    check(lambda t: t.var(), torch.randn(100) + 1e4)
    with pytest.raises(RuntimeError, match="floating point"):
        torch.ones(3, dtype=torch.long, device=TPU).var()
    with pytest.raises(RuntimeError):
        torch.std(torch.ones(3, device=TPU), 0, out=torch.empty(0, dtype=torch.long, device=TPU))


def test_var_mean_of_infinities():
    # The variance matches CPU; the mean is torch.mean's (CPU's Welford mean
    # is nan or inf depending on element order: docs/differences_from_cuda.md).
    inf = float("inf")
    for v in ([inf, 1.0], [1.0, 2.0, inf], [inf, -inf], [[inf, 1.0], [2.0, 3.0]]):
        x = torch.tensor(v)
        for fn in (torch.var_mean, torch.std_mean):
            var, mean = fn(x.to("tpu"))
            torch.testing.assert_close(var.cpu(), fn(x)[0], equal_nan=True)
            torch.testing.assert_close(mean.cpu(), torch.mean(x), equal_nan=True)


def test_var_std_large_float32():
    # CPU accumulates float32 var/std in double: squares past the float32 maximum
    # still give a finite std (and var where it fits), as must every form.
    x = torch.tensor([[1e20, 3e20, -2e25, 5e30], [3e38, -3e38, 1e38, 0.0]])
    check(lambda t: t.std(1), x)
    check(lambda t: t.std(), x)
    check(lambda t: t.var(1, correction=0), x)  # inf where CPU's is inf
    check(lambda t: torch.std_mean(t, 1, keepdim=True), x)
    check(lambda t: torch.var_mean(t, 1, unbiased=False), x * 1e-10)
    check(lambda t, o: torch.std(t, 1, correction=2, out=o), x, torch.empty(0))
    # tiny values: squares below the float32 minimum
    check(lambda t: t.std(0), torch.tensor([[1e-30], [2e-30], [4e-30]]))
    check(lambda t: t.std(), torch.zeros(3))


def test_var_std_grad():
    x = torch.randn(4, 5)
    check_grad(lambda t: t.var(1), x)
    check_grad(lambda t: t.std(), x)
    check_grad(lambda t: t.std(0, correction=0, keepdim=True), x)
    # One output, so that backward runs once through var_mean's shared graph.
    check_grad(lambda t: torch.add(*torch.var_mean(t, 1)), x)
    check_grad(lambda t: torch.add(*torch.std_mean(t, 0)), x)


# --- norm ----------------------------------------------------------------------------

ORDS = [2, 1, math.inf, -math.inf, 0, 3, 0.5, -1.5]


@pytest.mark.parametrize("ord", ORDS)
def test_vector_norm(ord):
    x = torch.randn(4, 6)
    x[0, 1] = 0
    for v in views(x) if ord == 2 else [x]:
        check(lambda t: torch.linalg.vector_norm(t, ord), v)
        check(lambda t: torch.linalg.vector_norm(t, ord, dim=1), v)
        check(lambda t: torch.linalg.vector_norm(t, ord, dim=(0, 1), keepdim=True), v)


def test_norm_variants():
    x = torch.randn(4, 6)
    check(lambda t: torch.norm(t), x)
    check(lambda t: torch.norm(t, 1, dim=0), x)
    check(lambda t: torch.norm(t, dim=1, keepdim=True), x)
    check(lambda t: t.norm(p=3, dim=-1), x)
    check(lambda t: torch.linalg.vector_norm(t, dtype=torch.float64), x)
    check(lambda t: torch.linalg.vector_norm(t, 2, dim=0), x.bfloat16())
    check(lambda t: torch.linalg.vector_norm(t, 2), torch.empty(0, 3))
    check(lambda t, o: torch.linalg.vector_norm(t, 2, 1, out=o), x, torch.empty(0))
    check(lambda t, o: torch.norm(t, 1, 0, out=o), x, torch.empty(0))
    # The ATen overloads themselves, with p None (2) and a dtype.
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, None, [1]), x)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim(t, 3, [0, 1], True), x)
    check(lambda t: torch.ops.aten.norm.ScalarOpt_dim_dtype(t, 1, [1], False, dtype=torch.float64), x)
    check(lambda t, o: torch.ops.aten.norm.dtype_out(t, None, [0], False, dtype=torch.float64, out=o), x,
          torch.empty(0, dtype=torch.float64))
    big = torch.zeros(3, 10)
    check(lambda t, b: (torch.linalg.vector_norm(t, 2, 0, out=b[2, :6]), b)[1], x, big)
    xt = x.to(TPU)
    for bad in [lambda: torch.linalg.vector_norm(torch.ones(3, dtype=torch.long, device=TPU)),
                lambda: torch.linalg.vector_norm(xt, dtype=torch.long),
                lambda: torch.linalg.vector_norm(xt, dtype=torch.bfloat16),
                lambda: torch.linalg.vector_norm(xt, out=torch.empty(0, dtype=torch.float64, device=TPU))]:
        with pytest.raises(RuntimeError):
            bad()


@pytest.mark.parametrize("ord", [2, 1, math.inf, 3])
def test_norm_grad(ord):
    x = torch.randn(3, 5)
    check_grad(lambda t: torch.linalg.vector_norm(t, ord, dim=1), x)
    check_grad(lambda t: torch.linalg.vector_norm(t, ord), x)


# --- any / all -------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ALL + [torch.uint8])
def test_any_all(dtype):
    x = torch.randint(0, 2, (4, 6)) * torch.randint(0, 2, (4, 6))
    x = x.to(dtype)
    for v in views(x):
        for f in (torch.any, torch.all):
            check(lambda t: f(t), v)
            check(lambda t: f(t, 0), v)
            check(lambda t: f(t, 1, keepdim=True), v)
            check(lambda t: f(t, (0, 1)), v)
    check(lambda t: t.any([]), x)
    check(lambda t: t.any(), torch.empty(0))
    check(lambda t: t.all(), torch.empty(0))
    check(lambda t: t.all(0), torch.ones(3, 4, dtype=dtype))


def test_any_all_special_values_and_out():
    x = torch.tensor([[0., float("nan")], [0., -0.]])
    check(lambda t: t.any(1), x)
    check(lambda t: t.all(0), x)
    check(lambda t, o: torch.any(t, 1, out=o), x, torch.empty(0, dtype=torch.bool))
    check(lambda t, o: torch.all(t, out=o), x, torch.empty(0, dtype=torch.bool))
    check(lambda t, o: torch.any(t, out=o), x.to(torch.uint8), torch.empty(0, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="only supports bool"):
        torch.all(x.to(TPU), 0, out=torch.empty(0, dtype=torch.long, device=TPU))


# --- logsumexp ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_logsumexp(dtype):
    x = rand(4, 6, dtype=dtype)
    for v in views(x):
        check(lambda t: torch.logsumexp(t, 1), v)
        check(lambda t: torch.logsumexp(t, (0, 1), keepdim=True), v)


def test_logsumexp_special():
    inf = math.inf
    x = torch.tensor([[-inf, -inf], [inf, 1.], [1000., 1000.], [float("nan"), 1.]])
    check_nan(lambda t: torch.logsumexp(t, 1), x)
    check(lambda t: torch.logsumexp(t, 0), torch.empty(0, 3))
    check(lambda t, o: torch.logsumexp(t, 1, out=o), rand(3, 4), torch.empty(0, dtype=torch.float64))
    with pytest.raises(RuntimeError, match="floating point type"):
        torch.logsumexp(torch.ones(2, 3, device=TPU), 0, out=torch.empty(0, dtype=torch.long, device=TPU))


def test_logsumexp_grad():
    check_grad(lambda t: torch.logsumexp(t, 1), torch.randn(3, 5))


# --- nansum / aminmax -------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_nansum(dtype):
    a = rnd(4, 5, dtype=dtype)
    if dtype.is_floating_point:
        a[1, 2] = float("nan")
        a[3, 0] = float("nan")
    g = dtype.is_floating_point
    check(lambda x: torch.nansum(x), a, grad=g)
    check(lambda x: torch.nansum(x, dim=1), a, grad=g)
    check(lambda x: torch.nansum(x, dim=0, keepdim=True), a)
    check(lambda x: torch.nansum(x[:, ::2], dim=1), a)


def test_nansum_out():
    a = rnd(4, 5)
    a[0, 0] = float("nan")
    out = torch.empty(4, device=TPU)
    torch.nansum(a.to(TPU), dim=1, out=out)
    torch.testing.assert_close(out.cpu(), torch.nansum(a, dim=1))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_aminmax(dtype):
    a = rnd(4, 5, dtype=dtype)
    check(lambda x: torch.aminmax(x), a)
    check(lambda x: torch.aminmax(x, dim=1), a)
    check(lambda x: torch.aminmax(x, dim=0, keepdim=True), a)
    check(lambda x: torch.aminmax(x.t(), dim=-1), a)


def test_aminmax_out_and_errors():
    a = rnd(4, 5)
    mn, mx = torch.empty(0, device=TPU), torch.empty(0, device=TPU)
    torch.aminmax(a.to(TPU), dim=1, out=(mn, mx))
    e = torch.aminmax(a, dim=1)
    torch.testing.assert_close(mn.cpu(), e.min)
    torch.testing.assert_close(mx.cpu(), e.max)
    both_raise(RuntimeError, torch.aminmax, torch.empty(0))


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_two_result_out_forms(dtype):
    from tests.helpers import check_pair_out

    a = rand(4, 5, dtype=dtype)
    check_pair_out(lambda x, out: torch.max(x, 1, out=out), a, (dtype, torch.long))
    check_pair_out(lambda x, out: torch.min(x.t(), 0, keepdim=True, out=out), a, (dtype, torch.long))
    check_pair_out(lambda x, out: torch.aminmax(x, dim=0, out=out), a, (dtype, dtype))
    check_pair_out(lambda x, out: torch.aminmax(x, out=out), a, (dtype, dtype))
    check_pair_out(lambda x, out: torch.aminmax(x[0, 0], keepdim=True, out=out), a, (dtype, dtype))
    # An empty reduced dim fails in the op's checks before any out= check.
    both_raise(IndexError, lambda x: torch.max(x, 0, out=(torch.empty(0, dtype=torch.int32),
                                                          torch.empty(0, dtype=torch.long))), torch.empty(0, 3))


def test_var_mean_of_integers_raises_like_cpu():
    for fn in (torch.var_mean, torch.std_mean):
        both_raise(RuntimeError, fn, torch.arange(6).reshape(2, 3))
        both_raise(RuntimeError, lambda x: fn(x, 1), torch.arange(6).reshape(2, 3))


# --- count_nonzero --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_count_nonzero(dtype):
    x = torch.randint(-1, 2, (3, 4, 5)).to(dtype)
    check(torch.count_nonzero, x)
    check(lambda x: torch.count_nonzero(x, 1), x)
    check(lambda x: torch.count_nonzero(x, (0, -1)), x)
    check(lambda x: torch.count_nonzero(x, 0), x[:, ::2].transpose(0, 1))
    check(torch.count_nonzero, torch.tensor(0).to(dtype))
    both_raise(RuntimeError, lambda x: torch.count_nonzero(x, (1, 1)), x)


# Every reduction declared through ops/variants.h, in its out= form, into an
# out of each dtype: the value and dtype CPU gives, or CPU's exception type.
OUT_FORMS = {
    "sum": lambda x, o: torch.sum(x, 1, out=o),
    "sum_dtype": lambda x, o: torch.sum(x, 1, dtype=torch.float64, out=o),
    "nansum": lambda x, o: torch.nansum(x, 0, out=o),
    "mean": lambda x, o: torch.mean(x, (0, 1), out=o),
    "prod": lambda x, o: torch.prod(x, 1, out=o),
    "amax": lambda x, o: torch.amax(x, 0, out=o),
    "amin": lambda x, o: torch.amin(x, (0, 1), keepdim=True, out=o),
    "max": lambda x, o: torch.max(x, out=o),
    "min": lambda x, o: torch.min(x, out=o),
    "argmax": lambda x, o: torch.argmax(x, 1, out=o),
    "argmin": lambda x, o: torch.argmin(x, out=o),
    "var": lambda x, o: torch.var(x, 1, correction=0, out=o),
    "std": lambda x, o: torch.std(x, 0, out=o),
    "vector_norm": lambda x, o: torch.linalg.vector_norm(x, 3.0, 1, out=o),
    "norm": lambda x, o: torch.norm(x, 2, [1], out=o),
    "any": lambda x, o: torch.any(x, 1, out=o),
    "any_all": lambda x, o: torch.any(x, out=o),
    "all_dims": lambda x, o: torch.all(x, (0, 1), out=o),
    "logsumexp": lambda x, o: torch.logsumexp(x, 1, out=o),
}


@pytest.mark.parametrize("out_dtype", [torch.float32, torch.float64, torch.int64, torch.bool])
@pytest.mark.parametrize("name", sorted(OUT_FORMS))
def test_reduction_out_forms_follow_cpu(name, out_dtype):
    fn = OUT_FORMS[name]
    x = torch.tensor([[1.5, -2.0, 3.0], [0.0, 4.0, float("nan")], [2.0, 1.0, -1.0]])
    if name not in ("nansum",):
        x = x.nan_to_num(0.5)
    try:
        want = fn(x, torch.empty(0, dtype=out_dtype))
    except Exception as e:  # noqa: BLE001 - CPU's exception type is the expectation
        with pytest.raises(type(e)):
            fn(x.to(TPU), torch.empty(0, dtype=out_dtype, device=TPU))
        return
    got = fn(x.to(TPU), torch.empty(0, dtype=out_dtype, device=TPU))
    assert got.dtype == want.dtype and got.shape == want.shape
    torch.testing.assert_close(got.cpu(), want, equal_nan=True)
