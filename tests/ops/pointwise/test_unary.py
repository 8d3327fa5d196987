"""Unary elementwise math (incl. sinc, signbit and sgn's gradient) and the
backward kernels autograd calls for them, on tpu vs PyTorch CPU
(csrc/ops/pointwise/unary.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check
from tests.ops.pointwise._common import (
    DTYPES,
    FLOATS,
    OTHER_FAMILIES,
    check_grad,
    check_nan,
    cpu_outcome,
    make,
    rnd,
    same_as_cpu,
)

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


def _cpu_and_tpu_error(fn, x, out_dtype):
    errs = []
    for dev in ("cpu", TPU):
        with pytest.raises(RuntimeError) as e:
            fn(x.to(dev), out=torch.empty(3, dtype=out_dtype, device=dev))
        errs.append(e)
    return errs


@pytest.mark.parametrize("fn,dtype,out_dtype", [
    # out= of another dtype: CPU's TensorIterator "Found dtype" comes before the
    # dtype dispatch's NotImplementedError
    (torch.abs, torch.bool, torch.int64), (torch.floor, torch.bool, torch.float32),
    (torch.round, torch.bool, torch.int32), (torch.trunc, torch.bool, torch.uint8),
    (torch.bitwise_not, torch.float32, torch.int64), (torch.bitwise_not, torch.float32, torch.float32),
    (torch.neg, torch.float32, torch.int64), (torch.sgn, torch.int32, torch.int64),
    (lambda a, out: torch.round(a, decimals=1, out=out), torch.float32, torch.float64),
    (lambda a, out: torch.round(a, decimals=2, out=out), torch.float32, torch.int64),
    (lambda a, out: torch.round(a, decimals=-1, out=out), torch.float16, torch.float32),
    (lambda a, out: torch.round(a, decimals=1, out=out), torch.int64, torch.float32),
])
def test_unary_out_dtype_errors(fn, dtype, out_dtype):
    x = torch.tensor([1.5, -2.0, 0.0]).to(dtype)
    cpu, tpu = _cpu_and_tpu_error(fn, x, out_dtype)
    assert tpu.type is cpu.type
    assert str(tpu.value).splitlines()[0] == str(cpu.value).splitlines()[0]


def test_logical_not_out_dtype():
    x = torch.tensor([0.0, 1.0, -2.0])
    check(lambda a: torch.logical_not(a, out=torch.empty(3, dtype=torch.int32, device=a.device)), x)


def test_logical_not_and_nan_to_num_forms():
    # Functional, in-place (on a transposed view) and out= forms against CPU;
    # the in-place form keeps self's dtype, out= of another dtype follows CPU.
    x = torch.tensor([[0.0, float("nan"), -2.0], [float("inf"), 1.0, -float("inf")]])
    check(torch.logical_not, x)
    check(lambda a: a.t().logical_not_(), x)
    check(lambda a: a.t().nan_to_num_(posinf=5.0), x)
    check(lambda a: torch.nan_to_num(a.t(), nan=1.0), x)
    check(lambda a: torch.nan_to_num(a, out=torch.empty(0, device=a.device)), x)
    check(lambda a: torch.nan_to_num(a, out=torch.empty(0, dtype=torch.int64, device=a.device)),
          torch.tensor([1, 2]))
    check(lambda a: torch.logical_not(a, out=torch.empty(0, dtype=torch.float64, device=a.device)), x)
    both_raise(RuntimeError, lambda a: torch.nan_to_num(a, out=torch.empty(0, dtype=torch.float64, device=a.device)),
               x)


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


# --- sinc / signbit --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_sinc(dtype):
    a = rnd(3, 5, dtype=dtype)
    if dtype.is_floating_point:
        a[0, 0] = 0
    check(torch.sinc, a, grad=dtype.is_floating_point)
    check(lambda x: torch.sinc(x[:, ::2]), a)
    if dtype.is_floating_point:
        check(lambda x: x.clone().sinc_(), a)
    out = torch.empty(0, dtype=torch.sinc(a).dtype, device=TPU)
    torch.sinc(a.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.sinc(a), **({} if dtype != torch.bfloat16 else dict(atol=1e-2, rtol=1.6e-2)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_signbit(dtype):
    a = rnd(3, 5, dtype=dtype)
    if dtype.is_floating_point:
        a[0, :3] = torch.tensor([0.0, -0.0, float("-inf")], dtype=dtype)
    check(torch.signbit, a)
    check(lambda x: torch.signbit(x.t()), a)
    out = torch.empty(15, dtype=torch.bool, device=TPU)
    torch.signbit(a.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.signbit(a))


# --- sgn's gradient -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_sgn_grad(dtype):
    x = torch.randn(4, 5, dtype=dtype)
    check(torch.sgn, x, grad=True)
