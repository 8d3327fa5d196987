"""A small DLRM-style click model trained on the `tpu` device.

The recommender has the usual DLRM parts: one nn.EmbeddingBag (mode "sum")
per categorical feature, two of them multi-hot bags given as flat indices
plus offsets; a bottom MLP over the dense features; the pairwise dot products
between the bottom-MLP output and the pooled embeddings (upper triangle); and
a top MLP that produces a click logit, trained with BCE-with-logits.

The click log is generated from a hidden logistic model over the dense
features and per-category latent vectors, so the held-out AUC of that model is
the ceiling. The same network, from the same initial weights and on the same
batches, is also trained on PyTorch CPU, and the three AUCs are printed side
by side.

    python examples/dlrm/train.py [--device tpu|cpu] [--mode eager|fused|compile]
                                  [--steps 300] [--batch-size 256] [--optimizer adagrad|adam]
"""
from __future__ import annotations

import copy
import os
import sys
import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from sklearn.metrics import roc_auc_score
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _shared import harness  # noqa: E402

# (name, number of categories, most ids in one sample's bag; 1 = single-hot)
FEATURES = (
    ("user", 1000, 1),
    ("item", 500, 1),
    ("category", 40, 1),
    ("hour", 24, 1),
    ("history", 500, 8),  # items the user clicked recently: a multi-hot bag
    ("tags", 100, 4),     # tags of the item: a multi-hot bag
)
N_DENSE = 8
LATENT = 4  # size of the hidden model's per-category vectors


# ----------------------------------------------------------------- the data

@dataclass
class Bags:
    """One categorical feature over N samples in EmbeddingBag's flat layout:
    sample i owns indices[offsets[i]:offsets[i + 1]]."""
    indices: torch.Tensor  # (total ids,) int64
    offsets: torch.Tensor  # (N + 1,) int64, offsets[-1] == total ids


@dataclass
class ClickLog:
    dense: torch.Tensor   # (N, N_DENSE) float32
    sparse: list          # one Bags per feature in FEATURES
    clicks: torch.Tensor  # (N,) float32, 0 or 1
    truth: torch.Tensor   # (N,) the hidden model's logit, for the ceiling AUC

    def __len__(self):
        return len(self.clicks)

    def split(self, n_train):
        return self._rows(0, n_train), self._rows(n_train, len(self))

    def _rows(self, lo, hi):
        sparse = []
        for bags in self.sparse:
            a, b = int(bags.offsets[lo]), int(bags.offsets[hi])
            sparse.append(Bags(bags.indices[a:b], bags.offsets[lo:hi + 1] - a))
        return ClickLog(self.dense[lo:hi], sparse, self.clicks[lo:hi], self.truth[lo:hi])


def zipf_ids(g, n, cardinality, s=1.1):
    """Ids drawn with a Zipf-like skew, as real traffic is: a few popular
    users and items, a long tail. The popularity order is a random permutation."""
    p = 1.0 / torch.arange(1, cardinality + 1, dtype=torch.float64) ** s
    ranks = torch.multinomial(p / p.sum(), n, replacement=True, generator=g)
    return torch.randperm(cardinality, generator=g)[ranks]


def make_click_log(n, seed):
    """Samples `n` impressions and their clicks from a fixed hidden logistic
    model: a dense linear part, a bias and a latent vector per category,
    pooled (summed) over multi-hot bags, and dot products between a few
    feature pairs and between a projection of the dense features and the item."""
    g = torch.Generator().manual_seed(seed)
    dense = torch.randn(n, N_DENSE, generator=g)
    sparse, pooled = [], []
    for _, card, max_len in FEATURES:
        lengths = torch.randint(1, max_len + 1, (n,), generator=g) if max_len > 1 else torch.ones(n, dtype=torch.long)
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)])
        indices = zipf_ids(g, int(offsets[-1]), card)
        sparse.append(Bags(indices, offsets))
        # The hidden model's table: column 0 acts as a per-category bias.
        table = torch.randn(card, LATENT, generator=g) * (0.4 / max_len ** 0.5)
        bag_of = torch.repeat_interleave(torch.arange(n), lengths)
        pooled.append(torch.zeros(n, LATENT).index_add_(0, bag_of, table[indices]))
    v = dict(zip((f[0] for f in FEATURES), pooled))
    w = torch.randn(N_DENSE, generator=g) * 0.2
    proj = torch.randn(N_DENSE, LATENT, generator=g) * 0.3
    logit = (-0.5 + dense @ w
             + sum(p[:, 0] for p in pooled)
             + (v["user"] * v["item"]).sum(1)
             + (v["user"] * v["history"]).sum(1)
             + (v["item"] * v["category"]).sum(1)
             + (v["hour"] * v["tags"]).sum(1)
             + ((dense @ proj) * v["item"]).sum(1))
    clicks = torch.bernoulli(torch.sigmoid(logit), generator=g)
    return ClickLog(dense, sparse, clicks, logit)


def batch(log, lo, hi, device):
    """Rows [lo, hi) moved to `device`. Each multi-hot feature's flat index
    list is padded to a fixed length (rows x most ids per bag) with the
    table's padding row, so every batch has the same shapes: XLA compiles
    each op once per shape, and a new length every step would recompile."""
    rows = hi - lo
    sparse = []
    for (_, card, max_len), bags in zip(FEATURES, log.sparse):
        a, b = int(bags.offsets[lo]), int(bags.offsets[hi])
        indices = bags.indices[a:b]
        if max_len > 1:
            # The padding ids land in the last bag; EmbeddingBag skips padding_idx.
            indices = F.pad(indices, (0, rows * max_len - len(indices)), value=card)
        sparse.append((indices.to(device), (bags.offsets[lo:hi] - a).to(device)))
    return log.dense[lo:hi].to(device), sparse, log.clicks[lo:hi].to(device)


# ---------------------------------------------------------------- the model

def mlp(sizes, last_relu):
    layers = []
    for i, (a, b) in enumerate(zip(sizes, sizes[1:])):
        layers.append(nn.Linear(a, b))
        if last_relu or i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


class DLRM(nn.Module):
    def __init__(self, dim=16, bottom=(64,), top=(64, 32)):
        super().__init__()
        # One extra row per table: the padding row that batch() fills in.
        self.tables = nn.ModuleList(
            nn.EmbeddingBag(card + 1, dim, mode="sum", padding_idx=card) for _, card, _ in FEATURES)
        for t in self.tables:
            nn.init.normal_(t.weight, std=0.05)
            with torch.no_grad():
                t.weight[t.padding_idx].zero_()
        self.bottom = mlp((N_DENSE, *bottom, dim), last_relu=True)
        n = len(FEATURES) + 1
        li, lj = torch.triu_indices(n, n, offset=1)
        # Flat positions of the strict upper triangle of an n x n matrix.
        self.register_buffer("pairs", li * n + lj, persistent=False)
        self.top = mlp((dim + len(self.pairs), *top, 1), last_relu=False)

    def forward(self, dense, sparse):
        x = self.bottom(dense)                                             # (B, dim)
        pooled = [t(idx, off) for t, (idx, off) in zip(self.tables, sparse)]  # n - 1 x (B, dim)
        z = torch.stack([x, *pooled], dim=1)                               # (B, n, dim)
        dots = torch.bmm(z, z.transpose(1, 2)).flatten(1)[:, self.pairs]   # (B, n(n-1)/2)
        return self.top(torch.cat([x, dots], dim=1)).squeeze(1)            # click logit


# ------------------------------------------------------------- train, score

def make_optimizer(name, params, lr, capturable=False):
    if name == "adagrad":
        return torch.optim.Adagrad(params, lr=lr)
    return torch.optim.Adam(params, lr=lr, capturable=capturable)


def click_loss(model):
    """loss_of(dense, sparse, clicks): BCE-with-logits of the click logit."""
    return lambda dense, sparse, clicks: F.binary_cross_entropy_with_logits(model(dense, sparse), clicks)


def train(model, log, args, device, desc):
    opt = make_optimizer(args.optimizer, model.parameters(), args.lr)

    step_fn = harness.compiled(harness.optimizer_step(opt, click_loss(model)), args)
    progress = harness.Progress(args.steps, "samples", desc=desc)
    per_epoch = len(log) // args.batch_size
    threads = torch.get_num_threads()
    if device.type == "cpu":
        # These ops are too small to split across cores: one thread is the
        # fastest PyTorch CPU run, and much faster than two on a busy machine.
        torch.set_num_threads(1)
    start = time.perf_counter()
    for step in progress:
        # The log is i.i.d. already, so walking it in order is a fair shuffle.
        lo = (step % per_epoch) * args.batch_size
        loss = step_fn(*batch(log, lo, lo + args.batch_size, device))
        progress.update(step, loss, args.batch_size)
    harness.sync(device)
    seconds = time.perf_counter() - start
    torch.set_num_threads(threads)
    return progress, seconds


@torch.no_grad()
def scores(model, log, device, chunk=2048):
    model.eval()
    out = []
    for lo in range(0, len(log) - chunk + 1, chunk):  # whole chunks only: one shape
        dense, sparse, _ = batch(log, lo, lo + chunk, device)
        out.append(model(dense, sparse).float().cpu())
    model.train()
    return torch.cat(out)


def parse(argv=None):
    def extra(ap):
        ap.add_argument("--optimizer", default="adagrad", choices=["adagrad", "adam"])
        ap.add_argument("--lr", type=float, default=None, help="default: 0.05 for adagrad, 3e-3 for adam")
        ap.add_argument("--train-samples", type=int, default=65536)
        ap.add_argument("--test-samples", type=int, default=16384)

    args = harness.parse_args(__doc__, steps=300, batch_size=256, extra=extra, argv=argv)
    if args.lr is None:
        args.lr = 0.05 if args.optimizer == "adagrad" else 3e-3
    return args


def bench_setup(device, batch_size, capturable=False):
    """(step, samples per step, "samples") for python -m torch_tpu.bench:
    step() trains this example's model on one fixed batch of its click log
    (capturable: Adam's step counters on the device; Adagrad has no such flag)."""
    args = parse(harness.bench_argv(device, batch_size))
    log = make_click_log(batch_size, seed=1234)
    model = DLRM().to(device)
    opt = make_optimizer(args.optimizer, model.parameters(), args.lr, capturable)
    return harness.fixed_batch_step(opt, click_loss(model), *batch(log, 0, batch_size, device)), batch_size, "samples"


def main():
    args = parse()
    device = harness.setup(args)

    log = make_click_log(args.train_samples + args.test_samples, seed=1234)
    train_log, test_log = log.split(args.train_samples)
    n_test = len(test_log) // 2048 * 2048
    labels = test_log.clicks[:n_test].numpy()
    print(f"click log: {len(train_log)} train / {len(test_log)} held-out impressions, "
          f"click rate {log.clicks.mean():.3f}; {len(FEATURES)} tables, "
          f"{sum(f[2] > 1 for f in FEATURES)} of them multi-hot")

    cpu_model = DLRM()
    model = copy.deepcopy(cpu_model).to(device)  # the same initial weights for both runs
    progress, seconds = train(model, train_log, args, device, desc=f"train on {args.device}")
    auc = roc_auc_score(labels, scores(model, test_log, device).numpy())
    print(f"{args.device}: {seconds:.1f}s for {args.steps} steps (first step {progress.first_step_s:.1f}s), "
          f"{progress.rate():.0f} samples/s")

    if args.device != "cpu":
        cpu_args = copy.copy(args)
        cpu_args.device, cpu_args.mode = "cpu", "eager"
        cpu_progress, cpu_seconds = train(cpu_model, train_log, cpu_args, torch.device("cpu"), desc="train on cpu")
        cpu_auc = roc_auc_score(labels, scores(cpu_model, test_log, torch.device("cpu")).numpy())
        print(f"cpu: {cpu_seconds:.1f}s, {cpu_progress.rate():.0f} samples/s")
    else:
        cpu_auc = auc
    truth_auc = roc_auc_score(labels, test_log.truth[:n_test].numpy())

    path = harness.save_curve(progress, harness.curve_path(args, __file__, "dlrm"),
                              f"DLRM click model, BCE loss ({args.device}, {args.mode})")
    if path:
        print(f"loss curve: {path}")
    cpu_part = f", CPU {cpu_auc:.3f}" if args.device != "cpu" else ""
    print(f"held-out AUC: {args.device} {auc:.3f}{cpu_part}, ground truth {truth_auc:.3f} "
          f"({auc / truth_auc:.0%} of the ceiling)")
    if args.smoke:
        return
    if auc < 0.9 * truth_auc:
        raise SystemExit(f"quality check failed: AUC {auc:.3f} < 0.9 x ground truth {truth_auc:.3f}")
    if abs(auc - cpu_auc) > 0.01:
        raise SystemExit(f"quality check failed: AUC {auc:.3f} differs from CPU's {cpu_auc:.3f} by more than 0.01")


if __name__ == "__main__":
    main()
