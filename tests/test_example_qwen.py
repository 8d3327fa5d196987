"""examples/qwen/train.py runs on tpu (a few steps, CPU fallback off): it
fine-tunes, answers held-out sums with generate(), times greedy decoding with
a static KV cache and writes its loss curve."""
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "qwen" / "train.py"


def test_qwen_example_smoke(tmp_path):
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0", HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--smoke", "--device", "tpu", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "held-out sums correctly" in proc.stdout, proc.stdout[-3000:]
    assert "greedy decode with a static KV cache:" in proc.stdout, proc.stdout[-3000:]
    assert (tmp_path / "qwen_loss.png").is_file()
