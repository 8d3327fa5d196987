"""Antialiased interpolation (bilinear/bicubic) vs CPU (csrc/ops/nn/upsample_aa.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import check

# --- antialiased interpolate ---------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(3, 5), (9, 4)])
def test_interpolate_antialias(mode, align, size):
    x = torch.randn(2, 3, 6, 8)
    check(lambda x: F.interpolate(x, size=size, mode=mode, align_corners=align, antialias=True), x, grad=True)
    check(lambda x: F.interpolate(x.transpose(2, 3), scale_factor=0.6, mode=mode, antialias=True), x, grad=True)
