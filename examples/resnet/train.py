"""Image classification with torchvision's ResNet-18 on the `tpu` device, in
mixed precision.

The data is scikit-learn's handwritten digits (1797 grayscale 8x8 images,
shipped inside the package, so nothing is downloaded), upsampled and repeated
to 3 channels so that an unmodified ImageNet-style ResNet-18 (random init)
can take them. The forward pass and the loss run under
torch.autocast("tpu", dtype=torch.bfloat16); the weights, gradients and
optimizer state stay float32.

    python examples/resnet/train.py [--steps 60] [--batch-size 32] [--size 16] [--no-amp]
"""
from __future__ import annotations

import contextlib
import os
import sys
import time

import torch
import torch.nn.functional as F
import torchvision

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _shared import harness  # noqa: E402

TARGET_ACCURACY = 0.85


def extra_flags(ap):
    ap.add_argument("--size", type=int, default=16, help="side of the upsampled images (the digits are 8x8)")
    ap.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    ap.add_argument("--lr", type=float, default=None,
                    help="peak learning rate of the one-cycle schedule (default: 2e-3 for adamw, 0.05 for sgd)")
    ap.add_argument("--no-amp", dest="amp", action="store_false",
                    help="run the forward and the loss in float32 instead of under bfloat16 autocast")
    ap.add_argument("--val-fraction", type=float, default=0.2)


def load_digits(size, val_fraction, seed):
    """The digits as (N, 3, size, size) float32, normalized, split into train
    and validation by a seeded permutation."""
    from sklearn.datasets import load_digits as sk_load_digits
    digits = sk_load_digits()
    x = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0  # pixels are 0..16
    y = torch.tensor(digits.target, dtype=torch.long)
    # Upsampled once on CPU: the model sees bigger images, the loop does no resizing.
    x = F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)
    x = (x - x.mean()) / x.std()
    x = x.repeat(1, 3, 1, 1)  # ResNet's stem expects RGB
    perm = torch.randperm(len(y), generator=torch.Generator().manual_seed(seed))
    n_val = int(len(y) * val_fraction)
    val, train = perm[:n_val], perm[n_val:]
    return (x[train], y[train]), (x[val], y[val])


def batches(n, batch_size, generator):
    """Endless index batches over shuffled epochs, every batch full: one
    shape, so each op compiles once."""
    while True:
        perm = torch.randperm(n, generator=generator)
        for i in range(0, n - batch_size + 1, batch_size):
            yield perm[i:i + batch_size]


def autocast(args):
    if not args.amp:
        return contextlib.nullcontext()
    return torch.autocast(args.device, dtype=torch.bfloat16)


@torch.no_grad()
def accuracy(forward, x, y, device, args, chunk=256):
    """Top-1 accuracy in eval mode (BatchNorm uses its running statistics).
    The last chunk is padded to full size so that every chunk has one shape."""
    correct = torch.zeros((), dtype=torch.long, device=device)
    for i in range(0, len(y), chunk):
        xb, yb = x[i:i + chunk], y[i:i + chunk]
        n = len(yb)
        if n < chunk:
            xb = torch.cat([xb, xb.new_zeros(chunk - n, *xb.shape[1:])])
        with autocast(args):
            logits = forward(xb.to(device))
        correct += (logits[:n].argmax(dim=1) == yb.to(device)).sum()
    return correct.item() / len(y)


def parse(argv=None):
    args = harness.parse_args(__doc__, steps=60, batch_size=32, extra=extra_flags, argv=argv)
    if args.lr is None:
        args.lr = 2e-3 if args.optimizer == "adamw" else 0.05
    return args


def build(args, device, capturable=False):
    """ResNet-18 on `device` and its optimizer (capturable: AdamW's step
    counters on the device, as torch.tpu.graph capture needs)."""
    model = torchvision.models.resnet18(num_classes=10).to(device)
    if args.optimizer == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-4, nesterov=True)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.05, capturable=capturable)
    return model, opt


def amp_loss(forward, xb, yb, args):
    """The forward and the cross-entropy, under autocast unless --no-amp."""
    with autocast(args):
        return F.cross_entropy(forward(xb), yb)


def bench_setup(device, batch_size, capturable=False):
    """(step, images per step, "images") for python -m torch_tpu.bench:
    step() trains this example's model on one fixed batch of its data."""
    args = parse(harness.bench_argv(device, batch_size))
    (x_train, y_train), _ = load_digits(args.size, args.val_fraction, args.seed)
    model, opt = build(args, device, capturable)
    model.train()
    xb, yb = x_train[:batch_size].to(device), y_train[:batch_size].to(device)
    step = harness.fixed_batch_step(opt, lambda x, y: amp_loss(model, x, y, args), xb, yb)
    return step, batch_size, "images"


def main():
    args = parse()
    device = harness.setup(args)

    (x_train, y_train), (x_val, y_val) = load_digits(args.size, args.val_fraction, args.seed)
    model, opt = build(args, device)
    forward = harness.compiled(model, args)
    # One cycle: warm up from lr/25, then anneal to ~0. A run this short
    # from scratch needs both: the warm-up while BatchNorm's statistics are
    # still moving, the decay to settle within a few dozen steps.
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, total_steps=max(args.steps, 2))
    amp = "bfloat16 autocast" if args.amp else "float32"
    print(f"ResNet-18 on {len(y_train)} train / {len(y_val)} validation digits at {args.size}x{args.size}, "
          f"{args.device} ({args.mode}), {amp}, batch {args.batch_size}")

    sampler = batches(len(y_train), args.batch_size, torch.Generator().manual_seed(args.seed))
    progress = harness.Progress(args.steps, "images", every=10)
    start = time.perf_counter()
    model.train()
    for step in progress:
        idx = next(sampler)
        xb, yb = x_train[idx].to(device), y_train[idx].to(device)
        loss = amp_loss(forward, xb, yb, args)
        opt.zero_grad(set_to_none=True)
        loss.backward()  # outside autocast, as PyTorch recommends; grads come back float32
        opt.step()
        sched.step()
        progress.update(step, loss.detach(), len(idx))
    harness.sync(device)
    train_s, rate = time.perf_counter() - start, progress.rate()

    model.eval()
    val_acc = accuracy(forward, x_val, y_val, device, args)
    train_acc = accuracy(forward, x_train, y_train, device, args)
    path = harness.save_curve(progress, harness.curve_path(args, __file__, "resnet"),
                              f"ResNet-18 on 8x8 digits upsampled to {args.size}x{args.size} ({amp})")

    print(f"validation accuracy {100 * val_acc:.1f}% (train {100 * train_acc:.1f}%) after {args.steps} steps")
    print(f"training took {train_s:.1f}s ({progress.first_step_s:.1f}s first step), "
          f"{rate:.0f} images/s after it" + (f"; loss curve: {path}" if path else ""))
    if not args.smoke and val_acc < TARGET_ACCURACY:
        raise SystemExit(f"validation accuracy {val_acc:.3f} is below {TARGET_ACCURACY}")


if __name__ == "__main__":
    main()
