"""The UNet DDPM example runs end to end on tpu in --smoke mode."""
import os
import subprocess
import sys

SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "unet", "train.py")


def test_example_unet_smoke(tmp_path):
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0")
    proc = subprocess.run([sys.executable, SCRIPT, "--smoke", "--device", "tpu", "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "sampled 4 images to" in proc.stdout
    assert "final loss" in proc.stdout
    assert (tmp_path / "unet_loss.png").is_file()
    assert (tmp_path / "unet_samples.png").is_file()
