"""Time to first training step in a fresh process, with a cold and then a
warm compilation cache, for the main-job model (examples/train_mlp.py).

    python bench/cache_warm_start.py [--runs 3]

Each run is a new Python process. "compile phase" is the time spent getting
executables (compiling, or loading them from the disk tier); "first step" is
wall time from model creation to the end of the first optimizer step.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, time, torch, torch_tpu
t_import = time.perf_counter()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 128), torch.nn.GELU(), torch.nn.Linear(128, 128),
                            torch.nn.ReLU(), torch.nn.Linear(128, 10)).to("tpu")
opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
x, y = torch.randn(64, 32).to("tpu"), torch.randint(0, 10, (64,)).to("tpu")
t0 = time.perf_counter()
loss = torch.nn.functional.cross_entropy(model(x), y)
loss.backward()
opt.step()
loss.item()
t1 = time.perf_counter()
st = torch.tpu._get_cache_stats()
m = torch_tpu.debug.metrics()
torch_tpu.cache.flush()
print(json.dumps({"first_step_s": t1 - t0, "compile_ms": m["compile_ms"], "compiles": m["compiles"],
                  "disk_hits": st["disk"]["hits"], "load_ms": st["load_ms"]}))
"""


def child(cache_dir: str) -> dict:
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=cache_dir)
    p = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(p.stderr)
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    cold, warm = [], []
    for _ in range(a.runs):
        with tempfile.TemporaryDirectory() as d:
            cold.append(child(d))
            warm.append(child(d))
    med = lambda rs, k: statistics.median(r[k] for r in rs)  # noqa: E731
    c_step, w_step = med(cold, "first_step_s"), med(warm, "first_step_s")
    phase = lambda r: r["compile_ms"] + r["load_ms"]  # noqa: E731
    c_phase = statistics.median(phase(r) for r in cold)
    w_phase = statistics.median(phase(r) for r in warm)
    print(f"{'':<12}{'first step s':>14}{'compiles':>10}{'compile ms':>12}{'disk load ms':>14}{'disk hits':>11}")
    for label, rs in (("cold cache", cold), ("warm cache", warm)):
        print(f"{label:<12}{med(rs, 'first_step_s'):>14.3f}{med(rs, 'compiles'):>10.0f}{med(rs, 'compile_ms'):>12.1f}"
              f"{med(rs, 'load_ms'):>14.1f}{med(rs, 'disk_hits'):>11.0f}")
    print(f"\ncompile phase (compile + disk load): cold {c_phase:.1f} ms, warm {w_phase:.1f} ms -> "
          f"{c_phase / max(w_phase, 1e-9):.1f}x faster warm (target >= 20x)")
    print(f"first step, warm vs cold: {c_step / w_step:.1f}x faster (median of {a.runs} runs each)")


if __name__ == "__main__":
    main()
