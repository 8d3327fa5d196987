"""Binary elementwise math on tpu vs PyTorch CPU (csrc/ops/pointwise/binary.cc),
plus logaddexp/logaddexp2 and heaviside."""
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


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16, torch.float16])
def test_floor_division_at_infinities_and_zeros(dtype):
    # div(rounding_mode="floor") and floor_divide are one ATen kernel: 5 // inf
    # is 0, -5 // inf is -1, inf // 2 is nan, x // 0 is +-inf. Exactly as CPU.
    inf = float("inf")
    a = torch.tensor([5.0, -5.0, 0.0, -0.0, inf, -inf, 3.5, -3.5, float("nan"), 7.0, -7.0, 1e4], dtype=dtype)
    b = torch.tensor([inf, inf, -inf, inf, 2.0, 3.0, -inf, inf, 1.0, 0.0, 0.0, 3e-3], dtype=dtype)
    for fn in (torch.floor_divide, lambda x, y: torch.div(x, y, rounding_mode="floor")):
        check_nan(fn, a, b)
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(500, generator=g) * 100).to(dtype)
    y = (torch.randn(500, generator=g) * 3).to(dtype)
    torch.testing.assert_close(torch.div(x.to("tpu"), y.to("tpu"), rounding_mode="floor").cpu(),
                               torch.div(x, y, rounding_mode="floor"), rtol=0, atol=0)


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


# --- logaddexp / heaviside ------------------------------------------------------------------

@pytest.mark.parametrize("fn", [torch.logaddexp, torch.logaddexp2])
@pytest.mark.parametrize("dtype", FLOATS)
def test_logaddexp(fn, dtype):
    a, b = rnd(3, 4, dtype=dtype), rnd(4, dtype=dtype)
    check(fn, a, b, grad=True)
    check(lambda x, y: fn(x.t(), y[1:]), rnd(4, 3, dtype=dtype), rnd(5, dtype=dtype))
    inf = float("inf")
    s = torch.tensor([inf, -inf, inf, -inf, 1.0, 100.0], dtype=dtype)
    t = torch.tensor([inf, -inf, -inf, 2.0, -inf, 100.0], dtype=dtype)
    check(fn, s, t)
    out = torch.empty(3, 4, device=TPU, dtype=dtype)
    fn(a.to(TPU), b.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), fn(a, b), **({} if dtype == torch.float32 else dict(atol=1e-2, rtol=1.6e-2)))


def test_logaddexp_int_raises():
    both_raise(NotImplementedError, torch.logaddexp, torch.tensor([1, 2]), torch.tensor([1, 2]))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_heaviside(dtype):
    a = rnd(3, 4, dtype=dtype)
    if dtype.is_floating_point:
        a[0, 0] = 0
        a[1, 1] = float("nan")
    v = rnd(4, dtype=dtype)
    check(torch.heaviside, a, v)
    check(lambda x, y: x.clone().heaviside_(y), a, v)
    big = torch.zeros(5, 6, dtype=dtype, device=TPU)
    torch.heaviside(a.to(TPU), v.to(TPU), out=big[1:4, 1:5])
    torch.testing.assert_close(big[1:4, 1:5].cpu(), torch.heaviside(a, v))
    both_raise(RuntimeError, torch.heaviside, rnd(3), rnd(3, dtype=torch.int64))


# ---- integer division by zero --------------------------------------------------

INT_DIVISIONS = {
    "floor_divide": lambda a, d: a // d,
    "remainder": lambda a, d: a % d,
    "fmod": lambda a, d: torch.fmod(a, d),
    "div_floor": lambda a, d: torch.div(a, d, rounding_mode="floor"),
    "div_trunc": lambda a, d: torch.div(a, d, rounding_mode="trunc"),
    "floor_divide_": lambda a, d: a.clone().floor_divide_(d),
    "fmod_out": lambda a, d: torch.fmod(a, d, out=torch.empty_like(a)),
    "div_floor_": lambda a, d: a.clone().div_(d, rounding_mode="floor"),
}


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.uint8])
@pytest.mark.parametrize("op", INT_DIVISIONS)
def test_integer_division_by_a_zero_number_raises_as_cpu(op, dtype):
    # CPU raises RuntimeError("ZeroDivisionError"); XLA would return a value.
    # A number divisor is checked before any program is built.
    fn = INT_DIVISIONS[op]
    a = torch.arange(4, dtype=dtype)
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as cpu:
        fn(a, 0)
    with pytest.raises(RuntimeError, match="ZeroDivisionError") as tpu:
        fn(a.to(TPU), 0)
    assert str(tpu.value) == str(cpu.value)
    # A non-zero number, and true division by zero (a float inf), still work.
    check(lambda x: fn(x, 3), a)
    check_nan(lambda x: x / 0, a)  # 0 / 0 is nan
    check_nan(lambda x: torch.fmod(x.float(), 0), a)


def test_integer_division_by_a_zero_tensor_is_checked_under_debug_checks():
    # A tpu divisor would need a host read: unchecked by default (as CUDA),
    # CPU's error with TORCH_TPU_DEBUG_CHECKS=1.
    import os
    import subprocess
    import sys

    code = """
import torch, torch_tpu
fns = (lambda a, d: a // d, lambda a, d: a % d, lambda a, d: torch.fmod(a, d), lambda a, d: torch.remainder(5, d),
       lambda a, d: torch.div(a, d, rounding_mode='trunc'))
a = torch.arange(4)
for fn in fns:
    try:
        fn(a.to('tpu'), torch.tensor([1, 2, 0, 3], device='tpu')).cpu()
        raise SystemExit('no error')
    except RuntimeError as e:
        assert str(e) == 'ZeroDivisionError', e
    d = torch.tensor([1, 2, 5, -3])
    torch.testing.assert_close(fn(a.to('tpu'), d.to('tpu')).cpu(), fn(a, d))
print('OK')
"""
    env = dict(os.environ, TORCH_TPU_DEBUG_CHECKS="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


def test_number_first_overloads_out_forms():
    # pow.Scalar and remainder.Scalar_Tensor: a Python number first.
    x = make((3, 4), torch.float32).abs() + 0.5
    i = make((3, 4), torch.int64).abs() + 1
    check(lambda a, o: (torch.pow(2.0, a, out=o), o)[1], x, torch.empty(0))
    check(lambda a, o: (torch.pow(3, a, out=o), o)[1], i, torch.empty(0, dtype=torch.float64))
    rem_out = torch.ops.aten.remainder.Scalar_Tensor_out  # Python's torch.remainder has no out= here
    check(lambda a, o: (rem_out(7, a, out=o[:, ::2]), o)[1], i, torch.zeros(3, 8, dtype=torch.int64))
    check(lambda a: torch.pow(2, a.t()), i)
    # An int result cannot go into a bool out. (A tpu divisor of zero is
    # checked only under TORCH_TPU_DEBUG_CHECKS=1, as CUDA leaves it unchecked.)
    both_raise(RuntimeError, lambda a: rem_out(7, a, out=torch.empty(0, dtype=torch.bool, device=a.device)), i)
