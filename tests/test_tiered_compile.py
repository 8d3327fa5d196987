"""Tiered compiles (opt-in, TORCH_TPU_TIERED_COMPILE=1): a new eager op runs
a quick-compiled program at once, and the full compile in the background
replaces it (docs/compilation_cache.md). Each case runs in a fresh process
with its own empty cache directory."""
from __future__ import annotations

import json
import os
import subprocess
import sys

CODE = r"""
import json, torch, torch_tpu
from torch_tpu import debug
if DETERMINISTIC:
    torch.use_deterministic_algorithms(True)
x = torch.linspace(-3, 3, 4096).reshape(64, 64)
t = x.to("tpu")
first = torch.nn.functional.gelu(t @ t).sum(1).cpu()
m1 = debug.metrics()
done = torch_tpu.cache.wait_background_compiles(timeout=120)
m2 = debug.metrics()
report = debug.metrics_report()
torch_tpu.cache.flush()  # the disk writes are in the background too
st0 = torch.tpu._get_cache_stats()["disk"]
again = torch.nn.functional.gelu(t @ t).sum(1).cpu()
m3 = debug.metrics()
ref = torch.nn.functional.gelu(x @ x).sum(1)
torch.testing.assert_close(first, ref, rtol=1e-4, atol=1e-2)
torch.testing.assert_close(again, ref, rtol=1e-4, atol=1e-2)
torch_tpu.cache.flush()
print(json.dumps({"done": done, "compiles": m1["compiles"], "bg": m2["background_compiles"],
                  "pending": m2["background_pending"], "compiles_after": m3["compiles"],
                  "bg_after": m3["background_compiles"], "disk_entries": st0["entries"],
                  "report": [l for l in report.splitlines() if l.startswith("background compiles")]}))
"""


def run(tmp_path, deterministic=False, **env_extra):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path), TORCH_TPU_TIERED_COMPILE="1")
    env.pop("WORLD_SIZE", None)
    env.update(env_extra)
    code = CODE.replace("DETERMINISTIC", str(deterministic))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_quick_programs_are_replaced_by_full_ones(tmp_path):
    r = run(tmp_path)
    assert r["done"] and r["pending"] == 0
    assert r["report"] and r["report"][0].split()[2] == "3", r["report"]
    # gemm, gelu and sum: each compiled quick, then once more in the background.
    assert r["compiles"] == 3 and r["bg"] == 3, r
    # The full programs are the ones persisted, and the second run compiles nothing.
    assert r["disk_entries"] == 3, r
    assert r["compiles_after"] == 3 and r["bg_after"] == 3, r
    warm = run(tmp_path)
    assert warm["compiles"] == 0 and warm["bg"] == 0, warm


def test_off_by_default_across_ranks_and_under_deterministic_algorithms(tmp_path):
    off = run(tmp_path / "off", TORCH_TPU_TIERED_COMPILE="")
    assert off["compiles"] == 3 and off["bg"] == 0 and off["disk_entries"] == 3, off
    ranks = run(tmp_path / "ranks", WORLD_SIZE="2")
    assert ranks["compiles"] == 3 and ranks["bg"] == 0, ranks
    det = run(tmp_path / "det", deterministic=True)
    assert det["compiles"] == 3 and det["bg"] == 0, det
