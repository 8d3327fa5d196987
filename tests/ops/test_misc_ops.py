"""embedding_bag, searchsorted/bucketize, unique, bincount, histc, multinomial,
one_hot, einsum, unfold/fold, pixel_shuffle and cumsum vs CPU."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, check

# --- embedding_bag -------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_offsets(mode):
    w = torch.randn(10, 3)
    idx = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9, 0])
    off = torch.tensor([0, 3, 3, 7])  # one empty bag
    check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode), w, idx, off, grad=True)
    check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, include_last_offset=True), w, idx,
          torch.tensor([0, 2, 5, 9]), grad=True)
    check(lambda w, i, o: F.embedding_bag(i, w, o, mode=mode, padding_idx=4), w, idx, off, grad=True)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
def test_embedding_bag_2d_and_bf16(mode):
    w = torch.randn(7, 4)
    idx = torch.tensor([[0, 2, 6], [3, 3, 1]])
    check(lambda w, i: F.embedding_bag(i, w, mode=mode), w, idx, grad=True)
    check(lambda w, i: F.embedding_bag(i, w, mode=mode), w.bfloat16(), idx.int())
    # non-contiguous weight
    w2 = torch.randn(4, 7).t()
    check(lambda w, i: F.embedding_bag(i, w, mode=mode), w2, idx, grad=True)


def test_embedding_bag_per_sample_weights_and_freq():
    w = torch.randn(8, 3)
    idx = torch.tensor([1, 1, 4, 5, 7, 1])
    off = torch.tensor([0, 2, 4])
    psw = torch.rand(6)
    check(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p), w, idx, off, psw,
          grad=True)
    check(lambda w, i, o, p: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=p, padding_idx=1), w, idx,
          off, psw, grad=True)


def test_embedding_bag_errors():
    w = torch.randn(5, 2, device=TPU)
    with pytest.raises(RuntimeError):
        F.embedding_bag(torch.tensor([0.0, 1.0], device=TPU), w, torch.tensor([0], device=TPU))
    with pytest.raises(NotImplementedError):
        F.embedding_bag(torch.tensor([0, 1], device=TPU), w, torch.tensor([0], device=TPU), mode="max",
                        per_sample_weights=torch.ones(2, device=TPU))


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


# --- unique ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique(dtype):
    x = torch.tensor([[3, 1, 2, 3], [1, 0, 0, 7]]).to(dtype)
    for inv in [False, True]:
        for cnt in [False, True]:
            check(lambda x: torch.unique(x, return_inverse=inv, return_counts=cnt), x)
            check(lambda x: torch.unique_consecutive(x, return_inverse=inv, return_counts=cnt), x)
    check(lambda x: torch.unique(x), x.t())
    check(lambda x: torch.unique(x, sorted=True, return_inverse=True), x[:, 1:])


def test_unique_empty_and_bf16():
    check(lambda x: torch.unique(x, return_inverse=True, return_counts=True), torch.empty(0))
    check(lambda x: torch.unique(x, return_counts=True), torch.tensor([1.5, -0.5, 1.5, 2.0]).bfloat16())
    check(lambda x: torch.unique_consecutive(x, return_counts=True, dim=0), torch.tensor([1, 1, 2, 2, 2, 1]))


# --- bincount / histc ------------------------------------------------------------------


def test_bincount():
    x = torch.tensor([0, 1, 1, 3, 2, 1, 7])
    check(torch.bincount, x)
    check(lambda x: torch.bincount(x, minlength=10), x)
    check(lambda x, w: torch.bincount(x, w), x, torch.rand(7))
    check(lambda x, w: torch.bincount(x, w), x.int(), torch.rand(7, dtype=torch.float64))
    check(lambda x, w: torch.bincount(x, w, minlength=3), x[::2], torch.rand(7)[::2])
    check(lambda x: torch.bincount(x, minlength=4), torch.empty(0, dtype=torch.long))
    for bad in [torch.tensor([-1, 2]), torch.tensor([[1, 2]])]:
        with pytest.raises(RuntimeError):
            torch.bincount(bad.to(TPU))
    with pytest.raises(RuntimeError):
        torch.bincount(torch.tensor([1, 2], device=TPU), minlength=-1)


def test_histc():
    x = torch.randn(100)
    check(lambda x: torch.histc(x, bins=10, min=-2, max=2), x)
    check(lambda x: torch.histc(x, bins=7), x)  # data range
    check(lambda x: torch.histc(x, bins=4, min=0, max=4), torch.tensor([0.0, 1.0, 1.0, 2.0, 4.0, 5.0, -1.0]))
    check(lambda x: torch.histc(x, bins=3), torch.ones(4))
    check(lambda x: torch.histc(x, bins=5, min=-1, max=1), x.reshape(10, 10)[:, ::2].double())
    with pytest.raises(RuntimeError):
        torch.histc(x.to(TPU), bins=0)
    with pytest.raises(RuntimeError):
        torch.histc(x.to(TPU), min=2, max=1)


# --- multinomial ----------------------------------------------------------------------


def test_multinomial_with_replacement():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]], device=TPU)
    torch.manual_seed(1)
    s = torch.multinomial(p, 4000, replacement=True)
    torch.manual_seed(1)
    s2 = torch.multinomial(p, 4000, replacement=True)
    assert torch.equal(s.cpu(), s2.cpu())
    assert s.shape == (2, 4000) and s.dtype == torch.long
    s = s.cpu()
    for r in range(2):
        freq = torch.bincount(s[r], minlength=4).double() / 4000
        expect = (p[r] / p[r].sum()).cpu().double()
        assert (freq - expect).abs().max() < 0.03
        assert freq[p[r].cpu() == 0].sum() == 0


def test_multinomial_without_replacement():
    p = torch.tensor([0.5, 0.0, 0.2, 0.3], device=TPU)
    s = torch.multinomial(p, 3)
    assert sorted(s.cpu().tolist()) == [0, 2, 3]  # all non-zero categories, each once
    torch.manual_seed(3)
    firsts = torch.multinomial(p.expand(3000, 4), 1).cpu().flatten()
    freq = torch.bincount(firsts, minlength=4).double() / 3000
    assert (freq - torch.tensor([0.5, 0.0, 0.2, 0.3], dtype=torch.double)).abs().max() < 0.03
    rows = torch.multinomial(torch.ones(5, 6, device=TPU), 6).cpu()
    assert all(sorted(r.tolist()) == list(range(6)) for r in rows)


def test_multinomial_errors():
    p = torch.ones(3, device=TPU)
    with pytest.raises(RuntimeError):
        torch.multinomial(p, 4)
    with pytest.raises(RuntimeError):
        torch.multinomial(p, 0)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.ones(2, 2, 2, device=TPU), 1)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.ones(3, dtype=torch.long, device=TPU), 1)


# --- composites: one_hot, einsum, unfold/fold, pixel_shuffle, cumsum -------------------


def test_one_hot():
    x = torch.tensor([[0, 3], [2, 1]])
    check(F.one_hot, x)
    check(lambda x: F.one_hot(x, 6), x.t())
    with pytest.raises(RuntimeError):
        F.one_hot(torch.tensor([0.0, 1.0], device=TPU))


def test_einsum():
    a, b = torch.randn(2, 3, 4), torch.randn(2, 4, 5)
    check(lambda a, b: torch.einsum("bij,bjk->bik", a, b), a, b, grad=True, atol=1e-5, rtol=1e-5)
    check(lambda a: torch.einsum("ii->i", a), torch.randn(4, 4), grad=True)
    check(lambda a: torch.einsum("bij->jb", a), a, grad=True, atol=1e-5, rtol=1e-5)
    check(lambda a, b: torch.einsum("i,j->ij", a, b), torch.randn(3), torch.randn(4)[::2], grad=True)
    check(lambda a, b, c: torch.einsum("ab,bc,cd->ad", a, b, c), torch.randn(2, 3), torch.randn(3, 4),
          torch.randn(4, 2), grad=True, atol=1e-5, rtol=1e-5)
    check(lambda a, b: torch.einsum("bij,bjk->bik", a, b), a.bfloat16(), b.bfloat16())
    with pytest.raises(RuntimeError):
        torch.einsum("ij,jk->ik", torch.randn(2, 3, device=TPU), torch.randn(4, 2, device=TPU))


@pytest.mark.parametrize("cfg", [dict(kernel_size=2), dict(kernel_size=(2, 3), stride=2, padding=1, dilation=(1, 2))])
def test_unfold_fold(cfg):
    x = torch.randn(2, 3, 6, 7)
    check(lambda x: F.unfold(x, **cfg), x, grad=True)
    check(lambda x: F.unfold(x, **cfg), x[:, :, 1:, ::1].transpose(2, 3).contiguous().transpose(2, 3), grad=True)
    cols = F.unfold(x, **cfg)
    check(lambda c: F.fold(c, (6, 7), **cfg), cols, grad=True, atol=1e-5, rtol=1e-5)
    check(lambda c: F.fold(c, (6, 7), **cfg), cols[0], grad=True, atol=1e-5, rtol=1e-5)  # unbatched
    check(lambda x: F.unfold(x, **cfg), x.bfloat16())


def test_unfold_fold_errors():
    with pytest.raises(RuntimeError):
        F.unfold(torch.randn(1, 1, 2, 2, device=TPU), kernel_size=3)
    with pytest.raises(RuntimeError):
        F.fold(torch.randn(1, 5, 4, device=TPU), (3, 3), kernel_size=2)
    with pytest.raises(RuntimeError):
        F.fold(torch.randn(1, 4, 5, device=TPU), (3, 3), kernel_size=2)


def test_pixel_shuffle():
    x = torch.randn(2, 8, 3, 3)
    check(lambda x: F.pixel_shuffle(x, 2), x, grad=True)
    check(lambda x: F.pixel_unshuffle(x, 3), torch.randn(1, 2, 6, 9), grad=True)
    check(lambda x: F.pixel_shuffle(x, 2), x.transpose(2, 3).bfloat16())
    with pytest.raises(RuntimeError):
        F.pixel_shuffle(torch.randn(1, 3, 2, 2, device=TPU), 2)


@pytest.mark.parametrize("dim", [0, 1, 2, -1])
def test_cumsum_axes(dim):
    x = torch.randn(3, 4, 5)
    check(lambda x: torch.cumsum(x, dim), x, grad=True, atol=1e-5, rtol=1e-5)
    check(lambda x: torch.cumsum(x, dim), x.transpose(0, 2).contiguous().transpose(0, 2)[1:], grad=True,
          atol=1e-5, rtol=1e-5)
    check(lambda x: torch.cumsum(x, dim), torch.randint(-5, 5, (3, 4, 5)))
