"""The minGPT example runs end to end on tpu (--smoke: 3 steps, no quality check)."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "mingpt", "train.py")


def test_mingpt_smoke(tmp_path):
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0")
    proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--device", "tpu", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "new sequences exactly;" in proc.stdout, proc.stdout[-2000:]
    assert (tmp_path / "mingpt_loss.png").is_file()
