"""Hugging Face Trainer under torchrun on tpu: accelerate must see a
distributed job (data split over the ranks, the model wrapped in DDP over
the "tpu" process group) and end where the same 2-rank run on the CPU with
Gloo ends, rather than train each rank alone."""
import os
import subprocess
import sys

import pytest
import torch

from tests.distributed.common import ROOT

pytest.importorskip("transformers")
pytest.importorskip("accelerate")


def _run(device, out):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           os.path.join(ROOT, "tests", "distributed", "trainer_worker.py"), device, str(out)]
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", TORCH_TPU_CPU_FALLBACK="0")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"torchrun ({device}) failed:\n{p.stdout[-3000:]}\n{p.stderr[-6000:]}"
    return [torch.load(out / f"trainer_{device}_rank{r}.pt", weights_only=False) for r in range(2)]


def test_trainer_under_torchrun_is_data_parallel_and_matches_cpu(tmp_path):
    tpu = _run("tpu", tmp_path)
    cpu = _run("cpu", tmp_path)
    for r, got in enumerate(tpu):
        assert got["parallel_mode"] == "ParallelMode.DISTRIBUTED" and got["world_size"] == 2
        assert got["wrapped"] == "DistributedDataParallel"
        assert got["device"].startswith("tpu")
    assert cpu[0]["wrapped"] == "DistributedDataParallel"
    # The ranks hold one model (DDP averaged their gradients).
    for k, v in tpu[0]["weights"].items():
        torch.testing.assert_close(tpu[1]["weights"][k], v, atol=0, rtol=0, msg=k)
    # Tolerances as tests/test_hf_trainer.py: six AdamW steps in float32,
    # XLA's and ATen's kernels round differently.
    ref = cpu[0]
    torch.testing.assert_close(tpu[0]["loss"], ref["loss"], atol=1e-5, rtol=1e-5)
    assert len(tpu[0]["logs"]) == len(ref["logs"])
    for got, expected in zip(tpu[0]["logs"], ref["logs"]):
        for key in ("loss", "eval_loss", "grad_norm", "learning_rate"):
            if key in expected:
                assert got[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-5), (key, got, expected)
    for k, v in ref["weights"].items():
        torch.testing.assert_close(tpu[0]["weights"][k], v, atol=1e-5, rtol=1e-4, msg=k)
