"""A minGPT-style decoder (token + position embeddings, pre-LayerNorm blocks
with causal self-attention and a GELU MLP, final LayerNorm, head weight-tied
to the token embedding) trained 3 steps with AdamW on tpu vs CPU, CPU
fallback off. Two attention variants: F.scaled_dot_product_attention with
is_causal=True, and the manual masked_fill(-inf) + softmax form (which also
uses the tanh GELU, as minGPT's NewGELU does)."""
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.models._harness import compare_training

VOCAB, BLOCK, D, HEADS, LAYERS = 96, 16, 64, 4, 2


class CausalSelfAttention(nn.Module):
    def __init__(self, manual):
        super().__init__()
        self.c_attn = nn.Linear(D, 3 * D)
        self.c_proj = nn.Linear(D, D)
        self.manual = manual
        self.register_buffer("mask", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v))
        if self.manual:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            y = F.softmax(att, dim=-1) @ v
        else:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, manual):
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.attn = CausalSelfAttention(manual)
        self.ln_2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(approximate="tanh" if manual else "none"),
                                 nn.Linear(4 * D, D))
        self.mlp[2].is_c_proj = True

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, manual):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, D)
        self.wpe = nn.Embedding(BLOCK, D)
        self.h = nn.ModuleList(Block(manual) for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(D)
        self.lm_head = nn.Linear(D, VOCAB, bias=False)
        self.tie_weights()
        self.apply(self._init_weights)
        for name, p in self.named_parameters():
            if name.endswith("c_proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * LAYERS))

    def tie_weights(self):
        self.wte.weight = self.lm_head.weight

    @staticmethod
    def _init_weights(m):
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)

    def forward(self, idx):
        T = idx.size(1)
        pos = torch.arange(0, T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


@pytest.mark.parametrize("manual", [False, True], ids=["sdpa", "manual_softmax"])
def test_gpt_adamw(manual):
    torch.manual_seed(0)
    model = GPT(manual)
    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(3):
        seq = torch.randint(0, VOCAB, (4, BLOCK + 1), generator=g)
        batches.append((seq[:, :-1], seq[:, 1:]))

    def loss_fn(m, idx, targets):
        logits = m(idx)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1))

    def make_opt(params):
        return torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)

    # Tolerances: float32 matmuls/softmax/LayerNorm with a different reduction
    # order than CPU (a few ulp per op) over 2 blocks; loss ~ln(96)=4.6, so
    # 1e-5 relative is a few ulp of accumulated rounding. Grads: the smallest
    # (LayerNorm/bias grads ~1e-4) get an absolute floor of 1e-6.
    compare_training(model, make_opt, loss_fn, batches,
                     loss_tol=dict(atol=1e-5, rtol=1e-5), grad_tol=dict(atol=1e-6, rtol=1e-4))
