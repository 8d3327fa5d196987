"""What the three distributed examples share: a small decoder-only
transformer (separate q/k/v projections, so tensor parallelism can shard
attention by heads), the digit-sorting task, and the rank-0 progress bar.

The task: given 6 random digits, emit them sorted. Each training sequence is
the 6 digits followed by the sorted 6; the loss is on the sorted half only.
"""
import argparse
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

N, VOCAB = 6, 10


class Attention(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.hd = d // heads
        self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))

    def forward(self, x):
        B, T, _ = x.shape
        # -1: the local number of heads once q/k/v are sharded column-wise.
        q, k, v = (lin(x).view(B, T, -1, self.hd).transpose(1, 2) for lin in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.up, self.down = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.down(F.gelu(self.up(self.ln2(x))))


class Sorter(nn.Module):
    def __init__(self, d=64, heads=4, layers=2):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, d)
        self.pos = nn.Embedding(2 * N, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def make_batch(batch, g):
    digits = torch.randint(0, VOCAB, (batch, N), generator=g)
    seq = torch.cat([digits, digits.sort(dim=1).values], dim=1)
    return seq[:, :-1], seq[:, 1:]


def loss_fn(logits, y):
    # Only the positions that predict the sorted half count.
    return F.cross_entropy(logits[:, N - 1:].reshape(-1, VOCAB), y[:, N - 1:].reshape(-1))


@torch.no_grad()
def sort_accuracy(model, device, n=256):
    """Greedy decoding of held-out sequences; the share sorted exactly."""
    g = torch.Generator().manual_seed(1234)
    digits = torch.randint(0, VOCAB, (n, N), generator=g)
    seq = digits.to(device)
    for _ in range(N):
        nxt = model(seq)[:, -1].argmax(-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
    return (seq[:, N:].cpu() == digits.sort(dim=1).values).all(dim=1).float().mean().item(), digits[0], seq[0, N:]


def args(description):
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--device", default="tpu", choices=["tpu", "cpu"])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=64, help="global batch")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--smoke", action="store_true", help="a few steps, no loss check (CI)")
    a = ap.parse_args()
    if a.smoke:
        a.steps = min(a.steps, 5)
    return a


def setup(device):
    """init_process_group on this device's backend; returns the device."""
    dist.init_process_group("tpu" if device == "tpu" else "gloo")
    if device == "tpu":
        torch.tpu.set_device(int(os.environ.get("LOCAL_RANK", 0)))
        return torch.device("tpu", torch.tpu.current_device())
    return torch.device("cpu")


def train(model, opt, device, steps, local_batch, seed_per_rank=True, loss_of=None):
    """The training loop with a tqdm bar on rank 0. Returns (first, last)
    global mean losses."""
    from tqdm import tqdm
    rank = dist.get_rank()
    g = torch.Generator().manual_seed(100 + (rank if seed_per_rank else 0))
    bar = tqdm(range(steps), disable=rank != 0, desc="train")
    first = last = None
    t0 = time.perf_counter()
    for step in bar:
        x, y = make_batch(local_batch, g)
        x, y = x.to(device), y.to(device)
        opt.zero_grad()
        loss = (loss_of or (lambda m, x, y: loss_fn(m(x), y)))(model, x, y)
        loss.backward()
        opt.step()
        if step == 0 or step % 25 == 24 or step == steps - 1:
            t = loss.detach().clone()
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            last = t.item()
            first = last if first is None else first
            seqs = (step + 1) * local_batch * dist.get_world_size() / (time.perf_counter() - t0)
            bar.set_postfix(loss=f"{last:.3f}", seq_per_s=f"{seqs:.0f}")
    return first, last


def finish(name, model, device, first, last, smoke=False):
    """Rank 0 prints what was learned; every rank exits non-zero if the loss
    did not fall (unless smoke)."""
    # Every rank decodes: a tensor-parallel model needs all of them.
    acc, digits, out = sort_accuracy(model, device)
    if dist.get_rank() == 0:
        print(f"{name}: loss {first:.3f} -> {last:.3f} over {dist.get_world_size()} ranks; "
              f"sorts {acc:.0%} of held-out sequences exactly (e.g. {digits.tolist()} -> {out.tolist()})")
    ok = smoke or last < 0.5 * first
    dist.destroy_process_group()
    if not ok:
        raise SystemExit(f"{name}: the loss did not halve ({first:.3f} -> {last:.3f})")
