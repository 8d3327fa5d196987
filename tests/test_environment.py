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
