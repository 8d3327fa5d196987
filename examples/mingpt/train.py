"""A minimal GPT, written out here in full, learns to sort digits on the `tpu`
device.

The model is a decoder-only transformer: token and position embeddings,
pre-LayerNorm blocks (causal self-attention through
F.scaled_dot_product_attention, then a GELU MLP), a final LayerNorm and a
linear head. The task: read a sequence of digits, then emit it sorted. A
training example is the digits followed by their sorted copy,

    2 0 1 1 0 2 | 0 0 1 1 2 2

and the loss counts only the positions that predict the sorted half. At the
end the model sorts sequences it never saw in training, by greedy decoding.

    python examples/mingpt/train.py [--device tpu|cpu] [--mode eager|fused|compile] [--steps N] [--smoke]
"""
from __future__ import annotations

import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _shared import harness  # noqa: E402


class CausalSelfAttention(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        assert dim % heads == 0, "--dim must be a multiple of --heads"
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)  # one matmul for queries, keys and values
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, heads, T, head_dim): each head attends on its own.
        q, k, v = (t.view(B, T, self.heads, C // self.heads).transpose(1, 2) for t in (q, k, v))
        # is_causal: position t sees only positions <= t, so it cannot peek at the answer.
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = CausalSelfAttention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        # Pre-LayerNorm: normalize what goes into each sublayer, keep the residual path clean.
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, vocab, block_size, dim, heads, layers, scan_layers=False):
        super().__init__()
        self.scan_layers = scan_layers
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(block_size, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.apply(self._init)
        # GPT-2: shrink the layers that write into the residual stream, so its
        # variance does not grow with depth.
        for name, p in self.named_parameters():
            if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m):
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, idx):
        T = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        if self.scan_layers:
            # The blocks as one loop over their stacked weights: the program
            # (and its compile time) stays one block's size at any depth.
            import torch_tpu

            x = torch_tpu.scan_layers(self.blocks, x)
        else:
            for block in self.blocks:
                x = block(x)
        return self.head(self.ln_f(x))  # (B, T, vocab) logits for the next token


class SortTask:
    """Random digit sequences, with `held_out` of them kept out of training
    (so the final test is on sequences the model never saw)."""

    def __init__(self, digits, length, held_out, seed):
        self.digits, self.length = digits, length
        self.g = torch.Generator().manual_seed(seed)
        # A sequence's identity: its digits read as one base-`digits` number.
        self.place = digits ** torch.arange(length - 1, -1, -1)
        space = digits ** length
        # Small spaces (e.g. 3 digits x 6 = 729 sequences): keep at least half for training.
        held_out = min(held_out, space // 2)
        codes = torch.randperm(space, generator=self.g)[:held_out] if space <= 1 << 22 else \
            torch.randint(0, space, (4 * held_out,), generator=self.g).unique()[:held_out]
        self.test_codes = codes
        self.test = self.decode(codes)

    def decode(self, codes):
        return codes[:, None] // self.place % self.digits

    def train_batch(self, n):
        x = torch.randint(0, self.digits, (n, self.length), generator=self.g)
        while True:
            seen = torch.isin((x * self.place).sum(1), self.test_codes)
            if not seen.any():
                break
            x[seen] = torch.randint(0, self.digits, (int(seen.sum()), self.length), generator=self.g)
        seq = torch.cat([x, x.sort(dim=1).values], dim=1)
        # Next-token prediction: inputs are seq[:-1], targets seq[1:]; -100 (ignored
        # by cross_entropy) on the positions that would predict the unsorted input.
        targets = seq[:, 1:].clone()
        targets[:, :self.length - 1] = -100
        return seq[:, :-1], targets


@torch.no_grad()
def sort_greedy(model, x):
    """Appends the most likely next token len(x) times; returns what was appended."""
    seq = x
    for _ in range(x.shape[1]):
        nxt = model(seq)[:, -1].argmax(dim=-1, keepdim=True)
        seq = torch.cat([seq, nxt], dim=1)
    return seq[:, x.shape[1]:]


def extra_flags(ap):
    ap.add_argument("--digits", type=int, default=10, help="digits 0..digits-1")
    ap.add_argument("--length", type=int, default=6, help="digits per sequence")
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--scan-layers", action="store_true",
                    help="run the blocks as one loop (torch_tpu.scan_layers) instead of unrolled")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--held-out", type=int, default=500, help="test sequences, never trained on")


def parse(argv=None):
    return harness.parse_args(__doc__, steps=500, batch_size=64, extra=extra_flags, argv=argv)


def build(args, device, capturable=False):
    """The GPT on `device` and its AdamW (capturable: step counters on the
    device, as torch.tpu.graph capture needs)."""
    model = GPT(args.digits, 2 * args.length - 1, args.dim, args.heads, args.layers, args.scan_layers).to(device)
    # Weight decay on the matrices only, as in GPT-2: not on biases, LayerNorm or embeddings.
    def decays(name, p):
        return p.dim() == 2 and not name.startswith(("tok.", "pos."))

    decay = [p for n, p in model.named_parameters() if decays(n, p)]
    no_decay = [p for n, p in model.named_parameters() if not decays(n, p)]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), capturable=capturable)
    return model, opt


def sort_loss(model):
    """loss_of(x, y): cross-entropy on the positions that predict the sorted half."""
    def loss_of(x, y):
        logits = model(x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1), ignore_index=-100)
    return loss_of


def bench_setup(device, batch_size, capturable=False):
    """(step, sequences per step, "sequences") for python -m torch_tpu.bench:
    step() trains this example's model on one fixed batch of its data."""
    args = parse(harness.bench_argv(device, batch_size))
    task = SortTask(args.digits, args.length, args.held_out, seed=args.seed)
    model, opt = build(args, device, capturable)
    x, y = (v.to(device) for v in task.train_batch(batch_size))
    return harness.fixed_batch_step(opt, sort_loss(model), x, y), batch_size, "sequences"


def main():
    args = parse()
    device = harness.setup(args)
    task = SortTask(args.digits, args.length, args.held_out, seed=args.seed)
    model, opt = build(args, device)
    # Cosine decay to 10% of --lr: the late small steps settle the last mistakes.
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.1 + 0.45 * (1 + math.cos(math.pi * min(s / max(args.steps, 1), 1.0))))

    loss_of = harness.compiled(sort_loss(model), args)

    n_params = sum(p.numel() for p in model.parameters())
    print(f"GPT: {args.layers} layers, {args.heads} heads, dim {args.dim}, {n_params / 1e3:.0f}k parameters; "
          f"sorting {args.length} digits 0-{args.digits - 1} on {device} ({args.mode})")
    progress = harness.Progress(args.steps, "sequences")
    model.train()
    t0 = time.perf_counter()
    for step in progress:
        x, y = task.train_batch(args.batch_size)
        x, y = x.to(device), y.to(device)
        loss = loss_of(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        progress.update(step, loss.detach(), args.batch_size)
    harness.sync(device)
    progress.bar.close()
    train_s = time.perf_counter() - t0
    rate = progress.items / max(time.perf_counter() - progress.t0, 1e-9)  # steady state: without step 0

    # Decoding grows the sequence one token at a time: run it eagerly, since a
    # compiled function would recompile for every length.
    model.eval()
    t1 = time.perf_counter()
    out = sort_greedy(model, task.test.to(device)).cpu()
    decode_s = time.perf_counter() - t1
    want = task.test.sort(dim=1).values
    acc = (out == want).all(dim=1).float().mean().item()
    path = harness.save_curve(progress, harness.curve_path(args, __file__, "mingpt"),
                              f"minGPT sorting {args.length} digits ({device}, {args.mode})")
    print(f"{args.steps} steps in {train_s:.0f}s (first step {progress.first_step_s:.1f}s), "
          f"{rate:.0f} sequences/s; decoding {decode_s:.1f}s; loss curve: {path}")
    print(f"sorted {acc:.0%} of {len(out)} new sequences exactly; {task.test[0].tolist()} -> {out[0].tolist()}")
    if not args.smoke and acc < 0.8:
        raise SystemExit(f"quality check failed: sorted {acc:.1%} of held-out sequences exactly, expected >= 80%")


if __name__ == "__main__":
    main()
