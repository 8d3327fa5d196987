"""torch_tpu.export.to_stablehlo: a torch.export program as a StableHLO
module that runs on tpu and in JAX with PyTorch's CPU results."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import torch_tpu.export as tex

TPU = torch.device("tpu")


def _jax():
    jax = pytest.importorskip("jax")
    pytest.importorskip("flatbuffers")
    jax.config.update("jax_enable_x64", True)  # int64 inputs (token ids) stay int64
    return jax


def _check(model, args, atol=1e-5, rtol=1e-5):
    with torch.no_grad():
        expected = model(*args)
    m = tex.to_stablehlo(torch.export.export(model, args))
    assert "func.func public @main" in m.text
    assert [s.kind for s in m.inputs[len(m.weights):]] == ["input"] * len(args)
    # On tpu, through the device's own runtime.
    got = m(*[a.to(TPU) for a in args])
    torch.testing.assert_close(got.cpu(), expected, atol=atol, rtol=rtol)
    # In JAX, after a round trip through jax.export's serialization.
    jax = _jax()
    exported = jax.export.deserialize(m.jax_exported().serialize())
    res = exported.call(*[w.numpy() for w in m.weights.values()], *[a.numpy() for a in args])
    torch.testing.assert_close(torch.from_numpy(np.array(res[0])), expected, atol=atol, rtol=rtol)
    return m


def test_an_mlp_exports_with_its_weights_and_signature():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 3)).eval()
    m = _check(model, (torch.randn(2, 4),))
    assert list(m.weights) == ["0.weight", "0.bias", "2.weight", "2.bias"]
    torch.testing.assert_close(m.weights["0.weight"], model[0].weight.detach())
    assert m.outputs[0].shape == (2, 3) and m.outputs[0].dtype == torch.float32
    assert len(m.bytecode()) > 0


def test_resnet18_exports():
    torchvision = pytest.importorskip("torchvision")
    torch.manual_seed(0)
    _check(torchvision.models.resnet18(num_classes=10).eval(), (torch.randn(2, 3, 32, 32),), atol=1e-4, rtol=1e-4)


def test_the_bench_gpt_exports():
    from torch_tpu.bench.train import gpt_model

    torch.manual_seed(0)
    model = gpt_model(dict(vocab=64, d=32, layers=2, heads=2, seq=16)).eval()
    _check(model, (torch.randint(0, 64, (2, 16)),), atol=1e-4, rtol=1e-4)


def test_hugging_face_llama_exports():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96)
    lm = transformers.LlamaForCausalLM(cfg).eval()

    class Logits(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lm = lm

        def forward(self, ids):
            return self.lm(input_ids=ids, use_cache=False).logits

    m = _check(Logits(), (torch.randint(0, 96, (2, 7)),), atol=1e-4, rtol=1e-4)
    assert "lm.model.rotary_emb.inv_freq" in m.weights  # a non-persistent buffer: not in the state dict


def test_a_scan_exports_as_a_loop():
    from torch._higher_order_ops.scan import scan

    class Rnn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4) * 0.5)

        def forward(self, h, xs):
            def step(h, x):
                h = torch.tanh(h @ self.w + x)
                return h, h.sum(-1)

            return scan(step, h, xs)[1]

    m = _check(Rnn(), (torch.randn(2, 4), torch.randn(5, 2, 4)))
    assert "stablehlo.while" in m.text


def test_dynamic_dimensions_are_refused_with_the_fix_in_the_message():
    model = torch.nn.Linear(4, 3)
    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: batch},))
    with pytest.raises(NotImplementedError, match="static shapes"):
        tex.to_stablehlo(ep)


def test_wrong_inputs_raise_like_pytorch():
    m = tex.to_stablehlo(torch.export.export(torch.nn.Linear(4, 3), (torch.randn(2, 4),)))
    with pytest.raises(TypeError, match="takes 1 inputs"):
        m()
    with pytest.raises(ValueError, match=r"expected \(2, 4\)"):
        m(torch.randn(3, 4, device=TPU))
