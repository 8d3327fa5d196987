"""searchsorted / bucketize vs CPU (csrc/ops/set/bucketize.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check

# --- searchsorted / bucketize --------------------------------------------------------


def test_searchsorted():
    seq = torch.tensor([1.0, 2.0, 2.0, 3.0, 5.0, float("nan")])
    v = torch.tensor([[0.0, 2.0, 2.5], [5.0, 6.0, float("nan")]])
    for right in [False, True]:
        check(lambda s, v: torch.searchsorted(s, v, right=right), seq, v)
        check(lambda s, v: torch.searchsorted(s, v, side="right" if right else "left", out_int32=True), seq, v.t())
    nd = torch.sort(torch.randn(2, 3, 7), dim=-1).values
    vals = torch.randn(2, 3, 4)
    check(lambda s, v: torch.searchsorted(s, v), nd, vals)
    check(lambda s, v: torch.searchsorted(s, v, right=True), nd, vals[..., ::2])
    unsorted = torch.tensor([3.0, 1.0, 2.0, 5.0])
    sorter = torch.argsort(unsorted)
    check(lambda s, v, so: torch.searchsorted(s, v, sorter=so), unsorted, torch.tensor([0.5, 2.0, 4.0, 9.0]), sorter)
    check(lambda s: torch.searchsorted(s, 2.0), seq[:5])
    check(lambda s, v: torch.searchsorted(s, v), torch.tensor([1, 3, 5, 7]), torch.tensor([[0, 3], [6, 9]]))


def test_bucketize_and_out():
    b = torch.tensor([1, 3, 5, 7, 9])
    x = torch.tensor([[3, 6, 9], [3, 6, 9]])
    check(lambda x, b: torch.bucketize(x, b), x, b)
    check(lambda x, b: torch.bucketize(x, b, right=True, out_int32=True), x, b)
    out = torch.empty(2, 3, dtype=torch.long, device=TPU)
    torch.bucketize(x.to(TPU), b.to(TPU), out=out)
    assert torch.equal(out.cpu(), torch.bucketize(x, b))


def test_searchsorted_errors():
    s = torch.tensor([1.0, 2.0], device=TPU)
    with pytest.raises(RuntimeError):
        torch.searchsorted(torch.ones(2, 3, device=TPU), torch.ones(3, 3, device=TPU))
    with pytest.raises(RuntimeError):
        torch.searchsorted(s, torch.ones(2, device=TPU), side="middle")
    with pytest.raises(RuntimeError):
        torch.searchsorted(s, torch.ones(2, device=TPU), sorter=torch.zeros(2, dtype=torch.int32, device=TPU))
    with pytest.raises(RuntimeError):
        torch.bucketize(torch.ones(2, device=TPU), torch.ones(2, 2, device=TPU))


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("out_int32", [False, True])
def test_out_forms_follow_cpu(out_int32):
    # searchsorted (tensor and number) and bucketize, functional and out=,
    # from one declaration each (ops/variants.h): out= is resized; a tensor
    # search refuses an out of another index dtype, as CPU does.
    seq = torch.tensor([1.0, 3.0, 5.0, 7.0])
    x = torch.tensor([[0.0, 3.0, 6.0], [8.0, 5.0, 1.0]])
    idx = torch.int32 if out_int32 else torch.int64
    for shape in [(2, 3), (1,), (0,)]:
        check(lambda s, t, o: (torch.searchsorted(s, t, right=True, out_int32=out_int32, out=o), o)[1], seq, x,
              torch.empty(shape, dtype=idx))
        check(lambda t, s, o: (torch.bucketize(t, s, out_int32=out_int32, out=o), o)[1], x, seq,
              torch.empty(shape, dtype=idx))
    check(lambda s: torch.searchsorted(s, 4.0, out_int32=out_int32), seq)
    check(lambda s, o: (torch.searchsorted(s, 4.0, out_int32=out_int32, out=o), o)[1], seq, torch.empty(3, dtype=idx))
    check(lambda s: torch.bucketize(6.0, s, out_int32=out_int32), seq)
    wrong = torch.empty(0, dtype=torch.int64 if out_int32 else torch.int32)
    both_raise(RuntimeError, lambda s, t, o: torch.searchsorted(s, t, out_int32=out_int32, out=o), seq, x, wrong)
    both_raise(RuntimeError, lambda t, s, o: torch.bucketize(t, s, out_int32=out_int32, out=o), x, seq, wrong)
