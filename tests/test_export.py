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


def _llama_logits():
    """A small Hugging Face Llama as a module from token ids to logits."""
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

    return Logits()


def test_hugging_face_llama_exports():
    m = _check(_llama_logits(), (torch.randint(0, 96, (2, 7)),), atol=1e-4, rtol=1e-4)
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


def _check_dynamic(model, make, lengths, dynamic_shapes, atol=1e-4, rtol=1e-4):
    """Exports `model` once with dynamic sizes, then runs the module at each
    length (on tpu, and in JAX with the inputs padded by hand) against
    PyTorch on CPU at that length."""
    ep = torch.export.export(model, make(lengths[0]), dynamic_shapes=dynamic_shapes)
    m = tex.to_stablehlo(ep)
    assert m.dynamic, "no dynamic dimension in the module"
    jax = _jax()
    exported = jax.export.deserialize(m.jax_exported().serialize())
    for n in lengths:
        args = make(n)
        with torch.no_grad():
            expected = model(*args)
        expected = expected if isinstance(expected, tuple) else (expected,)
        got = m(*[a.to(TPU) for a in args])
        got = got if isinstance(got, tuple) else (got,)
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.cpu(), e, atol=atol, rtol=rtol, msg=lambda err: f"length {n}: {err}")
        # A server calls @main directly: inputs padded to the bound, the real sizes after them.
        padded, real = m.pad(*args)
        res = exported.call(*[w.numpy() for w in m.weights.values()], *[a.numpy() for a in padded],
                            *[np.int64(r) for r in real])
        for k, e in enumerate(expected):
            out = torch.from_numpy(np.array(res[k]))
            for dim, r in zip(m.dynamic, real):
                for kk, d, c in dim.outputs:
                    if kk == k:
                        out = out.narrow(d, 0, r + c)
            torch.testing.assert_close(out, e, atol=atol, rtol=rtol, msg=lambda err: f"JAX, length {n}: {err}")
    return m


def test_a_dynamic_batch_exports_bounded():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.GELU(), torch.nn.Linear(8, 3)).eval()
    batch = torch.export.Dim("batch", min=2, max=16)
    m = _check_dynamic(model, lambda n: (torch.randn(n, 4),), [3, 9, 16], ({0: batch},))
    (dim,) = m.dynamic
    assert dim.bound == 16 and dim.inputs == ((len(m.weights), 0, 0),) and dim.outputs == ((0, 0, 0),)
    assert m.inputs[-1].kind == "length" and m.inputs[-1].shape == () and m.inputs[-1].dtype == torch.int64
    assert m.inputs[len(m.weights)].shape == (16, 4) and m.outputs[0].shape == (16, 3)
    with pytest.raises(ValueError, match="outside the exported range up to 16"):
        m(torch.randn(17, 4, device=TPU))


def test_the_bench_gpt_exports_with_a_dynamic_sequence():
    # Causal attention, layer norms and a mean over the sequence: exact at
    # every length only because the padded positions are masked out.
    from torch_tpu.bench.train import gpt_model

    class Pooled(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gpt = gpt_model(dict(vocab=64, d=32, layers=2, heads=2, seq=32)).eval()

        def forward(self, ids):
            logits = self.gpt(ids)
            return logits, logits.mean(1)

    torch.manual_seed(0)
    model = Pooled().eval()
    seq = torch.export.Dim("seq", min=2, max=32)
    m = _check_dynamic(model, lambda n: (torch.randint(0, 64, (2, n)),), [5, 17, 32], ({1: seq},))
    assert m.dynamic[0].outputs == ((0, 1, 0),)  # the pooled result has no dynamic dimension
    got = m(torch.randint(0, 64, (2, 7)).to(TPU))
    assert got[0].shape == (2, 7, 64) and got[1].shape == (2, 64)


def test_hugging_face_llama_exports_with_a_dynamic_sequence():
    seq = torch.export.Dim("seq", min=2, max=48)
    _check_dynamic(_llama_logits(), lambda n: (torch.randint(0, 96, (2, n)),), [7, 30, 48], ({1: seq},))


def test_two_dynamic_sizes_and_a_size_read_as_a_number():
    class Last(torch.nn.Module):
        def forward(self, x):  # the last position, scaled by the length: both read the real size
            return x.cumsum(1)[:, -1] * x.shape[1]

    b, s = torch.export.Dim("b", min=2, max=8), torch.export.Dim("s", min=2, max=32)
    m = _check_dynamic(Last(), lambda n: (torch.randn(2 + n % 7, n),), [3, 9, 32], ({0: b, 1: s},))
    assert sorted(d.bound for d in m.dynamic) == [8, 32]
    assert m.outputs[0].shape == (8,)


def test_unbounded_dynamic_dimensions_ask_for_a_bound():
    model = torch.nn.Linear(4, 3)
    batch = torch.export.Dim("batch", min=2)
    ep = torch.export.export(model, (torch.randn(3, 4),), dynamic_shapes=({0: batch},))
    with pytest.raises(ValueError, match=r"Dim\('seq', max=512\)"):
        tex.to_stablehlo(ep)


def test_wrong_inputs_raise_like_pytorch():
    m = tex.to_stablehlo(torch.export.export(torch.nn.Linear(4, 3), (torch.randn(2, 4),)))
    with pytest.raises(TypeError, match="takes 1 inputs"):
        m()
    with pytest.raises(ValueError, match=r"expected \(2, 4\)"):
        m(torch.randn(3, 4, device=TPU))
