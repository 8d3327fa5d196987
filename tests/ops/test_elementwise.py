"""Elementwise math, comparisons, where and clamp on tpu vs PyTorch CPU."""
import pytest
import torch

from tests.helpers import TPU, check

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


# ---- unary ------------------------------------------------------------------

UNARY_FLOAT = ["exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt", "reciprocal",
               "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh",
               "atanh", "sigmoid", "erf", "erfc", "erfinv"]
UNARY_SAME = ["neg", "abs", "sign", "sgn", "floor", "ceil", "round", "trunc", "frac", "relu", "bitwise_not",
              "isnan", "isinf", "isfinite", "logical_not", "nan_to_num", "square"]


def domain(op, dtype):
    x = make((3, 5), dtype)
    if not dtype.is_floating_point and dtype != torch.bool:
        if op in ("log", "log2", "log10", "sqrt", "rsqrt", "log1p"):
            x = x.abs()
        elif op in ("asin", "acos", "atanh", "erfinv"):
            x = make((3, 5), dtype, -1, 1)
        elif op == "acosh":
            x = x.abs() + 1
    if dtype.is_floating_point:
        if op in ("log", "log2", "log10", "sqrt", "rsqrt"):
            x = x.abs() + 0.1
        elif op in ("log1p",):
            x = x.abs()
        elif op in ("asin", "acos", "atanh", "erfinv"):
            x = x / 3.5
        elif op == "acosh":
            x = x.abs() + 1.1
        elif op == "reciprocal":
            x = x.abs() + 0.5
    return x


@pytest.mark.parametrize("op", UNARY_FLOAT + UNARY_SAME)
@pytest.mark.parametrize("dtype", DTYPES)
def test_unary(op, dtype):
    x = domain(op, dtype)
    fn = getattr(torch, op)
    same_as_cpu(fn, x, grad=dtype.is_floating_point and op not in ("isnan", "isinf", "isfinite", "logical_not",
                                                                    "bitwise_not", "nan_to_num"))


@pytest.mark.parametrize("op", ["exp", "sin", "abs", "neg", "floor", "sigmoid", "tanh", "sqrt"])
def test_unary_views_inplace_out(op):
    base = torch.rand(6, 8) + 0.1
    check(lambda a: getattr(torch, op)(a.t()), base)
    check(lambda a: getattr(torch, op)(a[:, ::2]), base)
    check(lambda a: getattr(torch, op)(a[1:]), base)

    def inplace(a):
        a = a.clone()
        getattr(a[1:, ::2], op + "_")()
        return a
    check(inplace, base)

    def out_view(a):
        big = torch.zeros(8, 10, device=a.device)
        getattr(torch, op)(a[:4, :4], out=big[2:6, 1:5])
        return big
    check(out_view, base)


def test_unary_inplace_int_to_float_errors():
    with pytest.raises(RuntimeError):
        torch.arange(4).to(TPU).exp_()


def test_special_values():
    x = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, -0.0, 2.5, -2.5, 0.5, 1.5])
    for op in ["isnan", "isinf", "isfinite", "sign", "round", "trunc", "frac", "floor", "ceil", "relu", "abs"]:
        check_nan(getattr(torch, op), x)
    check_nan(torch.nan_to_num, x)
    check_nan(lambda a: torch.nan_to_num(a, nan=1.0, posinf=2.0, neginf=-3.0), x)
    check_nan(torch.nan_to_num, x.bfloat16())
    for d in [0, 1, 2, -1]:
        check_nan(lambda a: torch.round(a * 123.456, decimals=d), x)
    same_as_cpu(lambda a: torch.round(a, decimals=0), torch.arange(5))  # CPU: not implemented


def test_logical_not_out_dtype():
    x = torch.tensor([0.0, 1.0, -2.0])
    check(lambda a: torch.logical_not(a, out=torch.empty(3, dtype=torch.int32, device=a.device)), x)


# ---- binary -----------------------------------------------------------------

BINARY = ["pow", "atan2", "maximum", "minimum", "fmax", "fmin", "fmod", "remainder", "floor_divide",
          "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "logical_or", "logical_xor", "hypot",
          "copysign", "xlogy", "eq", "ne", "lt", "le", "gt", "ge"]
NONZERO_RHS = {"fmod", "remainder", "floor_divide"}


def rhs(op, dtype, shape):
    y = make(shape, dtype)
    if op in NONZERO_RHS and dtype != torch.bool:
        y = torch.where(y == 0, torch.ones_like(y), y)
    if op == "pow":
        y = make(shape, dtype, 0, 3)
    if op == "xlogy" and dtype.is_floating_point:
        y = y.abs() + 0.1
    return y


@pytest.mark.parametrize("op", BINARY)
@pytest.mark.parametrize("dtype", DTYPES)
def test_binary(op, dtype):
    x = make((4, 5), dtype)
    if op == "pow" and dtype.is_floating_point:
        x = x.abs() + 0.1
    y = rhs(op, dtype, (5,))  # broadcast
    diff = dtype.is_floating_point and op not in ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or",
                                                 "logical_xor", "floor_divide", "fmod", "remainder")
    same_as_cpu(getattr(torch, op), x, y, grad=diff)


@pytest.mark.parametrize("op", BINARY)
def test_binary_promotion_and_scalars(op):
    x = make((3, 4), torch.int32)
    y = rhs(op, torch.float32, (3, 4)).abs() + 0.5
    if op == "pow":
        x = x.abs()
    same_as_cpu(getattr(torch, op), x, y)
    same_as_cpu(getattr(torch, op), y, x if op not in NONZERO_RHS else x.abs() + 1)
    same_as_cpu(lambda a: getattr(torch, op)(a, 2), y)
    same_as_cpu(lambda a: getattr(torch, op)(a, 2.5), x.abs() + 1)
    same_as_cpu(lambda a: getattr(torch, op)(a, True), x)
    # 0-dim tensors do not take part in promotion over dimensioned ones
    same_as_cpu(getattr(torch, op), y.bfloat16(), torch.tensor(2.0, dtype=torch.float64))


def test_nan_semantics():
    a = torch.tensor([float("nan"), 1.0, float("nan"), 2.0, -0.0])
    b = torch.tensor([1.0, float("nan"), float("nan"), 3.0, 0.0])
    for op in ["maximum", "minimum", "fmax", "fmin", "eq", "ne", "lt", "le", "gt", "ge", "copysign", "xlogy",
               "hypot", "atan2"]:
        check_nan(getattr(torch, op), a, b)
    check_nan(lambda z, x: torch.xlogy(z, x), torch.zeros(5), b)
    check_nan(lambda x, y: torch.remainder(x, y), torch.tensor([5.0, -5.0, 5.0, -5.0, 0.0]),
          torch.tensor([3.0, 3.0, -3.0, -3.0, 2.0]))
    check_nan(lambda x, y: torch.floor_divide(x, y), torch.tensor([5.0, -5.0, 5.0, -5.0, 0.0, 1.0]),
          torch.tensor([3.0, 3.0, -3.0, -3.0, 2.0, 0.0]))
    check_nan(lambda x, y: torch.floor_divide(x, y), torch.tensor([7, -7, 7, -7]), torch.tensor([2, 2, -2, -2]))


def test_pow_overloads():
    x = torch.rand(3, 4) + 0.5
    check_grad(lambda a: torch.pow(a, 2), x)
    check_grad(lambda a: torch.pow(a, 0.5), x)
    check_grad(lambda a: torch.pow(2.0, a), x)
    check(lambda a: torch.pow(2, a), torch.arange(5))
    check(lambda a: a ** 3, torch.arange(-3, 4))
    with pytest.raises(RuntimeError):
        torch.pow(torch.arange(3).to(TPU), -1)

    def inplace(a):
        a = a.clone()
        a.pow_(2)
        a[1:].pow_(a[0])
        return a
    check(inplace, x)
    check(lambda a: torch.pow(a, 2, out=torch.empty(0, device=a.device)), x)


@pytest.mark.parametrize("op", ["atan2", "maximum", "fmod", "remainder", "bitwise_and", "logical_or", "eq", "lt",
                                "hypot", "copysign"])
def test_binary_views_inplace_out(op):
    dtype = torch.int64 if op in ("bitwise_and",) else torch.float32
    base = make((6, 8), dtype)
    other = rhs(op, dtype, (8, 6))
    fn = getattr(torch, op)
    check(lambda a, b: fn(a.t(), b), base, other)
    check(lambda a, b: fn(a[1:, ::2], b[:5, 1:5]), base, other)

    if hasattr(torch.Tensor, op + "_"):
        def inplace(a, b):
            a = a.clone()
            getattr(a[1:, ::2], op + "_")(b[:5, :4])
            return a
        check(inplace, base, other)

    def out_view(a, b):
        big = torch.zeros(8, 10, dtype=fn(a, a).dtype, device=a.device)
        fn(a[:4, :4], b[:4, :4], out=big[2:6, 1:5])
        return big
    check(out_view, base, other)


@pytest.mark.parametrize("op", ["atan2", "maximum", "eq", "bitwise_or", "lerp", "pow"])
def test_shape_mismatch(op):
    fn = getattr(torch, op)
    dtype = torch.int32 if op == "bitwise_or" else torch.float32
    a, b = make((3, 4), dtype).to(TPU), make((5,), dtype).to(TPU)
    args = (a, b, 0.5) if op == "lerp" else (a, b)
    with pytest.raises(RuntimeError):
        fn(*args)
    if hasattr(torch.Tensor, op + "_"):
        with pytest.raises(RuntimeError):  # in-place can't broadcast self
            getattr(make((4,), dtype).to(TPU), op + "_")(*([make((3, 4), dtype).to(TPU)] + list(args[2:])))


def test_dunder_bitwise():
    a, b = make((4, 5), torch.int32), make((4, 5), torch.int32)
    check(lambda x, y: (x & y, x | y, x ^ y, ~x, x & 3, x | 1, x ^ 2), a, b)
    p, q = make((4, 5), torch.bool), make((4, 5), torch.bool)
    check(lambda x, y: (x & y, x | y, x ^ y, ~x), p, q)


def test_lerp():
    s, e, w = torch.randn(3, 4), torch.randn(4), torch.rand(3, 1)
    check_grad(lambda a, b: torch.lerp(a, b, 0.3), s, e)
    check_grad(lambda a, b: torch.lerp(a, b, 0.8), s, e)
    check_grad(torch.lerp, s, e, w)
    check(lambda a, b, c: torch.lerp(a.bfloat16(), b.bfloat16(), c.bfloat16()), s, e, w)

    def inplace(a, b):
        a = a.clone()
        a.lerp_(b, 0.25)
        return a
    check(inplace, s, e)
    with pytest.raises(RuntimeError):
        torch.lerp(s.to(TPU), e.double().to(TPU), 0.5)


@pytest.mark.parametrize("op", ["addcmul", "addcdiv"])
def test_addc(op):
    fn = getattr(torch, op)
    s, t1, t2 = torch.randn(3, 4), torch.randn(4), torch.rand(3, 1) + 0.5
    check_grad(lambda a, b, c: fn(a, b, c, value=0.5), s, t1, t2)
    check(lambda a, b, c: fn(a, b, c), s.bfloat16(), t1.bfloat16(), t2.bfloat16())

    def inplace(a, b, c):
        a = a.clone()
        getattr(a, op + "_")(b, c, value=2)
        return a
    check(inplace, s, t1, t2)
    check(lambda a, b, c: fn(a, b, c, out=torch.empty(3, 4, device=a.device)), s, t1, t2)
    if op == "addcmul":
        check(lambda a, b, c: fn(a, b, c, value=3), *(torch.arange(12).reshape(3, 4),) * 3)
    else:
        with pytest.raises(RuntimeError):
            fn(*(torch.arange(4).to(TPU),) * 3)


# ---- comparisons, where, clamp --------------------------------------------------

@pytest.mark.parametrize("op", ["eq", "ne", "lt", "le", "gt", "ge"])
def test_compare_forms(op):
    a, b = make((4, 5), torch.float32), make((4, 5), torch.float32)
    b[0] = a[0]
    fn = getattr(torch, op)
    check(lambda x: fn(x, 0.5), a)
    check(lambda x: fn(x, 1), make((4, 5), torch.int64))
    check(lambda x, y: fn(x, y, out=torch.empty(0, dtype=torch.bool, device=x.device)), a, b)
    check(lambda x, y: fn(x, y, out=torch.empty(0, dtype=torch.float32, device=x.device)), a, b)

    def inplace(x, y):
        x = x.clone()
        getattr(x, op + "_")(y)
        getattr(x[1:], op + "_")(0.0)
        return x
    check(inplace, a, b)


def test_where():
    c = make((4, 5), torch.bool)
    a, b = make((4, 5), torch.float32), make((5,), torch.float32)
    check_grad(torch.where, c, a, b)
    check_grad(lambda c_, x: torch.where(c_, x, 0.0), c, a)
    check(lambda c_, x: torch.where(c_, 1, x), c, make((4, 5), torch.int32))
    check(torch.where, c, make((4, 5), torch.int32), b)
    check(torch.where, c[:, :1], make((1, 5), torch.bfloat16), make((4, 1), torch.int64))
    check(lambda c_, x, y: torch.where(c_.t(), x.t(), y), c, a, make((5, 4), torch.float32))
    check(lambda c_, x, y: torch.where(c_, x, y, out=torch.empty(0, device=x.device)), c, a, b)
    with pytest.raises(RuntimeError):
        torch.where(a.to(TPU), a.to(TPU), a.to(TPU))
    with pytest.raises(RuntimeError):
        torch.where(c.to(TPU), a.to(TPU), make((3,), torch.float32).to(TPU))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_clamp(dtype):
    x = make((4, 5), dtype)
    (check_grad if dtype.is_floating_point else check)(lambda a: torch.clamp(a, -1, 2), x)
    check(lambda a: torch.clamp(a, min=0), x)
    check(lambda a: torch.clamp(a, max=1), x)
    check(lambda a: torch.clamp(a, min=0.5), x)  # promotes ints to float
    check(lambda a: torch.clamp_min(a, 1), x)
    check(lambda a: torch.clamp_max(a, 1), x)
    lo, hi = make((5,), dtype, -3, 0), make((4, 1), dtype, 0, 3)
    (check_grad if dtype.is_floating_point else check)(torch.clamp, x, lo, hi)
    check(lambda a, b: torch.clamp(a, min=b), x, lo)
    check(lambda a, b: torch.clamp(a, max=b), x, hi)
    check(torch.clamp_min, x, lo)
    check(torch.clamp_max, x, lo)

    def inplace(a, b):
        a = a.clone()
        a.clamp_(-1, 1)
        a[1:].clamp_(min=b)
        a[:, ::2].clamp_min_(0)
        a.t().clamp_max_(2)
        return a
    check(inplace, x, lo)
    check(lambda a: torch.clamp(a, -1, 1, out=torch.empty(0, dtype=dtype, device=a.device)), x)


def test_clamp_nan_and_errors():
    x = torch.tensor([float("nan"), -2.0, 0.5, 3.0])
    check_nan(lambda a: torch.clamp(a, -1, 1), x)
    check_nan(lambda a: torch.clamp(a, 1, -1), x)  # min > max gives max
    check_nan(lambda a, b: torch.clamp(a, b), x, torch.tensor([0.0, float("nan"), 0.0, 0.0]))
    with pytest.raises(RuntimeError):
        torch.clamp(x.to(TPU))
    with pytest.raises(RuntimeError):
        torch.clamp(x.to(TPU), torch.zeros(3, device=TPU))


# ---- autograd through backward kernels -------------------------------------------

def test_activation_grads():
    x = torch.randn(4, 6)
    check_grad(torch.relu, x)
    check_grad(torch.sigmoid, x)
    check_grad(torch.tanh, x)
    check_grad(lambda a: torch.nn.functional.relu(a[:, ::2]), x)
    check_grad(lambda a, b: torch.maximum(a, b) + torch.minimum(a, b) * 2, x, torch.randn(4, 6))
    check_grad(lambda a, b: torch.atan2(a, b) + torch.hypot(a, b), x, torch.randn(4, 6))
    check_grad(lambda a, b: torch.pow(a.abs() + 0.5, b), x, torch.randn(4, 6))
