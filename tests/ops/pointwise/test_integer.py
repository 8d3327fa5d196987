"""Integer ops vs CPU: shifts and gcd/lcm (csrc/ops/pointwise/integer.cc)."""
import pytest
import torch

from tests.helpers import TPU, check

I64_MIN = -(2**63)


# --- shifts -------------------------------------------------------------------------

SHIFT_X = torch.tensor([5, -5, 1, -1, 0, 2**62, I64_MIN, 123456789])
SHIFT_S = torch.tensor([-100, -1, 0, 1, 3, 62, 63, 64, 65])


@pytest.mark.parametrize("op", [torch.bitwise_left_shift, torch.bitwise_right_shift])
def test_shift_counts_int64(op):
    # Every value against every count, including negative and >= 64 counts.
    check(op, SHIFT_X[:, None], SHIFT_S[None, :])


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8, torch.uint8, torch.int16])
@pytest.mark.parametrize("op", [torch.bitwise_left_shift, torch.bitwise_right_shift])
def test_shift_small_dtypes(op, dtype):
    x = torch.tensor([5, 100, 1, 0, 127], dtype=dtype)
    if dtype != torch.uint8:
        x = torch.cat([x, torch.tensor([-5, -128], dtype=dtype)])
    s = torch.tensor([-1, 0, 1, 7, 8, 15, 16, 31, 32, 33]).to(dtype)  # -1 wraps to 255 for uint8
    check(op, x[:, None], s[None, :])


def test_shift_operators_and_scalars():
    x = torch.tensor([[3, -7, 12], [1, 0, -1]])
    check(lambda a: a << 2, x)
    check(lambda a: a >> 1, x)
    check(lambda a, b: a << b, x, torch.tensor([1, 2, 70]))
    check(lambda a, b: a >> b, x, torch.tensor([1, -2, 70]))
    check(lambda a: torch.bitwise_left_shift(a, 3), x)
    check(lambda a: torch.bitwise_right_shift(a, 65), x)
    check(lambda a: torch.bitwise_left_shift(5, a.abs()), x)
    check(lambda a: a.bool() << 1, x)  # bool tensor with an int scalar promotes to int64
    # Mixed dtypes promote like CPU.
    check(lambda a, b: a >> b, x, torch.tensor([1, 2, 3], dtype=torch.int8))


def test_shift_views_out_inplace():
    base = torch.arange(-20, 20).reshape(5, 8)
    cnt = torch.arange(0, 40).reshape(8, 5) % 9
    check(lambda a, b: torch.bitwise_left_shift(a[:, ::2], b.t()[:, 1::2]), base, cnt)
    check(lambda a, b: torch.bitwise_right_shift(a[1:], b.t()[1:]), base, cnt)

    def out_view(a, b):
        big = torch.full((6, 8), 7, dtype=a.dtype, device=a.device)
        torch.bitwise_left_shift(a, b.t(), out=big[1:])
        return big
    check(out_view, base, cnt)

    def inplace(a, b):
        a = a.clone()
        a.bitwise_right_shift_(b.t())
        a <<= 1
        a >>= torch.tensor([1], device=a.device)
        a.bitwise_left_shift_(2)
        return a
    check(inplace, base, cnt)


def test_shift_bad_dtypes():
    for a, b in [(torch.tensor([1.0]), torch.tensor([1])), (torch.tensor([True]), torch.tensor([True])),
                 (torch.tensor([1]), torch.tensor([1.5]))]:
        for op in [torch.bitwise_left_shift, torch.bitwise_right_shift]:
            with pytest.raises(NotImplementedError):
                op(a, b)
            with pytest.raises(NotImplementedError):
                op(a.to(TPU), b.to(TPU))
    with pytest.raises(NotImplementedError):
        torch.tensor([1.0], device=TPU) << 1
    with pytest.raises(RuntimeError):  # in place, self can't broadcast
        torch.tensor([1], device=TPU).bitwise_left_shift_(torch.tensor([1, 2], device=TPU))
    with pytest.raises(RuntimeError):  # an int64 result cannot go into a bool out= (CPU: same)
        torch.bitwise_left_shift(torch.tensor([1], device=TPU), 1, out=torch.empty(1, dtype=torch.bool, device=TPU))


# --- gcd / lcm --------------------------------------------------------------------------

GCD_A = torch.tensor([0, 0, 6, -6, 6, -6, 4, 2**62, I64_MIN, I64_MIN, 7, 1071, 2**40 * 3, -17])
GCD_B = torch.tensor([0, 5, 4, 4, -4, -4, 0, 3, 0, I64_MIN, I64_MIN, 462, 2**35 * 9, 289])


@pytest.mark.parametrize("op", [torch.gcd, torch.lcm])
def test_gcd_lcm_values(op):
    check(op, GCD_A, GCD_B)
    g = torch.Generator().manual_seed(0)
    a = torch.randint(-1000, 1000, (6, 7), generator=g)
    b = torch.randint(-1000, 1000, (7,), generator=g)
    check(op, a, b)  # broadcasting
    check(op, a.t(), b[:, None])
    check(op, torch.tensor(12), torch.tensor(18))  # 0-dim
    check(op, torch.empty(0, 3, dtype=torch.int64), torch.ones(3, dtype=torch.int64))
    check(op, a.to(torch.int32)[1:, ::2], b.to(torch.int16)[::2])


@pytest.mark.parametrize("name", ["gcd", "lcm"])
def test_gcd_lcm_out_inplace(name):
    op = getattr(torch, name)
    a = torch.arange(-12, 12).reshape(4, 6)
    b = torch.tensor([4, 6, 9, 0, -8, 15])

    def out_view(x, y):
        big = torch.full((5, 6), 3, dtype=x.dtype, device=x.device)
        op(x, y, out=big[1:])
        return big
    check(out_view, a, b)

    def inplace(x, y):
        x = x.clone()
        getattr(x, name + "_")(y)
        return x
    check(inplace, a, b)


@pytest.mark.parametrize("op", [torch.gcd, torch.lcm])
def test_gcd_lcm_bad_dtypes(op):
    for a, b in [(torch.tensor([4.0]), torch.tensor([6.0])), (torch.tensor([True]), torch.tensor([False])),
                 (torch.tensor([4]), torch.tensor([6.0]))]:
        with pytest.raises(NotImplementedError):
            op(a, b)
        with pytest.raises(NotImplementedError):
            op(a.to(TPU), b.to(TPU))
