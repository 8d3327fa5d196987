"""Variable lengths under torch.compile(backend="tpu"): graphs that mix
positions (attention, a loss's mean, weight gradients) run at power-of-two
bucket sizes with masks (torch_tpu/_masked.py). Each must compute what
CPU computes at the real length, forward and backward, and a new length
in a bucket already seen must compile no program."""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import torch_tpu
from torch_tpu import _compile

TPU = torch.device("tpu")
pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def programs_fetched() -> int:
    """Programs taken from below the memory tier: compiled, or loaded from
    the disk tier (which another test's process may have filled)."""
    return torch_tpu.debug.metrics()["cache_misses"]


def _train(cpu_model, loss_of, lengths, make_batch, skip=()):
    """SGD steps compiled for tpu beside the same steps on CPU: losses and
    final parameters must match. Returns the programs fetched per call."""
    dev_model = copy.deepcopy(cpu_model).to(TPU)

    def make(m):
        opt = torch.optim.SGD(m.parameters(), lr=0.1)

        def step(*batch):
            loss = loss_of(m, *batch)
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        return step

    on_cpu, on_tpu = make(cpu_model), torch.compile(make(dev_model), backend="tpu")
    fetched = []
    for n in lengths:
        batch = make_batch(n)
        want = on_cpu(*batch)
        before = programs_fetched()
        got = on_tpu(*(b.to(TPU) for b in batch))
        fetched.append(programs_fetched() - before)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
    for (name, p), q in zip(cpu_model.named_parameters(), dev_model.parameters()):
        if name not in skip:
            torch.testing.assert_close(q.cpu(), p, rtol=1e-4, atol=1e-5, msg=name)
    return fetched


def _gpt():
    from torch_tpu.bench.train import gpt_model

    torch.manual_seed(0)
    return gpt_model(dict(vocab=64, d=32, layers=2, heads=4, seq=64))


def test_a_gpt_training_step_over_lengths_is_exact_and_shares_bucket_programs():
    masked = _compile.stats["masked"]
    g = torch.Generator().manual_seed(0)

    def batch(n):
        return torch.randint(0, 64, (2, n), generator=g), torch.randint(0, 64, (2, n), generator=g)

    def loss_of(m, x, y):
        return F.cross_entropy(m(x).flatten(0, 1), y.flatten())

    # 9: the first, static graph; 13: the dynamic graph at bucket 16; 17 and
    # 30: bucket 32; 12, 31 and 32: buckets already compiled.
    fetched = _train(_gpt(), loss_of, [9, 13, 17, 30, 12, 31, 32], batch)
    assert _compile.stats["masked"] == masked + 1
    assert fetched[4:] == [0, 0, 0], fetched


def test_hugging_face_llama_with_left_padding_trains_as_on_cpu():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128)
    model = transformers.LlamaForCausalLM(cfg)
    g = torch.Generator().manual_seed(0)

    def batch(n):
        ids = torch.randint(0, 64, (2, n), generator=g)
        mask = torch.ones(2, n, dtype=torch.long)
        mask[1, :2] = 0
        return ids, mask

    def loss_of(m, ids, mask):
        # labels=ids: HF pads the shifted labels with ignore_index on the right.
        return m(input_ids=ids, attention_mask=mask, labels=ids).loss

    fetched = _train(model, loss_of, [9, 13, 30, 12, 5], batch)
    assert fetched[3] == 0, fetched


def test_hugging_face_bert_with_a_padding_mask_trains_as_on_cpu():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.BertConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                  num_attention_heads=4, max_position_embeddings=128, hidden_dropout_prob=0.0,
                                  attention_probs_dropout_prob=0.0)
    model = transformers.BertForSequenceClassification(cfg)
    g = torch.Generator().manual_seed(0)

    def batch(n):
        ids = torch.randint(0, 64, (2, n), generator=g)
        mask = torch.ones(2, n, dtype=torch.long)
        mask[1, -3:] = 0
        return ids, mask, torch.tensor([0, 1])

    def loss_of(m, ids, mask, labels):
        return m(input_ids=ids, attention_mask=mask, labels=labels).loss

    fetched = _train(model, loss_of, [9, 13, 30, 12], batch)
    assert fetched[3] == 0, fetched


# Functions over a padded axis, each called at lengths of one bucket and
# another, forward and backward (the input's gradient) against CPU.
def _mean_over_seq(x):
    return x.mean(1)


def _softmax_over_seq(x):
    return torch.softmax(x, dim=1) * 3


def _log_softmax_sum(x):
    return torch.log_softmax(x, dim=1).sum(1)


def _user_mean(x):
    return x.sum(1) / x.shape[1]


def _last_position(x):
    return x[:, -1] * 2


def _last_two(x):
    return x[:, -2:].sum(1)


def _max_and_logsumexp(x):
    return x.amax(1) + torch.logsumexp(x, dim=1)


def _cumsum_and_shift(x):
    return x.cumsum(1)[:, 1:] - x[:, :-1]


def _right_pad(x):
    return F.pad(x.transpose(1, 2), (0, 2), value=-3.0).transpose(1, 2).mean(1)


def _cross_entropy_ignore(x):
    logits = x[..., :4]
    target = (x[..., 4] * 10).long().remainder(4)
    target[:, 0] = -100
    return F.cross_entropy(logits.flatten(0, 1), target.flatten(), ignore_index=-100)


def _attention(x):
    q = k = v = x.view(x.shape[0], x.shape[1], 2, 3).transpose(1, 2)
    return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).flatten(2)


def _layer_norm_then_matmul(x):
    h = F.layer_norm(x, (6,))
    return h.transpose(1, 2) @ h


@pytest.mark.parametrize("fn", [_mean_over_seq, _softmax_over_seq, _log_softmax_sum, _user_mean, _last_position,
                                _last_two, _max_and_logsumexp, _cumsum_and_shift, _right_pad,
                                _cross_entropy_ignore, _attention, _layer_norm_then_matmul],
                         ids=lambda f: f.__name__.strip("_"))
def test_ops_over_a_padded_axis_match_cpu_forward_and_backward(fn):
    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    g = torch.Generator().manual_seed(0)
    for n in (5, 7, 11):
        x = torch.randn(2, n, 6, generator=g)
        xc = x.clone().requires_grad_()
        xt = x.to(TPU).requires_grad_()
        want, got = fn(xc), compiled(xt)
        torch.testing.assert_close(got.cpu(), want, rtol=1e-5, atol=1e-5)
        w = torch.randn(want.shape, generator=g)
        (want * w).sum().backward()
        (got * w.to(TPU)).sum().backward()
        torch.testing.assert_close(xt.grad.cpu(), xc.grad, rtol=1e-5, atol=1e-5)


def test_a_transformer_layer_with_a_key_padding_mask_in_inference():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, dropout=0.0).eval()
    tl = copy.deepcopy(layer).to(TPU)
    compiled = torch.compile(tl, backend="tpu", dynamic=True)
    fetched = []
    g = torch.Generator().manual_seed(0)
    for n in (6, 9, 13, 20, 11, 30):
        x = torch.randn(2, n, 16, generator=g)
        pad = torch.zeros(2, n, dtype=torch.bool)
        pad[1, -2:] = True
        with torch.no_grad():
            want = layer(x, src_key_padding_mask=pad)
            before = programs_fetched()
            got = compiled(x.to(TPU), src_key_padding_mask=pad.to(TPU))
            fetched.append(programs_fetched() - before)
        # CPU's fast path writes zeros at padded positions; compare the rest.
        keep = ~pad
        torch.testing.assert_close(got.cpu()[keep], want[keep], rtol=1e-5, atol=1e-5)
    assert fetched[4] == 0, fetched  # 11 shares bucket 16 with 9 and 13


def test_a_graph_the_analysis_cannot_prove_keeps_the_exact_path():
    # A sort along the dynamic axis mixes positions in a way no mask
    # repairs: the graph runs per size, still exact.
    def fn(x):
        return x.sort(dim=1).values[:, 0] + x.mean(1)

    compiled = torch.compile(fn, backend="tpu", dynamic=True)
    for n in (5, 7):
        x = torch.randn(2, n, 3)
        torch.testing.assert_close(compiled(x.to(TPU)).cpu(), fn(x), rtol=1e-5, atol=1e-5)


def test_user_bucket_boundaries_pick_the_padded_sizes():
    compiled = torch.compile(_softmax_over_seq, backend="tpu", dynamic=True, options={"buckets": (12, 16)})
    fetched = []
    for n in (9, 11, 12, 13, 16, 20):
        x = torch.randn(2, n, 6)
        before = programs_fetched()
        torch.testing.assert_close(compiled(x.to(TPU)).cpu(), _softmax_over_seq(x), rtol=1e-5, atol=1e-5)
        fetched.append(programs_fetched() - before)
    # 9, 11, 12 share bucket 12; 13 and 16 share 16; 20 goes to the power of two 32.
    assert fetched[1:3] == [0, 0] and fetched[4] == 0 and fetched[3] >= 1 and fetched[5] >= 1, fetched
    with pytest.raises(Exception, match="must be positive ints"):  # dynamo wraps the ValueError
        torch.compile(_softmax_over_seq, backend="tpu", options={"buckets": ["a"]})(torch.randn(2, 3, 6).to(TPU))


@pytest.mark.parametrize("new_tokens", [1, 2])
def test_a_decode_step_that_grows_its_cache_is_exact_and_shares_bucket_programs(new_tokens):
    # A dynamic KV cache: cat([past keys, new keys]) along the padded length.
    # The new keys must land just after the real past ones, not after the
    # padding, and the grown cache comes back at its real length.
    def step(past_k, past_v, x):
        b, t, _ = x.shape
        k = v = q = x.view(b, t, 2, 3).transpose(1, 2)
        keys, values = torch.cat([past_k, k], dim=2), torch.cat([past_v, v], dim=2)
        return F.scaled_dot_product_attention(q, keys, values).transpose(1, 2).flatten(2), keys, values

    compiled = torch.compile(step, backend="tpu", dynamic=True)
    g = torch.Generator().manual_seed(0)
    past_k, past_v = torch.randn(2, 2, 5, 3, generator=g), torch.randn(2, 2, 5, 3, generator=g)
    tk, tv = past_k.to(TPU), past_v.to(TPU)
    fetched = []
    with torch.no_grad():
        for _ in range(7 if new_tokens == 1 else 6):
            x = torch.randn(2, new_tokens, 6, generator=g)
            want = step(past_k, past_v, x)
            before = programs_fetched()
            got = compiled(tk, tv, x.to(TPU))
            fetched.append(programs_fetched() - before)
            for a, b in zip(got, want):
                torch.testing.assert_close(a.cpu(), b, rtol=1e-5, atol=1e-5)
            past_k, past_v = want[1], want[2]
            tk, tv = got[1], got[2]
    # Past lengths 5 to 11 (or 15) fall in buckets 8 and 16: one program
    # each (fewer if another test's process left them in the disk tier),
    # where the per-size path compiles one per length.
    assert sum(fetched) <= 2 and fetched[-1] == 0, fetched
