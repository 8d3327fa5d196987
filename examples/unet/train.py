"""A small DDPM denoising diffusion model on generated images of shapes.

A UNet (two resolution levels, residual conv blocks with GroupNorm and SiLU,
a sinusoidal timestep embedding added in every block, skip connections from
the down path to the up path) learns to predict the noise that was added to
an image of filled squares and discs (the standard DDPM objective: pick a
random timestep, noise the image along a cosine or linear beta schedule,
regress the noise with MSE). It then samples a grid of new images by running
the reverse process from pure noise and saves it as unet_samples.png next to
the loss curve.

    python examples/unet/train.py [--steps 300] [--batch-size 32] [--size 16|32]
                                  [--schedule cosine|linear] [--sample-steps 100]
"""
from __future__ import annotations

import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _shared import harness  # noqa: E402

# ---------------------------------------------------------------- data

def make_shapes(n, size, g):
    """n single-channel images in {-1, 1}: one filled square or disc each, at a
    random position and size. Built on the CPU from a generator, so tpu and
    cpu runs see the same batches."""
    coords = torch.arange(size, dtype=torch.float32) + 0.5
    yy, xx = coords.view(1, size, 1), coords.view(1, 1, size)
    radius = size * (0.15 + 0.2 * torch.rand(n, 1, 1, generator=g))
    # Keep the whole shape inside the frame.
    cx = radius + (size - 2 * radius) * torch.rand(n, 1, 1, generator=g)
    cy = radius + (size - 2 * radius) * torch.rand(n, 1, 1, generator=g)
    is_disc = torch.rand(n, 1, 1, generator=g) < 0.5
    disc = (xx - cx) ** 2 + (yy - cy) ** 2 <= radius ** 2
    square = torch.maximum((xx - cx).abs(), (yy - cy).abs()) <= radius
    inside = torch.where(is_disc, disc, square)
    return (inside.float() * 2 - 1).unsqueeze(1)


# ---------------------------------------------------------------- noise schedule

def make_schedule(kind, T):
    """alpha_bar[t] = prod_{s<=t} (1 - beta_s) for t = 0..T-1, in float64 on
    the CPU (the per-step coefficients are gathered there, then sent)."""
    if kind == "linear":
        # Ho et al. use 1e-4..0.02 for T=1000; scale by 1000/T so that a short
        # chain still ends in (nearly) pure noise.
        scale = 1000 / T
        betas = torch.linspace(scale * 1e-4, scale * 0.02, T, dtype=torch.float64)
    else:
        # Nichol & Dhariwal: alpha_bar follows a squared cosine, which destroys
        # small images less abruptly in the early steps than the linear one.
        s = 0.008
        f = torch.cos((torch.arange(T + 1, dtype=torch.float64) / T + s) / (1 + s) * math.pi / 2) ** 2
        betas = (1 - f[1:] / f[:-1]).clamp(max=0.999)
    return torch.cumprod(1 - betas, dim=0)


# ---------------------------------------------------------------- model

def timestep_embedding(t, dim):
    """Sinusoidal embedding of the (float) timesteps, as in the Transformer."""
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device, dtype=torch.float32) / half)
    args = t.float()[:, None] * freqs[None, :]
    return torch.cat([torch.sin(args), torch.cos(args)], dim=1)


class ResBlock(nn.Module):
    """GroupNorm-SiLU-conv twice, with the timestep embedding added in between
    and a 1x1 conv on the residual path when the width changes."""

    def __init__(self, c_in, c_out, emb_dim, groups=8):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, c_in)
        self.conv1 = nn.Conv2d(c_in, c_out, 3, padding=1)
        self.emb = nn.Linear(emb_dim, c_out)
        self.norm2 = nn.GroupNorm(groups, c_out)
        self.conv2 = nn.Conv2d(c_out, c_out, 3, padding=1)
        self.skip = nn.Conv2d(c_in, c_out, 1) if c_in != c_out else nn.Identity()

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.emb(emb)[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return h + self.skip(x)


class UNet(nn.Module):
    """Two levels: full resolution with `ch` channels, half resolution with
    2*ch, and a middle at quarter resolution; the up path concatenates the
    down path's activations of the same resolution."""

    def __init__(self, ch=32, emb_dim=128):
        super().__init__()
        self.ch = ch
        self.time_mlp = nn.Sequential(nn.Linear(ch, emb_dim), nn.SiLU(), nn.Linear(emb_dim, emb_dim))
        self.inp = nn.Conv2d(1, ch, 3, padding=1)
        self.down0 = ResBlock(ch, ch, emb_dim)
        self.pool0 = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.down1 = ResBlock(ch, 2 * ch, emb_dim)
        self.pool1 = nn.Conv2d(2 * ch, 2 * ch, 3, stride=2, padding=1)
        self.mid0 = ResBlock(2 * ch, 2 * ch, emb_dim)
        self.mid1 = ResBlock(2 * ch, 2 * ch, emb_dim)
        self.up1 = ResBlock(4 * ch, 2 * ch, emb_dim)
        self.up0 = ResBlock(3 * ch, ch, emb_dim)
        self.unpool1 = nn.Conv2d(2 * ch, 2 * ch, 3, padding=1)
        self.unpool0 = nn.Conv2d(2 * ch, 2 * ch, 3, padding=1)
        self.out_norm = nn.GroupNorm(8, ch)
        self.out = nn.Conv2d(ch, 1, 3, padding=1)
        # Start as a zero predictor, so the first loss is ~1 (the noise variance).
        nn.init.zeros_(self.out.weight)
        nn.init.zeros_(self.out.bias)

    def forward(self, x, t):
        emb = self.time_mlp(timestep_embedding(t, self.ch))
        h = self.inp(x)
        s0 = self.down0(h, emb)                          # size
        s1 = self.down1(self.pool0(s0), emb)             # size / 2
        h = self.mid1(self.mid0(self.pool1(s1), emb), emb)  # size / 4
        h = self.unpool1(F.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.up1(torch.cat([h, s1], dim=1), emb)
        h = self.unpool0(F.interpolate(h, scale_factor=2, mode="nearest"))
        h = self.up0(torch.cat([h, s0], dim=1), emb)
        return self.out(F.silu(self.out_norm(h)))


# ---------------------------------------------------------------- training and sampling

def noised_batch(batch, size, alpha_bar, g):
    """x0, the timesteps, the noised images and the noise, all on the CPU."""
    x0 = make_shapes(batch, size, g)
    t = torch.randint(0, len(alpha_bar), (batch,), generator=g)
    noise = torch.randn(x0.shape, generator=g)
    ab = alpha_bar[t].float().view(-1, 1, 1, 1)
    xt = ab.sqrt() * x0 + (1 - ab).sqrt() * noise
    return t, xt, noise


@torch.no_grad()
def sample(model, n, size, alpha_bar, steps, device, g):
    """Ancestral DDPM sampling over `steps` evenly spaced timesteps of the
    training chain (with steps == T it is plain DDPM). Between two kept
    timesteps t > s the step uses beta = 1 - alpha_bar[t] / alpha_bar[s], the
    respacing of Nichol & Dhariwal, so fewer steps stay a valid chain."""
    T = len(alpha_bar)
    ts = torch.linspace(T - 1, 0, steps).round().long().unique_consecutive().tolist()
    x = torch.randn(n, 1, size, size, generator=g).to(device)
    for i, t in enumerate(ts):
        ab_t = alpha_bar[t].item()
        ab_s = alpha_bar[ts[i + 1]].item() if i + 1 < len(ts) else 1.0
        beta = 1 - ab_t / ab_s
        eps = model(x, torch.full((n,), t, device=device))
        # Predict the clean image, keep it in the data range, then take the
        # posterior mean of q(x_s | x_t, x0).
        x0 = ((x - math.sqrt(1 - ab_t) * eps) / math.sqrt(ab_t)).clamp(-1, 1)
        mean = (math.sqrt(ab_s) * beta / (1 - ab_t)) * x0 + (math.sqrt(1 - beta) * (1 - ab_s) / (1 - ab_t)) * x
        if i + 1 < len(ts):
            var = beta * (1 - ab_s) / (1 - ab_t)
            x = mean + math.sqrt(var) * torch.randn(x.shape, generator=g).to(device)
        else:
            x = mean
    return x.clamp(-1, 1).cpu()


def binary_share(images, tol=0.2):
    """Share of pixels within `tol` of -1 or +1: the data is exactly binary,
    noise left in the samples is not."""
    return ((images.abs() - 1).abs() < tol).float().mean().item()


def neighbour_corr(images):
    """Correlation of each pixel with its right-hand neighbour, over the batch:
    ~0.9 for the filled shapes, ~0 for noise."""
    a, b = images[..., :, :-1].flatten(), images[..., :, 1:].flatten()
    return torch.corrcoef(torch.stack([a, b]))[0, 1].item()


def save_grid(images, path):
    """The samples as a grid of grey images (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    n = len(images)
    cols = math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(1.2 * cols, 1.2 * rows), squeeze=False)
    for i, ax in enumerate(axes.flat):
        if i < n:
            ax.imshow(images[i, 0].numpy(), cmap="gray", vmin=-1, vmax=1)
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def parse(argv=None):
    def extra(ap):
        ap.add_argument("--size", type=int, default=16, choices=[16, 32], help="image side in pixels")
        ap.add_argument("--channels", type=int, default=16, help="UNet width at full resolution")
        ap.add_argument("--schedule", default="cosine", choices=["cosine", "linear"], help="beta schedule")
        ap.add_argument("--timesteps", type=int, default=100, help="T, the length of the diffusion chain")
        ap.add_argument("--sample-steps", type=int, default=None,
                        help="reverse steps when sampling (default: T; --smoke: 5)")
        ap.add_argument("--samples", type=int, default=None, help="images to sample (default 16; --smoke: 4)")
        ap.add_argument("--lr", type=float, default=2e-3)

    return harness.parse_args(__doc__, steps=300, batch_size=32, extra=extra, argv=argv)


def build(args, device, capturable=False):
    """The UNet on `device`, its AdamW (capturable: step counters on the
    device, as torch.tpu.graph capture needs) and its loss_of(t, xt, noise):
    the noise-prediction MSE."""
    model = UNet(args.channels).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.0, capturable=capturable)
    return model, opt, lambda t, xt, noise: F.mse_loss(model(xt, t), noise)


def bench_setup(device, batch_size, capturable=False):
    """(step, images per step, "images") for python -m torch_tpu.bench:
    step() trains this example's model on one fixed batch of noised shapes."""
    args = parse(harness.bench_argv(device, batch_size))
    alpha_bar = make_schedule(args.schedule, args.timesteps)
    _, opt, loss_of = build(args, device, capturable)
    data = noised_batch(batch_size, args.size, alpha_bar, torch.Generator().manual_seed(args.seed))
    return harness.fixed_batch_step(opt, loss_of, *(v.to(device) for v in data)), batch_size, "images"


def main():
    args = parse()
    device = harness.setup(args)
    n_samples = args.samples or (4 if args.smoke else 16)
    sample_steps = args.sample_steps or (5 if args.smoke else args.timesteps)

    alpha_bar = make_schedule(args.schedule, args.timesteps)
    model, opt, loss_of = build(args, device)
    g = torch.Generator().manual_seed(args.seed)

    step_fn = harness.compiled(harness.optimizer_step(opt, loss_of), args)
    params = sum(p.numel() for p in model.parameters())
    print(f"UNet with {params / 1e6:.2f}M parameters on {args.size}x{args.size} shapes, "
          f"T={args.timesteps} ({args.schedule} schedule), {args.device} / {args.mode}")

    progress = harness.Progress(args.steps, "images", every=10)
    for step in progress:
        t, xt, noise = (v.to(device) for v in noised_batch(args.batch_size, args.size, alpha_bar, g))
        loss = step_fn(t, xt, noise)
        progress.update(step, loss, args.batch_size)
    harness.sync(device)

    model.eval()
    images = sample(model, n_samples, args.size, alpha_bar, sample_steps, device, g)
    curve = harness.curve_path(args, __file__, "unet")
    harness.save_curve(progress, curve, "UNet DDPM noise-prediction MSE")
    samples_path = os.path.join(os.path.dirname(curve), "unet_samples.png")
    save_grid(images, samples_path)

    first, last = progress.losses[0][1], progress.losses[-1][1]
    data = make_shapes(256, args.size, torch.Generator().manual_seed(args.seed + 1))
    corr, data_corr = neighbour_corr(images), neighbour_corr(data)
    print(f"{progress.rate():.0f} images/s after a first step of {progress.first_step_s:.1f}s")
    print(f"samples: neighbour-pixel correlation {corr:.2f} (data {data_corr:.2f}, noise ~0); "
          f"near-binary pixels {binary_share(images):.0%} (data {binary_share(data):.0%})")
    print(f"sampled {n_samples} images to {samples_path}; final loss {last:.4f} (first {first:.4f})")

    if not args.smoke:
        if last >= 0.5 * first:
            raise SystemExit(f"quality check failed: final loss {last:.4f} is not below half the first {first:.4f}")
        # Filled shapes make neighbouring pixels agree (~0.8); the samples of an
        # untrained model are clamped noise with a correlation of ~0.
        if corr < 0.5:
            raise SystemExit(f"quality check failed: the samples' neighbour-pixel correlation {corr:.2f} is below 0.5 "
                             f"(data {data_corr:.2f}): they are still noise, not shapes")


if __name__ == "__main__":
    main()
