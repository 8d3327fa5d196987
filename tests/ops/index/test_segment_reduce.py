"""segment_reduce (+ backward) vs CPU (csrc/ops/index/segment_reduce.cc)."""
import pytest
import torch

from tests.helpers import both_raise, check

# --- segment_reduce ---------------------------------------------------


@pytest.mark.parametrize("reduce", ["sum", "mean", "max", "min", "prod"])
@pytest.mark.parametrize("initial", [None, 2.0])
def test_segment_reduce(reduce, initial):
    data = torch.randn(7, 3)
    data[2, 1] = data[3, 1]  # a tie for max/min
    data[5, 0] = 0.0  # a zero for prod's gradient
    # An empty segment's mean is NaN, which check() would call unequal.
    empty_ok = not (reduce == "mean" and initial is None)
    lengths = torch.tensor([2, 0, 3, 2]) if empty_ok else torch.tensor([2, 1, 2, 2])
    kw = dict(initial=initial) if initial is not None else {}
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, **kw), data, lengths, grad=True)
    offsets = torch.tensor([0, 2, 2, 5, 7]) if empty_ok else torch.tensor([0, 2, 3, 5, 7])
    check(lambda d, o: torch.segment_reduce(d, reduce, offsets=o, **kw), data, offsets, grad=True)
    # batched lengths along axis 1
    d2 = torch.randn(2, 5, 3)
    l2 = torch.tensor([[1, 4], [3, 2]])
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, axis=1, **kw), d2, l2, grad=True)
    check(lambda d, l: torch.segment_reduce(d, reduce, lengths=l, **kw), data.bfloat16(), lengths)


def test_segment_reduce_errors():
    data = torch.randn(5, 2)
    both_raise(RuntimeError, lambda d, l: torch.segment_reduce(d, "sum", lengths=l), data, torch.tensor([2, 2]))
    both_raise(RuntimeError, lambda d, l: torch.segment_reduce(d, "sum", lengths=l), data, torch.tensor([6, -1]))
    both_raise(RuntimeError, lambda d, l: torch.segment_reduce(d, "avg", lengths=l), data, torch.tensor([5]))
