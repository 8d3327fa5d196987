"""What the distributed tests' ranks and their single-process references
share: a small GPT-style decoder (tests/models/test_gpt.py), its data,
optimizer and loss, and the launcher."""
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

from tests.models.test_gpt import BLOCK, GPT, VOCAB

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GLOBAL_BATCH = 8
STEPS = 3


def make_gpt():
    torch.manual_seed(0)
    return GPT(manual=False)


def make_opt(params):
    return torch.optim.AdamW(params, lr=3e-3, betas=(0.9, 0.95), weight_decay=0.1)


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


def reference():
    """Losses and final parameters of the same training in one process on
    CPU, with the global batch."""
    model = make_gpt()
    opt = make_opt(model.parameters())
    losses = []
    for x, y in batches():
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), {n: p.detach() for n, p in model.named_parameters()}


def launch(scenario, out_dir, nproc=2, timeout=600, env=None):
    """Runs worker.py SCENARIO under torchrun; returns each rank's payload."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           os.path.join(ROOT, "tests", "distributed", "worker.py"), scenario, str(out_dir)]
    e = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TORCH_TPU_CPU_FALLBACK="0")
    e.update(env or {})
    p = subprocess.run(cmd, cwd=ROOT, env=e, capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, f"torchrun {scenario} failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    return [torch.load(os.path.join(out_dir, f"{scenario}_rank{r}.pt"), weights_only=False) for r in range(nproc)]
