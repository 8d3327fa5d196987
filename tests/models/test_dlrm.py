"""A DLRM-style recommender: nn.EmbeddingBag tables fed (indices, offsets)
(sum and mean pooling, bags of varying size including an empty bag), a
bottom MLP over dense features, pairwise dot-product interaction via bmm and
triu_indices, a top MLP and BCEWithLogits, trained 3 steps with SGD and with
Adagrad on tpu vs CPU, CPU fallback off."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.models._harness import compare_training

DENSE, D, TABLES, BATCH = 8, 16, (50, 30, 20), 6


class DLRM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.ModuleList(nn.EmbeddingBag(n, D, mode="sum" if i != 1 else "mean")
                                 for i, n in enumerate(TABLES))
        self.bot = nn.Sequential(nn.Linear(DENSE, 32), nn.ReLU(), nn.Linear(32, D), nn.ReLU())
        f = len(TABLES) + 1
        self.register_buffer("iu", torch.triu_indices(f, f, offset=1))
        self.top = nn.Sequential(nn.Linear(D + f * (f - 1) // 2, 32), nn.ReLU(), nn.Linear(32, 1))

    def forward(self, dense, *sparse):
        x = self.bot(dense)
        feats = [x] + [e(sparse[2 * i], sparse[2 * i + 1]) for i, e in enumerate(self.emb)]
        T = torch.stack(feats, dim=1)                     # B, F, D
        Z = torch.bmm(T, T.transpose(1, 2))               # B, F, F
        inter = Z[:, self.iu[0], self.iu[1]]              # B, F(F-1)/2
        return self.top(torch.cat([x, inter], dim=1)).squeeze(1)


def make_batch(g):
    dense = torch.randn(BATCH, DENSE, generator=g)
    sparse = []
    for n in TABLES:
        lengths = torch.randint(0, 4, (BATCH,), generator=g)
        lengths[0] = 3
        lengths[2] = 0                                    # an empty bag
        offsets = torch.cat([torch.zeros(1, dtype=torch.long), lengths.cumsum(0)[:-1]])
        sparse += [torch.randint(0, n, (int(lengths.sum()),), generator=g), offsets]
    y = torch.randint(0, 2, (BATCH,), generator=g).float()
    return (dense, *sparse, y)


@pytest.mark.parametrize("opt", ["sgd", "adagrad"])
def test_dlrm(opt):
    torch.manual_seed(0)
    model = DLRM()
    g = torch.Generator().manual_seed(1)
    batches = [make_batch(g) for _ in range(3)]

    def loss_fn(m, *b):
        return F.binary_cross_entropy_with_logits(m(*b[:-1]), b[-1])

    def make_opt(params):
        if opt == "sgd":
            return torch.optim.SGD(params, lr=0.1)
        return torch.optim.Adagrad(params, lr=0.05)

    # Tolerances: float32 matmuls and embedding-bag sums (the backward's
    # scatter-add order differs from CPU's) a few ulp apart; grads are
    # O(1e-3..1e-1), so atol 1e-6 / rtol 1e-4 allows ~1e3 ulp of small ones.
    compare_training(model, make_opt, loss_fn, batches,
                     loss_tol=dict(atol=1e-5, rtol=1e-5), grad_tol=dict(atol=1e-6, rtol=1e-4))
