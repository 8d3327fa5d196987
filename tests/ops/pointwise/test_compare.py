"""Comparisons, where, clamp (incl. bool bounds), equal and
isneginf/isposinf on tpu vs PyTorch CPU (csrc/ops/pointwise/compare.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check
from tests.ops.pointwise._common import OTHER_FAMILIES, check_grad, check_nan, make, rnd

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


# --- clamp on bool ---------------------------------------------------------------------------

def test_clamp_bool_tensor_bound():
    x = torch.tensor([[True, False, True], [False, False, True]])
    lo = torch.tensor([False, True, False])
    check(torch.clamp_min, x, lo)
    check(torch.clamp_max, x, lo)
    check(lambda a, b: torch.clamp(a, min=b), x, lo)
    check(lambda a, b: torch.clamp(a, max=b), x, lo[:, None][:2])
    check(lambda a, b: torch.clamp_max(a.t(), b[:, None]), x, lo)

    def inplace(a, b):
        a = a.clone()
        a.clamp_min_(b)
        a.clamp_max_(b[::2][:1])
        return a
    check(inplace, x, lo)

    def out_view(a, b):
        big = torch.zeros(3, 3, dtype=torch.bool, device=a.device)
        torch.clamp_min(a, b, out=big[1:])
        return big
    check(out_view, x, lo)
    # Int scalar bounds promote to int64, as on CPU.
    check(lambda a: torch.clamp_min(a, 0), x)
    check(lambda a: torch.clamp_max(a, 0.5), x)


def test_clamp_bool_rejected_like_cpu():
    x = torch.tensor([True, False])
    t, f = torch.tensor(True), torch.tensor(False)
    cases = [lambda a: torch.clamp_min(a, True), lambda a: torch.clamp_max(a, False),
             lambda a: torch.clamp(a, False, True), lambda a: torch.clamp(a, min=False),
             lambda a: a.clone().clamp_min_(True),
             lambda a: torch.clamp(a, f.to(a.device), t.to(a.device))]
    for fn in cases:
        with pytest.raises(NotImplementedError):
            fn(x)
        with pytest.raises(NotImplementedError):
            fn(x.to(TPU))


# --- isneginf / isposinf --------------------------------------------------------------

def test_isneginf_isposinf():
    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0])
    check(torch.isneginf, x)
    check(torch.isposinf, x[::2])
    check(torch.isneginf, torch.tensor([1, -3]))


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("op", [torch.isneginf, torch.isposinf])
def test_isinf_sign_out_forms_follow_cpu(op):
    # Functional and out= from one declaration (ops/variants.h): a bool out
    # of any size is resized; CPU refuses any other out dtype and a complex input.
    x = torch.tensor([[1.0, float("inf")], [-float("inf"), float("nan")]])
    for shape in [(2, 2), (1,), (0,)]:
        check(lambda t, o: (op(t, out=o), o)[1], x, torch.empty(shape, dtype=torch.bool))
    both_raise(RuntimeError, lambda t, o: op(t, out=o), x, torch.empty(0))
    both_raise(RuntimeError, op, torch.zeros(2, dtype=torch.complex64))


def test_where_out_must_have_the_promoted_dtype():
    c = torch.tensor([True, False])
    a, b = torch.tensor([1.0, 2.0]), torch.tensor([3, 4])
    both_raise(RuntimeError, lambda c_, x, y, o: torch.where(c_, x, y, out=o), c, a, b, torch.empty(0, dtype=torch.int64))
    check(lambda c_, x, y, o: (torch.where(c_, x, y, out=o), o)[1], c, a, b, torch.empty(2))


# --- equal ----------------------------------------------------------------------------

def test_equal():
    a = rnd(3, 4)
    t = a.to(TPU)
    assert torch.equal(t, a.clone().to(TPU)) is True
    b = a.clone()
    b[1, 2] += 1
    assert torch.equal(t, b.to(TPU)) is False
    assert torch.equal(t, a[:2].to(TPU)) is False
    assert torch.equal(t.t(), a.t().contiguous().to(TPU)) is True
    n = torch.tensor([float("nan")])
    assert torch.equal(n.to(TPU), n.to(TPU)) == torch.equal(n, n)
    i = rnd(5, dtype=torch.int64)
    assert torch.equal(i.to(TPU), i.to(TPU))
    assert torch.equal(torch.empty(0, device=TPU), torch.empty(0, device=TPU))
