"""torch.compile(backend="tpu"): results against PyTorch on CPU, the same
function compiled with aot_eager on CPU (the same ATen graphs, CPU kernels),
and eager tpu."""
from __future__ import annotations

import copy

import pytest
import torch
import torch._dynamo

from torch_tpu import debug

TPU = torch.device("tpu")


@pytest.fixture(autouse=True)
def _reset_dynamo():
    torch._dynamo.reset()
    yield
    torch._dynamo.reset()


def test_function_matches_cpu_and_reuses_the_program():
    def f(x, y):
        return torch.sin(x) * y + x.mean(0)

    x, y = torch.randn(8, 5), torch.randn(5)
    cf = torch.compile(f, backend="tpu")
    torch.testing.assert_close(cf(x.to(TPU), y.to(TPU)).cpu(), f(x, y))
    before = debug.metrics()
    x2 = torch.randn(8, 5)
    torch.testing.assert_close(cf(x2.to(TPU), y.to(TPU)).cpu(), f(x2, y))
    after = debug.metrics()
    assert after["compiles"] == before["compiles"]  # second call: guards, then the cached program
    assert after["flushes"] - before["flushes"] == 1
    assert after["fused_cache_hits"] - before["fused_cache_hits"] == 1


def test_forward_and_backward():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.GELU(), torch.nn.LayerNorm(16), torch.nn.Linear(16, 3))
    mt = copy.deepcopy(m).to(TPU)
    x = torch.randn(4, 6)
    loss_c = m(x).square().mean()
    loss_c.backward()
    cm = torch.compile(mt, backend="tpu")
    loss_t = cm(x.to(TPU)).square().mean()
    loss_t.backward()
    torch.testing.assert_close(loss_t.cpu(), loss_c)
    for p, q in zip(mt.parameters(), m.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad)


def _train(dev, backend, steps=5, seed=0):
    torch.manual_seed(seed)
    m = torch.nn.Sequential(
        # No bias before BatchNorm: its gradient is zero up to rounding, which
        # AdamW's normalisation would blow up to +-lr on any backend.
        torch.nn.Linear(12, 32, bias=False), torch.nn.BatchNorm1d(32), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(32, 4)
    ).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1)
    X, Y = torch.randn(16, 12, generator=g), torch.randint(0, 4, (16,), generator=g)
    x, y = X.to(dev), Y.to(dev)

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(m(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    if backend:
        step = torch.compile(step, backend=backend)
    losses = [step() for _ in range(steps)]
    return [float(v) for v in losses], m


def test_training_step_with_adamw_matches_aot_eager_on_cpu():
    # Dropout draws from each device's own generator, so the reference for
    # a dropout model is eager tpu; without dropout CPU's aot_eager is.
    ref, mc = _train("cpu", "aot_eager", seed=3)
    got, mt = _train(TPU, "tpu", seed=3)
    eager, me = _train(TPU, None, seed=3)
    # Same graphs, so same masks as eager tpu: compiled RNG advances the generator as eager does.
    torch.testing.assert_close(torch.tensor(got), torch.tensor(eager), rtol=1e-5, atol=1e-5)
    for p, q in zip(mt.parameters(), me.parameters()):
        torch.testing.assert_close(p.cpu(), q.cpu(), rtol=1e-5, atol=1e-5)
    for b, c in zip(mt.buffers(), me.buffers()):  # BatchNorm running stats: mutated graph inputs
        torch.testing.assert_close(b.cpu(), c.cpu(), rtol=1e-5, atol=1e-5)
    assert len(ref) == len(got)


def test_training_without_dropout_matches_cpu():
    def train(dev, backend):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(10, 24), torch.nn.Tanh(), torch.nn.Linear(24, 2)).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        x = torch.randn(8, 10, generator=torch.Generator().manual_seed(2)).to(dev)

        def step():
            opt.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            return loss.detach()

        step = torch.compile(step, backend=backend)
        return [float(step()) for _ in range(5)], m

    ref, mc = train("cpu", "aot_eager")
    got, mt = train(TPU, "tpu")
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=1e-5, atol=1e-5)
    for p, q in zip(mt.parameters(), mc.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-5)


def test_graph_break_falls_back_to_eager_and_explain_works():
    def f(x):
        y = x * 2
        if y.sum() > 0:  # data-dependent control flow: a graph break
            return y + 1
        return y - 1

    x = torch.randn(10)
    cf = torch.compile(f, backend="tpu")
    torch.testing.assert_close(cf(x.to(TPU)).cpu(), f(x))
    torch.testing.assert_close(cf((-x.abs() - 1).to(TPU)).cpu(), f(-x.abs() - 1))
    exp = torch._dynamo.explain(f)(x.to(TPU))
    assert exp.graph_break_count >= 1
    assert exp.graph_count >= 1


def test_options():
    seen = []
    cf = torch.compile(lambda x: x.exp() + 1, backend="tpu", options={"debug_callback": seen.append, "name": "myfn"})
    x = torch.randn(3)
    torch.testing.assert_close(cf(x.to(TPU)).cpu(), x.exp() + 1)
    assert len(seen) == 1 and isinstance(seen[0], torch.fx.GraphModule)
    bad = torch.compile(lambda x: x + 1, backend="tpu", options={"fast": True})
    with pytest.raises(Exception, match="unknown options"):
        bad(x.to(TPU))


def test_default_backend_says_to_use_tpu():
    cf = torch.compile(lambda x: x.sin() + 1)
    with pytest.raises(Exception, match='backend="tpu"'):
        cf(torch.randn(4, device=TPU))


def test_compiled_graph_inside_fused_eager():
    x = torch.randn(6)
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        a = x.to(TPU) * 3  # pending
        cf = torch.compile(lambda t: t.cos() * 2, backend="tpu")
        r = cf(a) + 1
        torch.testing.assert_close(r.cpu(), (x * 3).cos() * 2 + 1)
