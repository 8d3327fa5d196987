"""Hugging Face generate() with a compiled forward (torch.compile(backend=
"tpu")), called again with new prompt lengths and max_new_tokens: the tokens
must be CPU's, and a new length must never crash the compile."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

TPU = torch.device("tpu")
transformers = pytest.importorskip("transformers")


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _llama():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("cache", ["static", "dynamic"])
def test_generate_with_new_lengths_matches_cpu(cache):
    # The second call's new lengths make dynamo trace with symbolic sizes;
    # scaled_dot_product_attention's backend choice read plain sizes there
    # and crashed ("Cannot call numel() on tensor with symbolic sizes").
    model = _llama()
    tm = _llama().to(TPU)
    tm.forward = torch.compile(tm.forward, backend="tpu")
    g = torch.Generator().manual_seed(1)
    for prompt, new in [(5, 6), (9, 12), (7, 4)]:
        ids = torch.randint(0, 96, (1, prompt), generator=g)
        kw = dict(max_new_tokens=new, do_sample=False, pad_token_id=0)
        if cache == "static":
            kw["cache_implementation"] = "static"
        with torch.no_grad():
            # disable_compile: Hugging Face compiles a static-cache forward
            # itself (Inductor on CPU); the reference is CPU eager.
            expected = model.generate(ids, disable_compile=True, **kw)
            got = tm.generate(ids.to(TPU), **kw)
        assert torch.equal(got.cpu(), expected), (prompt, new)


def test_sdpa_with_dynamic_lengths_matches_cpu():
    # The same crash without Hugging Face: SDPA with a mask over lengths that
    # dynamo marks dynamic.
    def attend(q, k, v, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)

    f = torch.compile(attend, backend="tpu", dynamic=True)
    for s in (5, 9, 14):
        q, k, v = torch.randn(1, 2, 3, 8), torch.randn(1, 2, s, 8), torch.randn(1, 2, s, 8)
        mask = torch.rand(1, 1, 3, s) > 0.3
        mask[..., 0] = True
        got = f(q.to(TPU), k.to(TPU), v.to(TPU), mask.to(TPU))
        torch.testing.assert_close(got.cpu(), attend(q, k, v, mask))


def test_views_of_permuted_results_under_dynamic_shapes():
    # AOTAutograd traces with CPU's strides: an elementwise op keeps its
    # permuted input's layout there, so `.contiguous()` of the transposed
    # result is dropped and a view follows. tpu results are contiguous, and
    # the view failed ("view size is not compatible"): the pattern of every
    # Hugging Face attention block (rotary, then transpose and reshape).
    def f(x, c):
        y = x.transpose(1, 2) * c
        z = y.transpose(1, 2).contiguous()
        return z.view(z.shape[0], z.shape[1], -1)

    cf = torch.compile(f, backend="tpu", dynamic=True)
    for n in (5, 9):
        x, c = torch.randn(2, n, 4, 8), torch.randn(n, 8)
        torch.testing.assert_close(cf(x.to(TPU), c.to(TPU)).cpu(), f(x, c))


@pytest.mark.parametrize("dynamic", [True, None], ids=["dynamic", "automatic_dynamic"])
def test_a_transformer_layer_in_inference_is_compiled_over_lengths(dynamic):
    # nn.TransformerEncoderLayer's forward first asks
    # torch.backends.mha.get_fastpath_enabled(), which dynamo never traces:
    # the whole layer ran uncompiled, op by op, at every length. For tpu
    # compiles the answer is a constant (tpu takes the composite path), so
    # the layer is one graph.
    from torch_tpu import _compile, debug

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    tl = torch.nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    tl.load_state_dict(layer.state_dict())
    cl = torch.compile(tl.to(TPU), backend="tpu", dynamic=dynamic)
    graphs = _compile.stats["graphs"]
    with torch.no_grad():
        for n in (6, 9, 12, 9):
            x = torch.randn(2, n, 32)
            before = debug.metrics()
            got = cl(x.to(TPU)).cpu()
            after = debug.metrics()
            torch.testing.assert_close(got, layer(x), rtol=1e-5, atol=1e-5)
    assert _compile.stats["graphs"] > graphs
    # The repeated length replays its bucket's program: nothing compiles, and
    # the only ops are the bucketing's (the padded input's transfer, the
    # slice of the output back to the real length).
    assert after["cache_misses"] == before["cache_misses"]
    assert after["ops_dispatched"] - before["ops_dispatched"] <= 2


@pytest.mark.parametrize("aot", [False, True], ids=["dynamo_graph", "aot_graph"])
def test_a_cpu_tensor_the_graph_only_moves_to_tpu_is_an_input_of_its_program(aot, monkeypatch):
    # Hugging Face's static cache keeps its write position as a 0-d CPU
    # tensor until the first compiled forward moves it to the device. Such a
    # graph ran its ops on every call ("holds CPU tensors"): each
    # generate() call's prefill was op by op. The runner moves the tensor
    # first, the graph is captured, and each call's new value is used.
    from torch_tpu import _compile, debug

    if aot:
        monkeypatch.setenv("TORCH_TPU_COMPILE_AOT", "1")

    def f(x, pos):
        return x * 2 + pos.to(x.device)

    cf = torch.compile(f, backend="tpu")
    x = torch.randn(4, 3)
    captured = _compile.stats["captured"]
    for k in range(4):
        pos = torch.tensor(k * 7)
        before = debug.metrics()["ops_dispatched"]
        torch.testing.assert_close(cf(x.to(TPU), pos).cpu(), f(x, pos))
        if k > 0:
            assert debug.metrics()["ops_dispatched"] == before  # replayed, with this call's pos
    assert _compile.stats["captured"] == captured + 1


def _model(kind: str):
    """A tiny decoder (or encoder-decoder) of each family generate() serves."""
    torch.manual_seed(0)
    small = dict(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2, max_position_embeddings=96)
    if kind == "qwen2":
        return transformers.Qwen2ForCausalLM(transformers.Qwen2Config(**small)).eval()
    if kind == "qwen3":
        return transformers.Qwen3ForCausalLM(transformers.Qwen3Config(head_dim=8, **small)).eval()
    if kind == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=4, n_positions=96)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.T5Config(vocab_size=96, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                                decoder_start_token_id=0)
    return transformers.T5ForConditionalGeneration(cfg).eval()


# Greedy, beam search, and sampling with top_k=1 (the sampling path --
# logits processors, softmax, multinomial -- with one token left, so the
# tokens are CPU's whatever the generator).
_DECODING = {"greedy": dict(do_sample=False), "beam": dict(do_sample=False, num_beams=2),
             "sample": dict(do_sample=True, top_k=1)}


# Every family greedy; beam search and sampling on one (the decoding loop
# is the same code for all of them; the matrix of 12 passes too, but costs
# three minutes of CI).
@pytest.mark.parametrize("kind, decoding", [("qwen2", "greedy"), ("qwen3", "greedy"), ("gpt2", "greedy"),
                                            ("t5", "greedy"), ("qwen2", "beam"), ("gpt2", "sample")])
def test_generate_of_each_family_with_new_lengths_matches_cpu(kind, decoding):
    model = _model(kind)
    tm = _model(kind).to(TPU)
    tm.forward = torch.compile(tm.forward, backend="tpu")
    g = torch.Generator().manual_seed(1)
    # A batch of two, the second left-padded, then (greedy, where the
    # compiled forward is traced again) a batch of one with new lengths.
    calls = [(2, 6, 5), (1, 9, 7)] if decoding == "greedy" and kind != "qwen3" else [(2, 6, 5)]
    for batch, prompt, new in calls:
        ids = torch.randint(1, 96, (batch, prompt), generator=g)
        mask = torch.ones(batch, prompt, dtype=torch.long)
        if batch == 2 and kind != "t5":
            mask[1, :2] = 0
            ids[1, :2] = 0
        kw = dict(max_new_tokens=new, pad_token_id=0, attention_mask=mask, **_DECODING[decoding])
        with torch.no_grad():
            expected = model.generate(ids, disable_compile=True, **kw)
            kw["attention_mask"] = mask.to(TPU)
            got = tm.generate(ids.to(TPU), **kw)
        assert torch.equal(got.cpu(), expected), (kind, decoding, batch, prompt, new)


def _generate_as_cpu(model, tm, g, batch, prompt, new, extra):
    # Greedy generate() of a random prompt (left-padded at a batch above
    # one) on tpu, against CPU eager.
    ids = torch.randint(1, 96, (batch, prompt), generator=g)
    mask = torch.ones(batch, prompt, dtype=torch.long)
    if batch > 1:
        mask[1, :2] = 0
        ids[1, :2] = 0
    kw = dict(max_new_tokens=new, do_sample=False, pad_token_id=0, attention_mask=mask, **extra)
    with torch.no_grad():
        expected = model.generate(ids, disable_compile=True, **kw)
        kw["attention_mask"] = mask.to(TPU)
        got = tm.generate(ids.to(TPU), **kw)
    assert torch.equal(got.cpu(), expected), (prompt, new)


def test_generate_glue_compiles_per_storage_size_not_per_length():
    # generate()'s glue appends each token (torch.cat) and reads the newest
    # column (stopping criteria), a strided view at batch 2. A third call
    # with new lengths compiles no op more than twice. Keyed on the length,
    # the cat and the reads of the last column would compile at every new
    # length (16 here).
    # (Batch 1, whose last column is a window: tests/test_windows.py.)
    batch = 2
    from torch_tpu import _C

    model = _llama()
    tm = _llama().to(TPU)
    tm.forward = torch.compile(tm.forward, backend="tpu")
    g = torch.Generator().manual_seed(1)
    for prompt, new in [(5, 6), (9, 12), (17, 20)]:
        _C._clear_compile_records()
        _generate_as_cpu(model, tm, g, batch, prompt, new, {})
    per_op = {}
    for name, *_ in _C._compile_records():
        per_op[name] = per_op.get(name, 0) + 1
    assert max(per_op.values()) <= 2, sorted(per_op.items(), key=lambda kv: -kv[1])


@pytest.mark.parametrize("cache,batch", [("static", 1), ("static", 2), ("dynamic", 2)])
def test_a_call_with_new_lengths_compiles_at_most_four_programs(cache, batch):
    # After calls that have seen the storage sizes, a call with a new prompt
    # length and new max_new_tokens compiles the model's own new programs
    # (a prefill at the new length; with a static cache, its decode at the
    # new cache length) and none of generate()'s glue: the prompt and its
    # mask are uploaded with room, and the ops on them read them whole. A
    # static cache's 4-D mask over a left-padded batch is built as one fused
    # program (torch_tpu/_hf_generate.py); op by op, its arange, add, le and
    # ands compiled at every new length (8 programs here).
    from torch_tpu import _C

    model = _llama()
    tm = _llama().to(TPU)
    tm.forward = torch.compile(tm.forward, backend="tpu")
    g = torch.Generator().manual_seed(1)
    extra = {"cache_implementation": "static"} if cache == "static" else {}
    for prompt, new in [(9, 12), (17, 20), (12, 9)]:
        torch.tpu.synchronize()
        _C._clear_compile_records()
        _generate_as_cpu(model, tm, g, batch, prompt, new, extra)
    programs = [r[0] for r in _C._compile_records()]
    assert len(programs) <= 4, programs


@pytest.mark.parametrize("mode", ["compiled", "fused"])
def test_the_second_call_with_new_lengths_compiles_only_its_new_prefill(mode):
    # The bench's form: a left-padded batch of 8 with a static cache, then
    # ONE call with a shorter prompt and fewer new tokens. The first prompt
    # (8 x 16 ids) fills a power of two exactly. Its appends and the shorter
    # prompt must land in one storage size, or the second call compiles
    # generate()'s glue again (the append, the read of the newest column,
    # the mask's glue); and the mask's "is the padding mask all ones?" must
    # be answered without cutting the recorded mask in two. Before both,
    # the second call compiled 6 programs (compiled) and 4 (fused); now
    # only the new prefill's mask and forward are new.
    from torch_tpu import _C

    model = _llama()
    tm = _llama().to(TPU)
    if mode == "compiled":
        tm.forward = torch.compile(tm.forward, backend="tpu")
    g = torch.Generator().manual_seed(1)
    extra = {"cache_implementation": "static"}
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE if mode == "fused"
                                  else torch.tpu.EagerMode.DEFER_NEVER):
        _generate_as_cpu(model, tm, g, 8, 16, 8, extra)
        torch.tpu.synchronize()
        _C._clear_compile_records()
        _generate_as_cpu(model, tm, g, 8, 12, 4, extra)
        torch.tpu.synchronize()
    programs = [r[0] for r in _C._compile_records()]
    assert len(programs) <= (2 if mode == "compiled" else 1), programs


@pytest.mark.parametrize("cache,batch", [("static", 1), ("dynamic", 2)])
def test_fused_eager_generate_compiles_per_storage_size_not_per_token(cache, batch):
    # In fused eager each token's flush holds generate()'s glue on the
    # growing ids (the cat, the read of the newest column, the cache
    # positions). Read at their lengths, those graphs compiled again at
    # every token; read whole, with the length and the column's position as
    # runtime scalars, a call whose storage sizes were all seen compiles at
    # most the model's new prefill and decode.
    from torch_tpu import _C

    model = _llama()
    tm = _llama().to(TPU)
    g = torch.Generator().manual_seed(1)
    extra = {"cache_implementation": "static"} if cache == "static" else {}
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        for prompt, new in [(9, 12), (17, 20), (12, 9)]:
            torch.tpu.synchronize()
            _C._clear_compile_records()
            _generate_as_cpu(model, tm, g, batch, prompt, new, extra)
        torch.tpu.synchronize()
    programs = [r[0] for r in _C._compile_records()]
    assert len(programs) <= 4, programs


def test_generate_mask_region_restores_strict_eager():
    # The static cache's mask is recorded by the fused driver only for the
    # call (torch_tpu/_hf_generate.py): strict eager is back afterwards,
    # also when the mask function raises, and other modes are left alone.
    import transformers.generation.utils as gu

    from torch_tpu import _C

    assert getattr(gu.create_masks_for_generate, "_torch_tpu_fused_mask", False)
    seen = []

    def fake(**kwargs):
        seen.append(torch.tpu.get_eager_mode())
        raise ValueError("bad mask")

    from torch_tpu._hf_generate import _fused_in_strict_eager

    wrapped = _fused_in_strict_eager(fake)
    with pytest.raises(ValueError, match="bad mask"):
        wrapped(inputs_embeds=torch.empty(2, 3, 0, device=TPU))
    assert seen == [torch.tpu.EagerMode.DEFER_AND_FUSE]
    assert torch.tpu.get_eager_mode() == torch.tpu.EagerMode.DEFER_NEVER
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING):
        with pytest.raises(ValueError):
            wrapped(inputs_embeds=torch.empty(2, 3, 0, device=TPU))
    assert seen[-1] == torch.tpu.EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
    with pytest.raises(ValueError):
        wrapped(inputs_embeds=torch.empty(2, 3, 0))  # CPU tensors: untouched
    assert seen[-1] == torch.tpu.EagerMode.DEFER_NEVER
    assert _C._eager_mode() == int(torch.tpu.EagerMode.DEFER_NEVER)
