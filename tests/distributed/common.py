"""What the distributed tests' ranks and their single-process references
share: a small GPT-style decoder (tests/models/test_gpt.py), its data,
optimizer and loss, and the launcher."""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F
from torch import nn

from tests.models.test_gpt import BLOCK, GPT, HEADS, VOCAB, D

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLOBAL_BATCH = 8
STEPS = 3
# Final-weight tolerance against the one-process CPU run. AdamW divides each
# step by sqrt(v), so an element whose gradient is at float32 rounding level
# (a bias of ~zero gradient) moves by a visible part of a step (lr 3e-3) when
# its sums add in another order: 2.13e-5 on h.1.attn.c_attn.bias[84] on an
# AMD EPYC (AVX-512) host, where XLA:CPU generates other code than on the
# hosts where 2e-5 held. 1% of one step is 3e-5.
PARAM_ATOL = 3e-5


class SplitQKV(nn.Module):
    """Causal self-attention with separate q/k/v projections, so tensor
    parallelism can shard them by heads (the fused c_attn cannot be split
    column-wise and then chunked into q, k, v locally)."""

    def __init__(self, attn):
        super().__init__()
        w, b = attn.c_attn.weight.detach(), attn.c_attn.bias.detach()
        self.q, self.k, self.v = (nn.Linear(D, D) for _ in range(3))
        for i, lin in enumerate((self.q, self.k, self.v)):
            lin.weight.data.copy_(w[i * D:(i + 1) * D])
            lin.bias.data.copy_(b[i * D:(i + 1) * D])
        self.c_proj = attn.c_proj

    def forward(self, x):
        B, T, _ = x.shape
        hd = D // HEADS
        # -1: the local number of heads when q/k/v are sharded column-wise.
        q, k, v = (lin(x).view(B, T, -1, hd).transpose(1, 2) for lin in (self.q, self.k, self.v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).reshape(B, T, -1))


class Untied(GPT):
    """The decoder with its head untied from the token embedding (same initial
    values), so the two can be sharded differently (sequence parallelism)."""

    def tie_weights(self):
        if not hasattr(self, "_untied"):
            super().tie_weights()  # as constructed: tied, then split below


def make_gpt(tp=False, untied=False):
    """The decoder, initialised from seed 0; tp=True: the same weights with
    q/k/v split (the same function); untied=True: wte a copy of lm_head."""
    torch.manual_seed(0)
    model = (Untied if untied else GPT)(manual=False)
    if tp:
        for block in model.h:
            block.attn = SplitQKV(block.attn)
    if untied:
        model._untied = True
        model.wte.weight = nn.Parameter(model.lm_head.weight.detach().clone())
    return model


def make_opt(params, **kw):
    return torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1, **kw)


def batches():
    g = torch.Generator().manual_seed(1)
    out = []
    for _ in range(STEPS):
        seq = torch.randint(0, VOCAB, (GLOBAL_BATCH, BLOCK + 1), generator=g)
        out.append((seq[:, :-1], seq[:, 1:]))
    return out


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))


def reference(tp=False, untied=False):
    """Losses and final parameters of the same training in one process on
    CPU, with the global batch."""
    model = make_gpt(tp, untied)
    opt = make_opt(model.parameters())
    losses = []
    for x, y in batches():
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), {n: p.detach() for n, p in model.named_parameters()}


def make_llama():
    """HF LlamaForCausalLM from the tiny config of tests/models/test_hf_causal_lm.py, seed 0."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from tests.models.test_hf_causal_lm import build
    return build("llama", "sdpa").train()


def llama_batches():
    g = torch.Generator().manual_seed(2)
    return [torch.randint(3, 128, (GLOBAL_BATCH, 12), generator=g) for _ in range(STEPS)]


def llama_reference():
    model = make_llama()
    opt = make_opt(model.parameters())
    losses = []
    for ids in llama_batches():
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), {n: p.detach() for n, p in model.named_parameters()}


def launch(scenario, out_dir, nproc=2, timeout=600, env=None, check_files=True):
    """Runs worker.py SCENARIO under torchrun; returns each rank's payload."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           os.path.join(ROOT, "tests", "distributed", "worker.py"), scenario, str(out_dir)]
    e = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TORCH_TPU_CPU_FALLBACK="0")
    e.update(env or {})
    p = subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"torchrun {scenario} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    if not check_files:
        return None
    return [torch.load(os.path.join(out_dir, f"{scenario}_rank{r}.pt"), weights_only=False) for r in range(nproc)]
