"""examples/resnet/train.py runs end to end on tpu (--smoke: 3 steps, no
accuracy check), CPU fallback off."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "resnet", "train.py")


def test_resnet_example_smoke(tmp_path):
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0")
    proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--device", "tpu", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "validation accuracy" in proc.stdout and "after 3 steps" in proc.stdout, proc.stdout
    assert (tmp_path / "resnet_loss.png").is_file()
