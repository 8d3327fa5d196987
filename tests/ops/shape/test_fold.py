"""F.unfold / F.fold (im2col / col2im) vs CPU (csrc/ops/shape/fold.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, check


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
