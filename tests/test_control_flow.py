"""Data-dependent control flow inside compiled graphs: a captured program
must never bake in a value read on the host while it was recorded."""
from __future__ import annotations

import pytest
import torch

TPU = torch.device("tpu")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _branchy(p, x):
    return torch.cond(p.sum() > 0, lambda x: (x.sin() * 2).sum(), lambda x: (x.cos() - 1).sum(), (x,))


@pytest.mark.parametrize("signs", [(1, -1, 1, -1), (-1, 1, 1, -1)])
def test_cond_gradient_follows_the_branch_taken_on_every_call(signs):
    # The backward graph takes the forward's predicate as an input and reads
    # it on the host to choose a branch; that read flushed nothing, so the
    # first call's branch was captured and replayed: from the second call
    # with the other branch, x.grad was the wrong branch's (off by up to
    # 2.2) while the loss was right.
    cf = torch.compile(_branchy, backend="tpu")
    x0 = torch.randn(5)
    for s in signs:
        p = torch.full((3,), float(s))
        x, xt = x0.clone().requires_grad_(), x0.to(TPU).requires_grad_()
        expected = _branchy(p, x)
        expected.backward()
        got = cf(p.to(TPU), xt)
        got.backward()
        torch.testing.assert_close(got.cpu(), expected.detach())
        torch.testing.assert_close(xt.grad.cpu(), x.grad)


def test_an_input_read_on_the_host_is_not_baked_into_a_captured_program():
    # The same hazard without torch.cond: a graph whose op reads an input's
    # value on the host (here through torch.cond in an inference graph).
    def f(flag, x):
        return torch.cond(flag, lambda x: x + 1, lambda x: x - 1, (x,))

    cf = torch.compile(f, backend="tpu")
    x = torch.randn(4)
    for flag in (True, False, True, False):
        t = torch.tensor(flag)
        torch.testing.assert_close(cf(t.to(TPU), x.to(TPU)).cpu(), f(t, x))


# --- loops compiled as stablehlo.while (torch_tpu/_control_flow.py) -----------

from torch._higher_order_ops.scan import scan  # noqa: E402
from torch._higher_order_ops.while_loop import while_loop  # noqa: E402

from torch_tpu import _control_flow, debug  # noqa: E402


@pytest.fixture
def loops():
    """The loop counters, reset; the test fails if any body ran op by op."""
    _control_flow.stats["fallbacks"].clear()
    for k in _control_flow.stats["loops"]:
        _control_flow.stats["loops"][k] = 0
    yield _control_flow.stats["loops"]
    assert not _control_flow.stats["fallbacks"], _control_flow.stats["fallbacks"]


def _power_iter(n, x, w):
    def cond(i, x):
        return i < n

    def body(i, x):
        return i + 1, torch.tanh(x @ w) * 1.5

    return while_loop(cond, body, (torch.zeros((), dtype=torch.int64, device=x.device), x))


@pytest.mark.parametrize("compiled", [False, True])
def test_while_loop_is_one_loop_whatever_its_trip_count(loops, compiled):
    # The trip count is a device value: a new count is the same program.
    f = torch.compile(_power_iter, backend="tpu") if compiled else _power_iter
    x, w = torch.randn(3, 4), torch.randn(4, 4)
    for i, n in enumerate((5, 2, 9)):
        n_t = torch.tensor(n)
        expected = _power_iter(n_t, x, w)
        before = debug.metrics()["cache_misses"]
        got = f(n_t.to(TPU), x.to(TPU), w.to(TPU))
        for g, e in zip(got, expected):
            torch.testing.assert_close(g.cpu(), e)
        if i > 0:
            assert debug.metrics()["cache_misses"] == before, "a new trip count compiled a new program"
    assert loops["while_loop"] >= 1


def _matches_cpu_with_gradients(f, inputs, compiled):
    """f's scalar result and the gradient of every input on tpu (eager, or
    compiled with backend="tpu") against f on CPU."""
    cpu = [t.clone().requires_grad_() for t in inputs]
    tpu = [t.to(TPU).requires_grad_() for t in inputs]
    expected = f(*cpu)
    expected.backward()
    got = (torch.compile(f, backend="tpu") if compiled else f)(*tpu)
    got.backward()
    torch.testing.assert_close(got.cpu(), expected.detach())
    for t, c in zip(tpu, cpu):
        torch.testing.assert_close(t.grad.cpu(), c.grad)


def _rnn(h0, xs, w, u):
    def step(h, x):
        h = torch.tanh(h @ w + x @ u)
        return h, h.sum(-1)

    return scan(step, h0, xs)


@pytest.mark.parametrize("compiled", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
def test_scan_forward_and_backward_match_cpu(loops, compiled, reverse):
    def f(h0, xs, w, u):
        if reverse:
            def step(h, x):
                h = torch.tanh(h @ w + x @ u)
                return h, h.sum(-1)

            last, ys = scan(step, h0, xs, reverse=True)
        else:
            last, ys = _rnn(h0, xs, w, u)
        return (last ** 2).sum() + (ys * torch.arange(ys.shape[0], device=ys.device)[:, None]).sum()

    _matches_cpu_with_gradients(f, [torch.randn(2, 4), torch.randn(7, 2, 3), torch.randn(4, 4) * 0.5,
                                    torch.randn(3, 4) * 0.5], compiled)
    assert loops["scan"] >= 2  # forward and backward


@pytest.mark.parametrize("compiled", [False, True])
def test_cond_runs_the_branch_taken_as_a_loop(loops, compiled):
    def f(p, x):
        return torch.cond(p.sum() > 0, lambda x: (x.sin() * 2).sum(), lambda x: (x.cos() - 1).sum(), (x,))

    g = torch.compile(f, backend="tpu") if compiled else f
    x0 = torch.randn(5)
    for s in (1, -1, 1):
        p = torch.full((3,), float(s))
        x, xt = x0.clone().requires_grad_(), x0.to(TPU).requires_grad_()
        expected = f(p, x)
        expected.backward()
        got = g(p.to(TPU), xt)
        got.backward()
        torch.testing.assert_close(got.cpu(), expected.detach())
        torch.testing.assert_close(xt.grad.cpu(), x.grad)
    assert loops["cond"] >= 1


@pytest.mark.parametrize("compiled", [False, True])
def test_map_is_a_loop_with_gradients(loops, compiled):
    from torch._higher_order_ops.map import map as tmap

    def f(xs, w):
        return tmap(lambda x, w: torch.sin(x @ w) * 2, xs, w).square().sum()

    _matches_cpu_with_gradients(f, [torch.randn(6, 3, 4), torch.randn(4, 5)], compiled)
    assert loops["map"] >= 1


def test_a_body_the_recorder_cannot_hold_runs_op_by_op(caplog):
    # .item() inside the body needs the value on the host: PyTorch's own
    # loop runs instead, with the same result, and the reason is logged.
    def body(i, x):
        return i + 1, x * (2.0 if x.sum().item() > 0 else 3.0)

    def f(x):
        # The op itself: while_loop() would trace the body with dynamo,
        # which rejects the .item() before any device sees it.
        from torch._higher_order_ops.while_loop import while_loop_op

        return while_loop_op(lambda i, x: i < 3, body, (torch.zeros((), dtype=torch.int64, device=x.device), x), ())

    x = torch.randn(4).abs()
    _control_flow.stats["fallbacks"].clear()
    with caplog.at_level("DEBUG", logger="torch_tpu"):
        got = f(x.to(TPU))
    torch.testing.assert_close(got[1].cpu(), f(x)[1])
    assert _control_flow.stats["fallbacks"] and "runs op by op" in caplog.text
    _control_flow.stats["fallbacks"].clear()


class _Block(torch.nn.Module):
    def __init__(self, d):
        super().__init__()
        self.ln = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, 4 * d)
        self.out = torch.nn.Linear(4 * d, d)

    def forward(self, x, scale=1.0):
        return x + scale * self.out(torch.nn.functional.gelu(self.fc(self.ln(x))))


def _twin_stacks(block, depth):
    """Two stacks of `depth` blocks of width 8 with the same weights: one on
    the CPU (the reference), one on tpu."""
    torch.manual_seed(0)
    ref = torch.nn.ModuleList([block(8) for _ in range(depth)])
    mine = torch.nn.ModuleList([block(8) for _ in range(depth)])
    mine.load_state_dict(ref.state_dict())
    return ref, mine.to(TPU)


@pytest.mark.parametrize("compiled", [False, True])
def test_scan_layers_trains_as_the_unrolled_stack_on_cpu(loops, compiled):
    import torch_tpu

    ref, mine = _twin_stacks(_Block, 4)
    opt_r = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt_m = torch.optim.AdamW(mine.parameters(), lr=1e-2)

    def unrolled(x):
        for b in ref:
            x = b(x, scale=0.5)
        return x

    def scanned(x):
        return torch_tpu.scan_layers(mine, x, scale=0.5)

    run = torch.compile(scanned, backend="tpu") if compiled else scanned
    for _ in range(3):
        x = torch.randn(2, 5, 8)
        loss_r = unrolled(x).pow(2).mean()
        loss_r.backward()
        opt_r.step()
        opt_r.zero_grad()
        loss_m = run(x.to(TPU)).pow(2).mean()
        loss_m.backward()
        opt_m.step()
        opt_m.zero_grad()
        torch.testing.assert_close(loss_m.cpu(), loss_r.detach())
    for (n, p), q in zip(ref.named_parameters(), mine.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), msg=n)
    assert loops["scan"] >= 2


def test_scan_layers_program_does_not_grow_with_depth(fresh_dynamo):
    import torch_tpu

    sizes = []
    for depth in (2, 6):
        torch._dynamo.reset()
        layers = torch.nn.ModuleList([_Block(8) for _ in range(depth)]).to(TPU)
        f = torch.compile(lambda x: torch_tpu.scan_layers(layers, x).sum(), backend="tpu")
        before = debug.metrics()["ops_dispatched"]
        f(torch.randn(2, 8, device=TPU)).backward()
        sizes.append(debug.metrics()["ops_dispatched"] - before)
    # Only the per-layer weight stacking (one op per parameter tensor and
    # layer count) differs; the block itself is recorded once.
    assert sizes[1] < sizes[0] * 1.5, sizes


def test_scan_layers_rejects_layers_that_differ():
    import torch_tpu

    layers = [torch.nn.Linear(4, 4), torch.nn.Linear(4, 5)]
    with pytest.raises(ValueError, match="layer 1"):
        torch_tpu.scan_layers(layers, torch.randn(2, 4))


@pytest.mark.parametrize("compiled", [False, True])
def test_scan_layers_runs_hugging_face_llama_decoder_layers(loops, compiled):
    import torch_tpu

    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96)
    ref = transformers.LlamaForCausalLM(cfg)
    mine = transformers.LlamaForCausalLM(cfg)
    mine.load_state_dict(ref.state_dict())
    mine.to(TPU)

    def logits(model, ids, scanned):
        inner = model.model
        h = inner.embed_tokens(ids)
        pos = torch.arange(ids.shape[1], device=ids.device)[None]
        pe = inner.rotary_emb(h, pos)
        if scanned:
            h = torch_tpu.scan_layers(inner.layers, h, position_embeddings=pe, position_ids=pos)
        else:
            for layer in inner.layers:
                out = layer(h, position_embeddings=pe, position_ids=pos)
                h = out[0] if isinstance(out, tuple) else out
        return model.lm_head(inner.norm(h))

    ids = torch.randint(0, 96, (2, 7))
    expected = logits(ref, ids, False)
    expected.pow(2).mean().backward()
    run = torch.compile(logits, backend="tpu") if compiled else logits
    got = run(mine, ids.to(TPU), True)
    got.pow(2).mean().backward()
    torch.testing.assert_close(got.cpu(), expected.detach())
    for (n, p), q in zip(ref.named_parameters(), mine.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=n)
    assert loops["scan"] >= 2


class _CheckpointedBlock(_Block):
    def forward(self, x, scale=1.0):
        return torch.utils.checkpoint.checkpoint(super().forward, x, scale, use_reentrant=False)


def _checkpointed_twins():
    """Three checkpointed blocks on CPU (run forward and backward on x) and
    their tpu twins: (ref, mine, x, the CPU result)."""
    ref, mine = _twin_stacks(_CheckpointedBlock, 3)
    x = torch.randn(2, 5, 8)
    h = x
    for b in ref:
        h = b(h)
    h.sum().backward()
    return ref, mine, x, h.detach()


@pytest.mark.parametrize("compiled", [False, True])
def test_scan_layers_with_activation_checkpointing_matches_cpu(loops, compiled):
    import torch_tpu

    ref, mine, x, h = _checkpointed_twins()
    f = torch.compile(torch_tpu.scan_layers, backend="tpu") if compiled else torch_tpu.scan_layers
    got = f(mine, x.to(TPU))
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), h)
    for (n, p), q in zip(ref.named_parameters(), mine.parameters()):
        torch.testing.assert_close(q.grad.cpu(), p.grad, msg=n)
    assert loops["scan"] >= 2


def test_a_body_that_writes_an_outside_tensor_runs_op_by_op_and_writes_it():
    # Recorded as a loop, the write would land only inside the loop: the
    # recorder refuses it, and PyTorch's own loop writes it as on CPU.
    from torch._higher_order_ops.while_loop import while_loop_op

    outside = torch.zeros(3, device=TPU)

    def body(i, x):
        outside.fill_(5.0)
        return i + 1, x * 2

    _control_flow.stats["fallbacks"].clear()
    out = while_loop_op(lambda i, x: i < 3, body,
                        (torch.zeros((), dtype=torch.int64, device=TPU), torch.ones(3, device=TPU)), ())
    torch.testing.assert_close(out[1].cpu(), torch.full((3,), 8.0))
    torch.testing.assert_close(outside.cpu(), torch.full((3,), 5.0))
    assert any("not its own" in k for k in _control_flow.stats["fallbacks"])
    _control_flow.stats["fallbacks"].clear()


@pytest.mark.parametrize("compiled", [False, True])
def test_scanned_layers_train_as_the_unrolled_stack_on_cpu(loops, compiled):
    # Stacked weights: the optimizer steps one [depth, ...] tensor per block
    # parameter. Losses, then every layer's weights (read back through the
    # per-layer state dict), equal the unrolled CPU stack's under AdamW.
    import torch_tpu

    ref, mine = _twin_stacks(_Block, 4)
    scanned = torch_tpu.ScannedLayers(mine)
    assert len(list(scanned.parameters())) == len(list(_Block(8).parameters()))
    opt_r = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    opt_m = torch.optim.AdamW(scanned.parameters(), lr=1e-2)

    def step(x):
        loss = scanned(x, scale=0.5).pow(2).mean()
        loss.backward()
        opt_m.step()
        opt_m.zero_grad()
        return loss

    run = torch.compile(step, backend="tpu") if compiled else step
    for _ in range(3):
        x = torch.randn(2, 5, 8)
        h = x
        for b in ref:
            h = b(h, scale=0.5)
        loss_r = h.pow(2).mean()
        loss_r.backward()
        opt_r.step()
        opt_r.zero_grad()
        torch.testing.assert_close(run(x.to(TPU)).detach().cpu(), loss_r.detach())
    got = scanned.state_dict()
    assert list(got) == list(ref.state_dict())
    for n, p in ref.state_dict().items():
        torch.testing.assert_close(got[n].cpu(), p, msg=n)
    assert loops["scan"] >= 2


def test_scanned_layers_state_dict_round_trips_with_the_module_list():
    # A checkpoint of the unrolled stack loads into the stacked form and back;
    # incomplete ones report their missing keys as load_state_dict does.
    import torch_tpu

    torch.manual_seed(0)
    stack = torch.nn.ModuleList([_Block(8) for _ in range(3)])
    scanned = torch_tpu.ScannedLayers([_Block(8) for _ in range(3)])
    scanned.load_state_dict(stack.state_dict())
    x = torch.randn(2, 8)
    h = x
    for b in stack:
        h = b(h)
    torch.testing.assert_close(scanned(x), h)
    back = torch.nn.ModuleList([_Block(8) for _ in range(3)])
    back.load_state_dict(scanned.state_dict())
    for (n, p), q in zip(stack.named_parameters(), back.parameters()):
        torch.testing.assert_close(q, p, msg=n)
    partial = {k: v for k, v in stack.state_dict().items() if not k.startswith("2.")}
    result = scanned.load_state_dict(partial, strict=False)
    assert "stacked.fc__weight" in result.missing_keys and "0.fc.weight" in result.unexpected_keys
    with pytest.raises(RuntimeError, match="Missing key"):
        scanned.load_state_dict(partial)


def test_scanned_layers_hold_buffers_and_follow_train_and_eval():
    # BatchNorm's running statistics are stacked buffers; eval() reaches the
    # block's code (the running statistics are read, not the batch's).
    import torch_tpu

    torch.manual_seed(0)
    blocks = [torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)) for _ in range(2)]
    for b in blocks:
        b[1].running_mean.uniform_()
    h = x = torch.randn(6, 4)
    for b in blocks:
        b.eval()
        h = b(h)
    scanned = torch_tpu.ScannedLayers(blocks).eval()
    assert "1.1.running_mean" in scanned.state_dict()
    torch.testing.assert_close(scanned.to(TPU)(x.to(TPU)).cpu(), h)


def test_scanned_layers_rejects_layers_that_differ():
    import torch_tpu

    with pytest.raises(ValueError, match="one class"):
        torch_tpu.ScannedLayers([torch.nn.Linear(4, 4), torch.nn.ReLU()])
    with pytest.raises(ValueError, match="at least one"):
        torch_tpu.ScannedLayers([])


def test_a_scanned_layers_training_step_does_not_grow_with_depth(fresh_dynamo):
    # With the weights held stacked, nothing in a compiled AdamW step is per
    # layer: the ops recorded at depth 6 are those at depth 2. (scan_layers
    # adds a stack, a gradient split and an optimizer update per layer.)
    import torch_tpu

    sizes = []
    for depth in (2, 6):
        torch._dynamo.reset()
        torch.manual_seed(0)
        layers = torch_tpu.ScannedLayers([_Block(8) for _ in range(depth)]).to(TPU)
        opt = torch.optim.AdamW(layers.parameters(), lr=1e-2)

        @torch.compile(backend="tpu")
        def step(x):
            loss = layers(x).pow(2).mean()
            loss.backward()
            opt.step()
            opt.zero_grad()
            return loss

        before = debug.metrics()["ops_dispatched"]
        step(torch.randn(2, 8, device=TPU))
        sizes.append(debug.metrics()["ops_dispatched"] - before)
    assert sizes[0] == sizes[1], sizes


@pytest.mark.parametrize("compiled", [False, True])
def test_scanned_layers_with_activation_checkpointing_matches_cpu(loops, compiled):
    # Each layer's slice of a stacked gradient is that layer's gradient on CPU.
    import torch_tpu

    ref, mine, x, h = _checkpointed_twins()
    scanned = torch_tpu.ScannedLayers(mine)
    got = (torch.compile(scanned, backend="tpu") if compiled else scanned)(x.to(TPU))
    got.sum().backward()
    torch.testing.assert_close(got.cpu(), h)
    for name in ("ln.weight", "fc.weight", "out.bias"):
        grad = scanned.stacked[name.replace(".", "__")].grad.cpu()
        for i, b in enumerate(ref):
            torch.testing.assert_close(grad[i], b.get_parameter(name).grad, msg=f"{i}.{name}")
    assert loops["scan"] >= 2


def test_scanned_layers_run_hugging_face_llama_decoder_layers_and_pickle():
    # HF's decoder layers take rotary embeddings and position ids as keyword
    # arguments and return tuples. A pickled and reloaded module (torch.save
    # of the whole model) computes the same.
    import io

    import torch_tpu

    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96)
    inner = transformers.LlamaForCausalLM(cfg).model
    h = inner.embed_tokens(torch.randint(0, 96, (2, 7))).detach()
    pos = torch.arange(7)[None]
    pe = inner.rotary_emb(h, pos)
    expected = h
    for layer in inner.layers:
        out = layer(expected, position_embeddings=pe, position_ids=pos)
        expected = out[0] if isinstance(out, tuple) else out
    scanned = torch_tpu.ScannedLayers(inner.layers).to(TPU)
    buf = io.BytesIO()
    torch.save(scanned, buf)
    buf.seek(0)
    again = torch.load(buf, weights_only=False)
    for m in (scanned, again):
        got = m(h.to(TPU), position_embeddings=tuple(t.to(TPU) for t in pe), position_ids=pos.to(TPU))
        torch.testing.assert_close(got.cpu(), expected.detach())
