"""grid_sample (2-d and 3-d, every mode and padding mode) vs CPU
(csrc/ops/nn/grid_sample.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import both_raise, check

# --- grid_sample ------------------------------------------------------------------------------

GRID_2D = [("bilinear", "zeros", False), ("bilinear", "border", True), ("bilinear", "reflection", False),
           ("bilinear", "reflection", True), ("nearest", "zeros", True), ("nearest", "reflection", False),
           ("bicubic", "zeros", False), ("bicubic", "border", True), ("bicubic", "reflection", False),
           ("bicubic", "reflection", True)]


@pytest.mark.parametrize("mode,padding,align", GRID_2D)
def test_grid_sample_2d(mode, padding, align):
    x = torch.randn(2, 3, 5, 4)
    g = torch.rand(2, 3, 6, 2) * 2.6 - 1.3
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align), x, g, grad=True)


def test_grid_sample_2d_bf16_nearest():
    # Only nearest in bf16: CPU computes bf16 grid coordinates in bf16, so
    # interpolation weights differ from ours (f32) by more than bf16 tolerance.
    x = torch.randn(2, 3, 5, 4, dtype=torch.bfloat16)
    g = torch.rand(2, 3, 6, 2, dtype=torch.bfloat16) * 2.6 - 1.3
    check(lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=False), x, g,
          grad=True)


@pytest.mark.parametrize("mode,padding,align", [("bilinear", "zeros", False), ("bilinear", "reflection", True),
                                                ("nearest", "border", False)])
def test_grid_sample_3d(mode, padding, align):
    x = torch.randn(1, 2, 3, 4, 5)
    g = torch.rand(1, 2, 3, 2, 3) * 2.6 - 1.3
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align), x, g, grad=True)


def test_grid_sample_errors():
    both_raise(RuntimeError, lambda x, g: F.grid_sample(x, g, align_corners=False), torch.randn(1, 1, 3, 3),
               torch.randn(2, 2, 2, 2))
    both_raise(RuntimeError, lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False),
               torch.randn(1, 1, 3, 3, 3), torch.randn(1, 2, 2, 2, 3))
