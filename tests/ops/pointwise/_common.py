"""Helpers shared by the pointwise tests: inputs, and comparison with CPU
(values, the same exception type, NaN-aware results, gradients)."""
import pytest
import torch

from tests.helpers import TPU, check, rnd, to_tpu, tols

FLOATS = [torch.float32, torch.bfloat16]


# Ops other families implement; backward formulas of ours call them.
OTHER_FAMILIES = ("masked_fill", "sum.IntList", "_efficientzerotensor")


def check_grad(fn, *args, **kw):
    """check(..., grad=True), skipped while an op another family owns is missing."""
    try:
        return check(fn, *args, grad=True, **kw)
    except NotImplementedError as e:
        if any(f"aten::{n}" in str(e) for n in OTHER_FAMILIES):
            pytest.skip(f"backward needs another family's op: {e}"[:200])
        raise


DTYPES = [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool]


def make(shape, dtype, low=-3, high=3):
    if dtype == torch.bool:
        return torch.randint(0, 2, shape).bool()
    if dtype.is_floating_point:
        return (torch.rand(shape) * (high - low) + low).to(dtype)
    return torch.randint(low, high + 1, shape).to(dtype)


def cpu_outcome(fn, *args):
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001
        return None, type(e)


def same_as_cpu(fn, *args, **kw):
    """Compares with CPU, or checks the same exception type is raised."""
    exp, err = cpu_outcome(fn, *args)
    if err is not None:
        with pytest.raises(err):
            fn(*[a.to(TPU) if isinstance(a, torch.Tensor) else a for a in args])
        return
    if exp.is_floating_point() and exp.isnan().any():  # e.g. acosh(False)
        act = fn(*[a.to(TPU) for a in args]).cpu()
        torch.testing.assert_close(act, exp, equal_nan=True)
        return
    if kw.pop("grad", False):
        check_grad(fn, *args, **kw)
    else:
        check(fn, *args, **kw)


def check_nan(fn, *args):
    """Like check() for results holding NaN (compared as equal)."""
    exp = fn(*args)
    act = fn(*[a.to(TPU) for a in args])
    exps = exp if isinstance(exp, tuple) else (exp,)
    acts = act if isinstance(act, tuple) else (act,)
    for a, e in zip(acts, exps):
        torch.testing.assert_close(a.cpu(), e, equal_nan=True)


def check_equal_nan(fn, *args, grad=False, **kw):
    """helpers.check, but NaN == NaN (for functions that return NaN by design
    outside their domain)."""
    if grad:
        return check(fn, *args, grad=True, **kw)
    expected = fn(*args)
    actual = fn(*[to_tpu(a) for a in args])
    dts = [a.dtype for a in args if isinstance(a, torch.Tensor)]
    tol = tols(dts[0]) if dts else {}
    if isinstance(expected, tuple):
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a.cpu(), e, equal_nan=True, **tol)
    else:
        torch.testing.assert_close(actual.cpu(), expected, equal_nan=True, **tol)
    return actual
