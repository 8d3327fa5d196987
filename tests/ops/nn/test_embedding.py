"""embedding and embedding_bag (forward and backward) vs CPU
(csrc/ops/nn/embedding.cc; embedding's own kernels are indexing's)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, check


def needs(*ops):
    """Skips until kernels owned by other op families are registered."""
    missing = [o for o in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{o}", "PrivateUse1")]
    return pytest.mark.skipif(bool(missing), reason=f"tpu kernels missing: {missing}")


# --- embedding (index_select / embedding_dense_backward owned by indexing) -----------

@needs("index_select", "embedding_dense_backward")
def test_embedding():
    w = torch.randn(10, 4)
    idx = torch.tensor([[1, 2, 2], [0, 9, 1]])
    check(lambda w: F.embedding(idx.to(w.device), w), w, grad=True)
    check(lambda w: F.embedding(idx.to(w.device), w, padding_idx=2), w, grad=True)
    check(lambda w: F.embedding(idx.to(w.device), w, scale_grad_by_freq=True), w, grad=True)


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
