"""The DLRM example runs end to end on tpu (a few steps, no quality check)."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "dlrm", "train.py")


def test_dlrm_smoke(tmp_path):
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0")
    r = subprocess.run([sys.executable, SCRIPT, "--smoke", "--device", "tpu", "--out", str(tmp_path)],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    assert "held-out AUC: tpu " in r.stdout
    assert "ground truth" in r.stdout
    assert (tmp_path / "dlrm_loss.png").is_file()
