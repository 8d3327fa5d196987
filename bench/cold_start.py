"""Cold start of a training step: fresh processes, empty compilation caches.

    python bench/cold_start.py [--models mlp,gpt] [--peer VENV]

For each model and configuration: the time to the first step's loss on the
host and to the whole first step (compiles included), the number of XLA
programs compiled by then, their total
compile time, and steady-state steps/s (so a trade-off is visible).
Configurations:
  strict               strict eager as shipped (the optimizer step is one program; misses
                       compile ahead on one thread per core while ops go on recording)
  strict-serial        strict eager with TORCH_TPU_COMPILE_THREADS=0 (each miss compiles on
                       the recording thread, one after another: no compile-ahead)
  strict-tiered        strict eager with TORCH_TPU_TIERED_COMPILE=1 (quick programs first,
                       the full ones compiled in the background; steady state measured
                       after they have replaced the quick ones)
  strict-per-op-optim  strict eager with TORCH_TPU_FUSE_OPTIMIZER=0 (the optimizer op by op)
  fused                EagerMode.DEFER_AND_FUSE
  strict-math-attention  strict eager with attention as matmuls and a softmax, as the peer runs it
  torchtpu-strict/-fused  Google's TorchTPU 0.2.0 on the same XLA:CPU plugin, when
                       --peer names its venv (../shared/tools/torchtpu-peer-venv.sh); its
                       scaled_dot_product_attention is a TPU-only kernel, so it runs the
                       math form of attention
The models are torch_tpu.bench.train's (MLP 784-512-512-10 with SGD, the GPT-style
decoder with AdamW).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = {
    "strict": {},
    "strict-serial": {"TORCH_TPU_COMPILE_THREADS": "0"},
    "strict-tiered": {"TORCH_TPU_TIERED_COMPILE": "1"},
    "strict-per-op-optim": {"TORCH_TPU_FUSE_OPTIMIZER": "0"},
    "fused": {"TORCH_TPU_DEFER_AND_FUSE": "1"},
    "strict-math-attention": {"MATH_ATTENTION": "1"},
}


def _math_attention(q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None):
    import torch

    assert attn_mask is None and dropout_p == 0.0, "the bench models use neither"
    s = (q @ k.transpose(-2, -1)) * (scale or q.shape[-1] ** -0.5)
    if is_causal:
        keep = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool, device=q.device).tril()
        s = s.masked_fill(~keep, float("-inf"))
    return s.softmax(-1) @ v


def child(name: str, peer: bool, steady: int) -> None:
    if peer:
        import torchtpu_peer  # noqa: F401  (points TorchTPU at the XLA:CPU plugin)
    import torch

    if peer:  # the peer is also named torch_tpu: load our model definitions by path
        import importlib.util

        spec = importlib.util.spec_from_file_location(
            "_cold_start_train", os.path.join(os.path.dirname(HERE), "torch_tpu", "bench", "train.py"))
        train = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(train)
        torch_setup = train.torch_setup
    else:
        from torch_tpu.bench.train import torch_setup

    if peer or os.environ.get("MATH_ATTENTION"):
        # TorchTPU lowers scaled_dot_product_attention to a TPU-only custom
        # call, which XLA:CPU cannot compile: the peer runs attention as
        # matmuls and a softmax, and "strict-math-attention" runs ours the same way.
        import torch.nn.functional as F

        F.scaled_dot_product_attention = _math_attention
    if peer and os.environ.get("PEER_FUSED"):
        torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    step = torch_setup(name, "tpu")
    t0 = time.perf_counter()
    float(step().cpu())
    first = time.perf_counter() - t0
    # The loss is back before the backward and the optimizer step have run
    # (both torch_tpu and TorchTPU launch asynchronously): also time the
    # whole step.
    torch.accelerator.synchronize()
    out = {"first_step_s": first, "first_step_done_s": time.perf_counter() - t0}
    if not peer:
        import torch_tpu
        from torch_tpu import debug

        m = debug.metrics()
        out.update(programs=m["compiles"], compile_s=m["compile_ms"] / 1e3)
        # Steady state is measured on the full programs: wait for the tier-up.
        torch_tpu.cache.wait_background_compiles()
        out["full_programs_s"] = time.perf_counter() - t0
        out["background_compile_s"] = debug.metrics()["background_compile_ms"] / 1e3
    for _ in range(2):
        step()
    float(step().cpu())
    t0 = time.perf_counter()
    for _ in range(steady):
        loss = step()
    float(loss.cpu())
    out["steps_per_s"] = steady / (time.perf_counter() - t0)
    print("RESULT " + json.dumps(out))


def measure(python: str, name: str, env_extra: dict, peer: bool, steady: int) -> dict | None:
    env = dict(os.environ)
    env.update(env_extra)
    with tempfile.TemporaryDirectory(prefix="tt_cold_") as cache:
        env["TORCH_TPU_CACHE_DIR"] = cache
        if not peer:
            env["PYTHONPATH"] = os.path.dirname(HERE) + os.pathsep + env.get("PYTHONPATH", "")
        else:  # the peer is also named torch_tpu: keep this checkout off its path
            env.pop("PYTHONPATH", None)
        args = [python, __file__, "--child", name, str(int(peer)), str(steady)]
        r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=1800, cwd=tempfile.gettempdir())
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    print(f"  {name} failed: {' | '.join((r.stderr or r.stdout).strip().splitlines()[-3:])}", file=sys.stderr)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp,gpt")
    ap.add_argument("--peer", default="", help="venv of Google's TorchTPU, for side-by-side columns")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a.child[0], a.child[1] == "1", int(a.child[2]))
        return
    from tqdm import tqdm

    steady = {"mlp": 30, "gpt": 5}
    runs = [(m, c, sys.executable, env, False) for m in a.models.split(",") for c, env in CONFIGS.items()]
    if a.peer:
        py = os.path.join(a.peer, "bin", "python")
        for m in a.models.split(","):
            runs += [(m, "torchtpu-strict", py, {}, True), (m, "torchtpu-fused", py, {"PEER_FUSED": "1"}, True)]
    results = {}
    for m, c, py, env, peer in tqdm(runs, desc="cold-start bench", unit="run"):
        results.setdefault(m, {})[c] = measure(py, m, env, peer, steady.get(m, 5))
    print(f"\n{'model':<6}{'config':<22}{'first loss s':>13}{'step done s':>12}{'programs':>10}{'compile s':>11}"
          f"{'bg compile s':>13}{'full progs s':>13}{'steps/s':>9}")
    nan = float("nan")
    for m, rows in results.items():
        for c, r in rows.items():
            if r:
                print(f"{m:<6}{c:<22}{r['first_step_s']:>13.2f}{r['first_step_done_s']:>12.2f}"
                      f"{r.get('programs', '-'):>10}"
                      f"{r.get('compile_s', nan):>11.2f}{r.get('background_compile_s', nan):>13.2f}"
                      f"{r.get('full_programs_s', nan):>13.2f}{r['steps_per_s']:>9.2f}")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "cold_start.json"), "w") as f:
        json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
