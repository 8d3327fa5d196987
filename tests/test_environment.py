"""The set-up gives an ecosystem that just works: torchvision's compiled ops
and every Hugging Face model class import beside our torch, with no
workaround in the test tree (issue: install like a PyTorch package)."""
import importlib.metadata

import torch


def test_torch_and_torchvision_are_the_matched_pair():
    torch_v = importlib.metadata.version("torch").split("+")[0]
    vision_v = importlib.metadata.version("torchvision").split("+")[0]
    assert (torch_v, vision_v) == ("2.14.1", "0.29.1")


def test_torchvision_nms_runs_on_cpu():
    import torchvision

    # Box 1 overlaps box 0 with IoU 81/119 > 0.5 and has the lower score, so it
    # is suppressed; box 2 is disjoint and kept. Kept indices by descending score.
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    keep = torchvision.ops.nms(boxes, scores, iou_threshold=0.5)
    torch.testing.assert_close(keep, torch.tensor([0, 2]))
    keep_all = torchvision.ops.nms(boxes, scores, iou_threshold=0.9)
    torch.testing.assert_close(keep_all, torch.tensor([0, 1, 2]))


def test_transformers_model_classes_import_and_build():
    import transformers

    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=64))
    out = model(torch.tensor([[1, 2, 3]]))
    assert out.logits.shape == (1, 3, 64)


def test_a_failing_autoload_warns_instead_of_breaking_import_torch():
    from test_device import run_py

    # PyTorch's PrivateUse1 slot already taken by another backend: torch_tpu
    # cannot register. Through autoload (simulated: PyTorch's own loader
    # function) it must only warn; a direct import raises.
    code = """
import warnings, torch
torch.utils.rename_privateuse1_backend("otherdev")
with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    torch._import_device_backends()
print("AUTOLOAD OK", any("tpu' device is unavailable" in str(x.message) and "otherdev" in str(x.message) for x in w))
import sys
for m in [m for m in sys.modules if m.startswith("torch_tpu")]:
    del sys.modules[m]
try:
    import torch_tpu
except RuntimeError as e:
    print("DIRECT RAISES", "otherdev" in str(e))
"""
    p = run_py(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert p.returncode == 0, p.stderr[-2000:]
    assert "AUTOLOAD OK True" in p.stdout and "DIRECT RAISES True" in p.stdout, p.stdout + p.stderr[-1500:]
