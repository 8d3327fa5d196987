"""python -m torch_tpu.bench runs end to end at a tiny size and writes its
table, CSV, JSON and chart (the figures themselves live in docs/benchmarks.md,
never in tests)."""
import csv
import json
import os
import subprocess
import sys

from test_device import ROOT


def bench(*args):
    """python -m torch_tpu.bench with `args`; its stdout (it must succeed)."""
    p = subprocess.run([sys.executable, "-m", "torch_tpu.bench", *args], cwd=ROOT, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout


def test_bench_train_writes_its_outputs(tmp_path):
    out = bench("--models", "mlp-demo", "--modes", "cpu-eager,tpu-strict", "--steps", "3", "--warmup", "1",
                "--out", str(tmp_path))
    assert "samples/s" in out and "peak MiB" in out, out
    rows = list(csv.DictReader(open(tmp_path / "train_step.csv")))
    assert [r["mode"] for r in rows] == ["cpu-eager", "tpu-strict"], rows
    tpu = rows[1]
    assert float(tpu["steps_per_s"]) > 0 and int(tpu["compiles"]) > 0 and int(tpu["peak_bytes"]) > 0, tpu
    data = json.load(open(tmp_path / "train_step.json"))
    assert data["results"]["mlp-demo"]["tpu-strict"]["final_loss"] > 0
    assert os.path.getsize(tmp_path / "train_step.png") > 0


def test_bench_ops_prints_its_table():
    out = bench("ops", "--iters", "5", "--repeats", "1")
    assert "matmul 64x64" in out and "tpu/cpu" in out, out


def test_bench_runs_the_examples_models(tmp_path):
    out = bench("--models", "ex-mingpt,ex-dlrm", "--modes", "cpu-eager,tpu-strict", "--steps", "2", "--warmup", "1",
                "--out", str(tmp_path))
    assert "sequences/s" in out and "samples/s" in out, out
    rows = list(csv.DictReader(open(tmp_path / "train_step.csv")))
    assert [(r["model"], r["mode"]) for r in rows] == [("ex-mingpt", "cpu-eager"), ("ex-mingpt", "tpu-strict"),
                                                       ("ex-dlrm", "cpu-eager"), ("ex-dlrm", "tpu-strict")], rows
    for r in rows:
        assert float(r["steps_per_s"]) > 0 and float(r["items_per_s"]) > 0, r
        if r["mode"] == "tpu-strict":
            assert int(r["compiles"]) > 0, r
