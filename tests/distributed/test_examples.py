"""examples/distributed/*.py run under torchrun at smoke size (--smoke: 5
steps, no loss check) on tpu, with CPU fallback off."""
import os
import subprocess
import sys

import pytest

from tests.distributed.common import ROOT


@pytest.mark.parametrize("script", ["ddp.py", "fsdp.py", "tensor_parallel.py", "resilient.py"])
def test_distributed_example_runs(script, tmp_path):
    extra = ["--ckpt-dir", str(tmp_path / "ckpt"), "--ckpt-every", "2"] if script == "resilient.py" else []
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2", script, "--smoke",
           *extra]
    env = dict(os.environ, OMP_NUM_THREADS="1", TORCH_TPU_CPU_FALLBACK="0")
    p = subprocess.run(cmd, cwd=os.path.join(ROOT, "examples", "distributed"), env=env, capture_output=True,
                       text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    assert "over 2 ranks; sorts" in p.stdout, p.stdout[-2000:]
