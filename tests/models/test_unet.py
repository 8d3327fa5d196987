"""A small UNet (3x3 convs, GroupNorm, SiLU, residual blocks; downsampling by
a stride-2 conv and by max_pool2d; upsampling by F.interpolate nearest and
bilinear; skip connections joined with torch.cat) regressing a target image
with MSE, trained 3 steps with Adam on tpu vs CPU, CPU fallback off."""
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.models._harness import compare_training


class ResBlock(nn.Module):
    def __init__(self, cin, cout, groups=4):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(groups, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    def __init__(self, c=16):
        super().__init__()
        self.conv_in = nn.Conv2d(3, c, 3, padding=1)
        self.down1 = ResBlock(c, c)
        self.downsample = nn.Conv2d(c, c, 3, stride=2, padding=1)
        self.down2 = ResBlock(c, 2 * c)
        self.mid = ResBlock(2 * c, 2 * c)
        self.up2 = ResBlock(4 * c, c)
        self.up1 = ResBlock(2 * c, c)
        self.norm_out = nn.GroupNorm(4, c)
        self.conv_out = nn.Conv2d(c, 3, 3, padding=1)

    def forward(self, x):
        h1 = self.down1(self.conv_in(x))                  # c, H
        h2 = self.down2(self.downsample(h1))              # 2c, H/2
        m = self.mid(F.max_pool2d(h2, 2))                 # 2c, H/4
        u = F.interpolate(m, scale_factor=2, mode="nearest")
        u = self.up2(torch.cat([u, h2], dim=1))           # c, H/2
        u = F.interpolate(u, size=h1.shape[-2:], mode="bilinear", align_corners=False)
        u = self.up1(torch.cat([u, h1], dim=1))           # c, H
        return self.conv_out(F.silu(self.norm_out(u)))


def test_unet_adam():
    torch.manual_seed(0)
    model = UNet()
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randn(2, 3, 16, 16, generator=g), torch.randn(2, 3, 16, 16, generator=g))
               for _ in range(3)]

    def loss_fn(m, x, y):
        return F.mse_loss(m(x), y)

    def make_opt(params):
        return torch.optim.Adam(params, lr=1e-3)

    # Tolerances: float32 convolutions and GroupNorm statistics reduce in a
    # different order than CPU (oneDNN); a few ulp per op over 13 convs.
    # Grads are O(1e-3..1e-1); atol 1e-5 / rtol 1e-4 is ~100 ulp of the
    # largest. Losses (~1.0) after Adam steps (whose first update is
    # lr * sign(g), exact unless a grad is ~0) agree to 1e-5.
    compare_training(model, make_opt, loss_fn, batches,
                     loss_tol=dict(atol=1e-5, rtol=1e-5), grad_tol=dict(atol=1e-5, rtol=1e-4))
