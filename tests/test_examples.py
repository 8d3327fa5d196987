"""Every examples/<name>/train.py runs on tpu at smoke size (--smoke: a few
steps, no quality check) with the CPU fallback off: it ends with its "what
it learned" line and writes its PNGs."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# name -> (texts its output must hold, files it must write into --out)
EXAMPLES = {
    "mingpt": (["new sequences exactly;"], ["mingpt_loss.png"]),
    "resnet": (["validation accuracy", "after 3 steps"], ["resnet_loss.png"]),
    "dlrm": (["held-out AUC: tpu ", "ground truth"], ["dlrm_loss.png"]),
    "unet": (["sampled 4 images to", "final loss"], ["unet_loss.png", "unet_samples.png"]),
    "llama": (["held-out sums correctly"], ["llama_loss.png"]),
    "qwen": (["held-out sums correctly", "greedy decode with a static KV cache:"], ["qwen_loss.png"]),
}


@pytest.mark.parametrize("name", list(EXAMPLES))
def test_example_smoke(name, tmp_path):
    texts, files = EXAMPLES[name]
    script = os.path.join(ROOT, "examples", name, "train.py")
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0", HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, script, "--smoke", "--device", "tpu", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-4000:]
    for text in texts:
        assert text in proc.stdout, (text, proc.stdout[-3000:])
    for f in files:
        assert (tmp_path / f).is_file(), f
