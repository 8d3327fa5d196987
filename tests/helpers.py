"""Compare-with-CPU helpers shared by the tests."""
from __future__ import annotations

import torch

TPU = torch.device("tpu")


def rnd(*shape, dtype=torch.float32, lo=-3.0, hi=3.0):
    """Random values of `dtype`: uniform in [lo, hi) for floats, small ints, or coin-flip bools."""
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(-5, 6, shape, dtype=dtype)
    return (torch.rand(*shape) * (hi - lo) + lo).to(dtype)


def to_tpu(x):
    if isinstance(x, torch.Tensor):
        t = x.detach().to(TPU)
        return t.requires_grad_(x.requires_grad)
    if isinstance(x, (list, tuple)):
        return type(x)(to_tpu(v) for v in x)
    if isinstance(x, dict):
        return {k: to_tpu(v) for k, v in x.items()}
    return x


def to_cpu(x):
    if isinstance(x, torch.Tensor):
        return x.detach().cpu()
    if isinstance(x, (list, tuple)):
        return type(x)(to_cpu(v) for v in x)
    return x


def tols(dtype):
    """Tolerances as PyTorch's own device tests use for each dtype."""
    if dtype == torch.bfloat16:
        return dict(atol=1e-2, rtol=1.6e-2)
    if dtype == torch.float16:
        return dict(atol=1e-3, rtol=1e-3)
    return {}


def check(fn, *args, grad=False, atol=None, rtol=None, **kwargs):
    """Runs fn on CPU tensors and on tpu copies; asserts results (and, with
    grad=True, gradients of every floating input) match. Returns the tpu result."""
    cpu_args = [a.detach().clone().requires_grad_(grad and a.is_floating_point())
                if isinstance(a, torch.Tensor) else a for a in args]
    tpu_args = [to_tpu(a) for a in cpu_args]
    expected = fn(*cpu_args, **kwargs)
    actual = fn(*tpu_args, **kwargs)
    tol = {}
    if atol is not None:
        tol = dict(atol=atol, rtol=rtol if rtol is not None else 0)
    else:
        dts = [a.dtype for a in cpu_args if isinstance(a, torch.Tensor)]
        tol = tols(dts[0]) if dts else {}
    _assert_same(to_cpu(actual), expected, tol)
    if grad:
        outs = expected if isinstance(expected, (tuple, list)) else [expected]
        touts = actual if isinstance(actual, (tuple, list)) else [actual]
        for e, a in zip(outs, touts):
            if isinstance(e, torch.Tensor) and e.requires_grad:
                g = torch.randn_like(e)
                e.backward(g)
                a.backward(g.to(TPU))
        for c, t in zip(cpu_args, tpu_args):
            if isinstance(c, torch.Tensor) and c.requires_grad:
                assert t.grad is not None, "no gradient reached a tpu input"
                _assert_same(t.grad.cpu(), c.grad, tol)
    return actual


def both_raise(exc, fn, *cpu_args):
    """fn raises `exc` on CPU arguments and on their tpu copies alike."""
    import pytest

    with pytest.raises(exc):
        fn(*cpu_args)
    with pytest.raises(exc):
        fn(*[a.to(TPU) if isinstance(a, torch.Tensor) else a for a in cpu_args])


def check_pair_out(fn, x, dtypes):
    """fn(x, out=(a, b)) for an op with two results (values and indices, min
    and max) on CPU and tpu alike: empty outs are resized and filled with
    CPU's values; non-empty outs of another shape are resized with CPU's
    warning; an out of the wrong dtype raises CPU's error type. `dtypes`
    are the two results' dtypes; an out dtype is wrong when no other dtype
    works for it on CPU."""
    import warnings

    import pytest

    def run(dev, shape, dts):
        outs = tuple(torch.zeros(shape, dtype=d, device=dev) for d in dts)
        res = fn(x.to(dev), out=outs)
        assert all(r is o for r, o in zip(res, outs)), "out= must return the tensors it was given"
        return outs

    for shape in [(0,), (7,)]:
        with warnings.catch_warnings(record=True) as cpu_warned:
            warnings.simplefilter("always")
            expected = run("cpu", shape, dtypes)
        with warnings.catch_warnings(record=True) as tpu_warned:
            warnings.simplefilter("always")
            actual = run(TPU, shape, dtypes)
        assert bool(cpu_warned) == bool(tpu_warned), (cpu_warned, tpu_warned)
        for a, e in zip(actual, expected):
            torch.testing.assert_close(a.cpu(), e, equal_nan=True)
    for i in range(2):
        wrong = list(dtypes)
        wrong[i] = torch.int32 if dtypes[i] != torch.int32 else torch.float32
        with pytest.raises(RuntimeError):
            run("cpu", (0,), wrong)
        with pytest.raises(RuntimeError):
            run(TPU, (0,), wrong)


def _assert_same(actual, expected, tol):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _assert_same(a, e, tol)
    elif isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor)
        assert actual.device.type == "cpu"
        torch.testing.assert_close(actual, expected.detach(), **tol)
    else:
        assert actual == expected


def rerun_with_devices(path: str, n: int) -> None:
    """Runs the test file `path` in a process with `n` XLA:CPU devices
    (TORCH_TPU_NUM_CPU_DEVICES) and asserts that its tests passed there."""
    import os
    import subprocess
    import sys

    env = dict(os.environ, TORCH_TPU_NUM_CPU_DEVICES=str(n))
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path],
                       env=env, capture_output=True, text=True, timeout=900)
    tail = p.stdout[-4000:] + p.stderr[-2000:]
    assert p.returncode == 0, tail
    assert " passed" in p.stdout and "failed" not in p.stdout, tail
