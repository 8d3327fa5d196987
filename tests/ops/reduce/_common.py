"""Helpers shared by the reduction and scan tests: inputs in every dtype,
strided views of them, and gradient checks."""
import re

import pytest
import torch

from tests.helpers import check, rnd

# Ops this family registers: a backward that needs one of these must not be
# skipped for a missing kernel.
OURS = {"sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "var_mean",
        "std_mean", "linalg_vector_norm", "norm", "any", "all", "cumsum", "cumsum_", "cumprod", "cumprod_",
        "logsumexp"}


def check_grad(fn, *args, **kw):
    """check(grad=True), skipped when the backward needs an op another family
    has not registered yet (tests run with CPU fallback off)."""
    try:
        return check(fn, *args, grad=True, **kw)
    except NotImplementedError as e:
        m = re.search(r"operator '(?:aten::)?([\w.]+)'", str(e))
        if m is None or m.group(1).split(".")[0] in OURS:
            raise
        pytest.skip(f"backward needs {m.group(1)}, not registered in this branch")


def rand(*shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(-5, 6, shape, dtype=dtype)


ALL = [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool]


def views(x):
    """The input itself, a transposed view and a strided view with an offset.
    View reading is dtype-independent, so other dtypes get fewer (compiles
    cost time)."""
    if x.dtype == torch.float32:
        return [x, x.t(), x[1:, ::2]]
    return [x, x[1:, ::2]]
