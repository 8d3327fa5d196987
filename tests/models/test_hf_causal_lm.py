"""Hugging Face transformers causal LMs (Llama, Qwen2, Qwen3) built from tiny
random configs (no hub access: HF_HUB_OFFLINE=1): forward logits, a backward
pass (every parameter grad) and greedy model.generate() on tpu vs CPU, with
CPU fallback off. Attention runs through transformers' "sdpa" and "eager"
implementations; inputs include a left-padded row so the attention mask and
position handling take part."""
import copy
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import pytest  # noqa: E402
import torch  # noqa: E402

transformers = pytest.importorskip("transformers")

from tests.helpers import TPU  # noqa: E402
from tests.models._harness import assert_no_fallbacks, reset_fallbacks  # noqa: E402

TINY = dict(vocab_size=128, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
            pad_token_id=0, bos_token_id=1, eos_token_id=2)


def build(arch, attn):
    torch.manual_seed(0)
    if arch == "llama":
        cfg = transformers.LlamaConfig(**TINY)
        cls = transformers.LlamaForCausalLM
    elif arch == "qwen2":
        # Tied head, as the small Qwen2 checkpoints have.
        cfg = transformers.Qwen2Config(tie_word_embeddings=True, **TINY)
        cls = transformers.Qwen2ForCausalLM
    else:
        cfg = transformers.Qwen3Config(head_dim=16, **TINY)
        cls = transformers.Qwen3ForCausalLM
    cfg._attn_implementation = attn
    return cls(cfg).eval()


def inputs():
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 128, (2, 10), generator=g)
    mask = torch.ones_like(ids)
    ids[1, :3] = 0            # row 1 is left-padded by 3
    mask[1, :3] = 0
    return ids, mask


def to_tpu(model):
    m = copy.deepcopy(model).to(TPU)
    # Module.to() unties shared Parameters on a PrivateUse1 device (see
    # tests/models/_harness.py); re-tie as after any device move.
    m.tie_weights()
    return m


ARCHS = ["llama", "qwen2"] + (["qwen3"] if hasattr(transformers, "Qwen3ForCausalLM") else [])
CASES = [(a, "sdpa") for a in ARCHS] + [("llama", "eager")]


@pytest.mark.parametrize("arch,attn", CASES)
def test_forward_backward(arch, attn):
    model = build(arch, attn)
    ids, mask = inputs()
    labels = ids.masked_fill(mask == 0, -100)
    out = model(input_ids=ids, attention_mask=mask, labels=labels)
    out.loss.backward()

    reset_fallbacks()
    tmodel = to_tpu(model)
    tmodel.zero_grad()
    tout = tmodel(input_ids=ids.to(TPU), attention_mask=mask.to(TPU), labels=labels.to(TPU))
    tout.loss.backward()
    assert_no_fallbacks()

    # Tolerances: float32 matmuls, RMSNorm and softmax reduce in a different
    # order than CPU, a few ulp per op through 2 layers; logits are O(0.1)
    # and the loss ~ln(128)=4.85.
    torch.testing.assert_close(tout.logits.cpu(), out.logits.detach(), atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(tout.loss.cpu(), out.loss.detach(), atol=1e-5, rtol=1e-5)
    grads = dict(model.named_parameters())
    tgrads = dict(tmodel.named_parameters())
    assert grads.keys() == tgrads.keys()
    for name, p in grads.items():
        assert tgrads[name].grad is not None, name
        # Grads range over 1e-6..1e-1 (init std 0.02); atol 1e-6 covers the
        # smallest, whose relative rounding is larger.
        torch.testing.assert_close(tgrads[name].grad.cpu(), p.grad, atol=1e-6, rtol=1e-4,
                                   msg=lambda m: f"grad of {name}: {m}")


@pytest.mark.parametrize("arch", ARCHS)
def test_generate_greedy(arch):
    model = build(arch, "sdpa")
    ids, mask = inputs()
    kw = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    with torch.no_grad():
        expected = model.generate(input_ids=ids, attention_mask=mask, **kw)
        reset_fallbacks()
        tmodel = to_tpu(model)
        actual = tmodel.generate(input_ids=ids.to(TPU), attention_mask=mask.to(TPU), **kw)
        assert_no_fallbacks()
    assert actual.device.type == "tpu"
    torch.testing.assert_close(actual.cpu(), expected, atol=0, rtol=0)
