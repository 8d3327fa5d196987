"""The main job: train a small MLP on synthetic data on the `tpu` device,
check the losses against the same run on CPU, and print the metrics.

    python examples/train_mlp.py [--steps 200] [--optimizer adamw|sgd]
"""
from __future__ import annotations

import argparse
import time

import torch
from tqdm import tqdm

import torch_tpu


def make_data(n: int, d_in: int, classes: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d_in, generator=g)
    w = torch.randn(d_in, classes, generator=g)
    y = (x @ w + 0.1 * torch.randn(n, classes, generator=g)).argmax(dim=1)
    return x, y


def make_model(d_in: int, hidden: int, classes: int) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(d_in, hidden), torch.nn.GELU(),
        torch.nn.Linear(hidden, hidden), torch.nn.ReLU(),
        torch.nn.Linear(hidden, classes),
    )


def train(device: str, steps: int, opt_name: str, batch: int = 64):
    x, y = make_data(4096, 32, 10)
    model = make_model(32, 128, 10).to(device)
    if opt_name == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    losses = []
    bar = tqdm(range(steps), desc=f"train on {device}", unit="step")
    start = time.perf_counter()
    for step in bar:
        i = (step * batch) % x.shape[0]
        xb, yb = x[i:i + batch].to(device), y[i:i + batch].to(device)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
        if step % 20 == 0 or step == steps - 1:
            bar.set_postfix(loss=f"{loss.item():.4f}")
    losses = torch.stack(losses).cpu()
    return losses, time.perf_counter() - start


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    a = p.parse_args()
    print(f"device: {torch.tpu.get_device_name()} ({torch.tpu.device_count()} device)")
    tpu_losses, tpu_s = train("tpu", a.steps, a.optimizer)
    cpu_losses, cpu_s = train("cpu", a.steps, a.optimizer)
    diff = (tpu_losses - cpu_losses).abs().max().item()
    print(f"\nloss: first {tpu_losses[0]:.4f} -> last {tpu_losses[-1]:.4f} (tpu); "
          f"{cpu_losses[0]:.4f} -> {cpu_losses[-1]:.4f} (cpu)")
    print(f"max |tpu - cpu| loss difference over {a.steps} steps: {diff:.2e}")
    # XLA:CPU and ATen sum in different orders; float32 drift stays far below this.
    ok = torch.allclose(tpu_losses, cpu_losses, atol=1e-3, rtol=1e-3)
    print("losses match CPU:", "yes" if ok else "NO")
    print(f"wall time: tpu {tpu_s:.1f}s, cpu {cpu_s:.1f}s (includes first-step compiles on tpu)\n")
    print(torch_tpu.debug.metrics_report())
    if not ok:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
