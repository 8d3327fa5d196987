"""isin vs CPU (csrc/ops/set/isin.cc)."""
import pytest
import torch

from tests.helpers import TPU, check


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int32, torch.int64])
def test_isin_tensor_tensor(dtype):
    x = torch.tensor([[1, 2, 3], [4, 5, 2]], dtype=dtype)
    t = torch.tensor([2, 4, 9], dtype=dtype)
    check(torch.isin, x, t)
    check(lambda a, b: torch.isin(a, b, invert=True), x, t)
    check(torch.isin, x.t(), t[::2])          # non-contiguous
    check(torch.isin, x[1:], t.view(3, 1))     # offset view; test elements of any shape


def test_isin_promotion_nan_empty():
    check(torch.isin, torch.tensor([1, 2, 3]), torch.tensor([2.0, 3.5]))
    check(torch.isin, torch.tensor([1.0, float("nan")]), torch.tensor([float("nan"), 1.0]))
    check(torch.isin, torch.tensor([1.0, 2.0]), torch.tensor([]))
    check(lambda a, b: torch.isin(a, b, invert=True), torch.tensor([1.0, 2.0]), torch.tensor([]))
    check(torch.isin, torch.zeros(0, 3), torch.tensor([1.0]))


def test_isin_scalars():
    x = torch.tensor([1, 2, 3, 2])
    check(lambda a: torch.isin(a, 2), x)
    check(lambda a: torch.isin(a, 2.5), x)
    check(lambda a: torch.isin(a, 2, invert=True), x)
    check(lambda t: torch.isin(3, t), x)
    check(lambda t: torch.isin(7, t, invert=True), x)


def test_isin_out():
    x = torch.tensor([[1, 2], [3, 4]])
    t = torch.tensor([4, 1])
    big = torch.zeros(3, 4, dtype=torch.bool, device=TPU)
    out = big[1:3, ::2]
    torch.isin(x.to(TPU), t.to(TPU), out=out)
    assert torch.equal(out.cpu(), torch.isin(x, t))
    assert torch.equal(big.cpu()[0], torch.zeros(4, dtype=torch.bool))
    o = torch.empty(0, dtype=torch.bool, device=TPU)
    torch.isin(x.to(TPU), 3, out=o)
    assert torch.equal(o.cpu(), torch.isin(x, 3))


def test_isin_errors():
    for dev in ("cpu", TPU):
        with pytest.raises(RuntimeError, match="Unsupported input type"):
            torch.isin(torch.tensor([True], device=dev), torch.tensor([1], device=dev))
        with pytest.raises(RuntimeError, match="Unsupported input type"):
            torch.isin(torch.tensor([1], device=dev), True)
        with pytest.raises(RuntimeError, match="dtype bool"):
            torch.isin(torch.tensor([1], device=dev), torch.tensor([1], device=dev),
                       out=torch.empty(1, dtype=torch.int64, device=dev))


def test_isin_out_forms_of_every_overload():
    from tests.helpers import both_raise

    x, t = torch.tensor([[1, 2], [3, 4]]), torch.tensor([4, 1])
    for fn in (lambda a, b, o: torch.isin(a, b, out=o), lambda a, b, o: torch.isin(a, 4, out=o),
               lambda a, b, o: torch.isin(4, b, out=o)):
        check(lambda a, b, o: (fn(a, b, o), o)[1], x, t, torch.empty(0, dtype=torch.bool))
        # out= must be bool, as on CPU.
        both_raise(RuntimeError, lambda a, b: fn(a, b, torch.empty(0, device=a.device)), x, t)
