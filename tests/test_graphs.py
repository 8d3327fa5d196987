"""Graph capture and replay (torch.tpu.graph, torch.tpu.TPUGraph,
torch.accelerator.Graph): a captured region is one program, replayed on the
tensors it touched. A region holding the optimizer step of a large enough
model (torch_tpu._eager._split_min_bytes) is cut before the step into two
programs. Every result is compared with PyTorch on CPU running the same
steps eagerly."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import torch_tpu
from torch_tpu import debug

TPU = torch.device("tpu")


def _train_step(model, opt, x, y):
    def step():
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss.detach()

    return step


def _mlp_step(device, opt_cls=torch.optim.AdamW, **opt_kw):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 5)).to(device)
    opt = opt_cls(model.parameters(), lr=1e-2, **opt_kw)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(8, 16, generator=g).to(device)
    y = torch.randint(0, 5, (8,), generator=g).to(device)
    return model, opt, x, y, _train_step(model, opt, x, y)


@pytest.fixture
def always_split(monkeypatch):
    """Cuts every captured region before optimizer.step(), whatever the size
    of the parameters: the tests of the cut use small tensors."""
    monkeypatch.setattr(torch_tpu._eager, "_split_min_bytes", 0)


@pytest.mark.parametrize("split", [False, True], ids=["one_program", "split"])
@pytest.mark.parametrize("opt_cls,kw", [(torch.optim.AdamW, {}), (torch.optim.SGD, {"momentum": 0.9}),
                                        (torch.optim.Adam, {"foreach": False})])
def test_whole_training_step_replays_and_matches_cpu(opt_cls, kw, split, monkeypatch):
    if split:
        monkeypatch.setattr(torch_tpu._eager, "_split_min_bytes", 0)
    cpu_model, _, _, _, cpu_step = _mlp_step("cpu", opt_cls, **kw)
    cap = {"capturable": True} if opt_cls is not torch.optim.SGD else {}
    model, _, _, _, step = _mlp_step(TPU, opt_cls, **kw, **cap)
    expected = [cpu_step().item() for _ in range(8)]
    got = [step().item() for _ in range(3)]  # warm-up: optimizer state exists before capture
    g = torch.tpu.TPUGraph()
    with torch.tpu.graph(g):
        static_loss = step()
    before = debug.metrics()
    for _ in range(5):
        g.replay()
        got.append(static_loss.item())
    after = debug.metrics()
    torch.testing.assert_close(torch.tensor(got), torch.tensor(expected), rtol=1e-4, atol=1e-5)
    for p_cpu, p_tpu in zip(cpu_model.parameters(), model.parameters()):
        torch.testing.assert_close(p_tpu.cpu(), p_cpu, rtol=1e-4, atol=1e-5)
    # This model is small, so the whole step is one program. Split: forward
    # and backward (on the autograd thread) as one program, the optimizer
    # step as another, two executions per replay.
    per_replay = 2 if split else 1
    assert after["executions"] - before["executions"] == 5 * per_replay
    assert after["replays"] - before["replays"] == 5 * per_replay  # counts captured programs run
    assert after["compiles"] == before["compiles"]


def test_capture_runs_nothing_and_new_inputs_go_through_the_static_tensors():
    torch.manual_seed(0)
    lin = nn.Linear(4, 3)
    static_x = torch.zeros(2, 4, device=TPU)
    tlin = nn.Linear(4, 3).to(TPU)
    tlin.load_state_dict(lin.state_dict())
    acc = torch.zeros(3, device=TPU)
    g = torch.tpu.TPUGraph()
    with torch.no_grad(), torch.tpu.graph(g):
        static_y = tlin(static_x).relu()
        acc.add_(static_y.sum(0))
    # As with CUDA graphs, capturing runs nothing: outputs are not computed
    # yet and in-place targets keep their values.
    torch.testing.assert_close(acc.cpu(), torch.zeros(3))
    expected_acc = torch.zeros(3)
    for i in range(3):
        batch = torch.randn(2, 4)
        static_x.copy_(batch)
        g.replay()
        want = lin(batch).relu().detach()
        expected_acc += want.sum(0)
        torch.testing.assert_close(static_y.cpu(), want)
    torch.testing.assert_close(acc.cpu(), expected_acc)


def test_batchnorm_buffers_update_on_every_replay():
    def make(device):
        torch.manual_seed(0)
        m = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(),
                          nn.Linear(4 * 6 * 6, 2)).to(device)
        opt = torch.optim.SGD(m.parameters(), lr=0.05, momentum=0.9)
        x = torch.randn(4, 3, 6, 6, generator=torch.Generator().manual_seed(3)).to(device)
        y = torch.tensor([0, 1, 1, 0]).to(device)
        return m, _train_step(m, opt, x, y)

    cm, cstep = make("cpu")
    tm, tstep = make(TPU)
    for _ in range(6):
        cstep()
    tstep()
    g = torch.tpu.TPUGraph()
    with torch.tpu.graph(g):
        tstep()
    for _ in range(5):
        g.replay()
    bn_c, bn_t = cm[1], tm[1]
    torch.testing.assert_close(bn_t.running_mean.cpu(), bn_c.running_mean, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(bn_t.running_var.cpu(), bn_c.running_var, rtol=1e-4, atol=1e-5)
    assert bn_t.num_batches_tracked.item() == bn_c.num_batches_tracked.item() == 6
    for a, b in zip(cm.parameters(), tm.parameters()):
        torch.testing.assert_close(b.cpu(), a, rtol=1e-4, atol=1e-5)


def test_accelerator_graph_api_and_is_capturing():
    x = torch.arange(4.0, device=TPU)
    g = torch.accelerator.Graph()
    seen = []
    with g:
        seen.append(torch.accelerator.current_stream().is_capturing())
        seen.append(torch.tpu.is_current_stream_capturing())
        x.mul_(2).add_(1)
    assert seen == [True, True]
    assert not torch.tpu.is_current_stream_capturing()
    torch.testing.assert_close(x.cpu(), torch.arange(4.0))
    g.replay()
    g.replay()
    torch.testing.assert_close(x.cpu(), (torch.arange(4.0) * 2 + 1) * 2 + 1)
    assert isinstance(g.pool(), tuple)
    torch.accelerator.empty_host_cache()  # Graph.__enter__ calls it: it crashed without a tpu host allocator


def test_host_read_inside_capture_raises_and_the_work_runs_eagerly():
    x = torch.ones(3, device=TPU)
    g = torch.tpu.TPUGraph()
    with pytest.raises(RuntimeError, match="tpu graph capture failed: a host read"):
        with torch.tpu.graph(g):
            x.add_(1)
            if x.sum().item() > 0:  # a host read: not capturable
                x.mul_(3)
    # What was recorded ran, as it would have eagerly.
    torch.testing.assert_close(x.cpu(), torch.full((3,), 6.0))
    assert not torch.tpu.is_current_stream_capturing()
    assert torch.tpu.eager_mode == torch.tpu.EagerMode.DEFER_NEVER
    with pytest.raises(RuntimeError, match="before a successful capture"):
        g.replay()
    # The same graph object can capture again.
    with torch.tpu.graph(g):
        x.add_(1)
    g.replay()
    torch.testing.assert_close(x.cpu(), torch.full((3,), 7.0))


@pytest.mark.parametrize("block", ["torch.tpu.graph", "TPUGraph"])
def test_exception_inside_the_block_aborts_the_capture(block):
    x = torch.ones(2, device=TPU)
    g = torch.tpu.TPUGraph()
    with pytest.raises(ValueError, match="boom"):
        with torch.tpu.graph(g) if block == "torch.tpu.graph" else g:  # TPUGraph is a context manager too
            x.add_(1)
            raise ValueError("boom")
    assert not torch.tpu.is_current_stream_capturing()
    torch.testing.assert_close(x.cpu(), torch.full((2,), 2.0))
    torch.testing.assert_close((x * 2).cpu(), torch.full((2,), 4.0))  # strict eager again


def test_non_capturable_adam_is_refused_like_cuda():
    _, _, _, _, step = _mlp_step(TPU, torch.optim.AdamW)
    step()
    g = torch.tpu.TPUGraph()
    with pytest.raises(RuntimeError, match="capturable is False"):
        with torch.tpu.graph(g):
            step()


def test_nested_capture_and_replay_during_capture_are_refused():
    x = torch.ones(2, device=TPU)
    g1, g2, g3 = torch.tpu.TPUGraph(), torch.tpu.TPUGraph(), torch.tpu.TPUGraph()
    with torch.tpu.graph(g1):
        x.add_(1)
    with pytest.raises(RuntimeError, match="already underway"):
        with torch.tpu.graph(g2):
            g3.capture_begin()
    with pytest.raises(RuntimeError, match="cannot be replayed while"):
        with torch.tpu.graph(g2):
            g1.replay()
    assert not torch.tpu.is_current_stream_capturing()


def test_dropout_draws_new_masks_per_replay_and_reproduces_from_the_seed():
    def run():
        torch.manual_seed(123)
        x = torch.ones(4096, device=TPU)
        g = torch.tpu.TPUGraph()
        with torch.tpu.graph(g):
            y = F.dropout(x, p=0.5, training=True)
        outs = []
        for _ in range(3):
            g.replay()
            outs.append(y.cpu().clone())
        return outs

    a, b = run(), run()
    for u, v in zip(a, b):
        torch.testing.assert_close(u, v)  # same seed, same numbers
    assert not torch.equal(a[0], a[1])  # each replay draws a new mask
    for u in a:
        kept = (u != 0).float().mean().item()
        assert 0.45 < kept < 0.55
        torch.testing.assert_close(u[u != 0], torch.full_like(u[u != 0], 2.0))


def test_freed_tensors_stay_owned_by_the_graph():
    x = torch.full((3,), 2.0, device=TPU)
    state = torch.zeros(3, device=TPU)
    g = torch.tpu.TPUGraph()
    with torch.tpu.graph(g):
        state.add_(x)
    del x  # the graph keeps the value it reads
    import gc

    gc.collect()
    for _ in range(3):
        g.replay()
    torch.testing.assert_close(state.cpu(), torch.full((3,), 6.0))
    out = torch.zeros(2, device=TPU)
    g2 = torch.tpu.TPUGraph()
    with torch.tpu.graph(g2):
        tmp = out + 1  # noqa: F841 (written by the graph, freed after capture)
        out.copy_(tmp * 2)
    del tmp
    g2.replay()
    torch.testing.assert_close(out.cpu(), torch.full((2,), 2.0))
    del g2, g
    gc.collect()
    torch.testing.assert_close((state + 1).cpu(), torch.full((3,), 7.0))


def test_debug_dump_writes_stablehlo(tmp_path):
    x = torch.ones(2, 2, device=TPU)
    g = torch.tpu.TPUGraph()
    g.enable_debug_mode()
    with torch.tpu.graph(g):
        x.mul_(x)
    path = tmp_path / "graph.mlir"
    g.debug_dump(str(path))
    text = path.read_text()
    assert "stablehlo.multiply" in text and "recorded ops" in text
    h = torch.tpu.TPUGraph()
    with pytest.raises(RuntimeError, match="enable_debug_mode"):
        h.debug_dump(str(path))


def test_compiled_function_inside_a_capture():
    torch.manual_seed(0)
    lin = nn.Linear(8, 4)
    tlin = nn.Linear(8, 4).to(TPU)
    tlin.load_state_dict(lin.state_dict())
    f = torch.compile(lambda t: torch.tanh(tlin(t)) * 2, backend="tpu")
    static_x = torch.zeros(3, 8, device=TPU)
    with torch.no_grad():
        f(static_x)  # compiled and captured by the backend first
        g = torch.tpu.TPUGraph()
        with torch.tpu.graph(g):
            static_y = f(static_x)
    batch = torch.randn(3, 8)
    static_x.copy_(batch)
    g.replay()
    torch.testing.assert_close(static_y.cpu(), (torch.tanh(lin(batch)) * 2).detach(), rtol=1e-5, atol=1e-5)


def test_resizing_a_captured_tensor_detaches_it_from_the_graph():
    # resize_ gives the tensor new memory; the graph keeps the old storage as
    # its own (a CUDA graph would write freed memory), so neither corrupts the other.
    x = torch.ones(4, device=TPU)
    g = torch.tpu.TPUGraph()
    with torch.tpu.graph(g):
        x.add_(1)
    x.resize_(6)
    g.replay()
    torch.testing.assert_close(x.cpu()[:4], torch.ones(4))


def test_graph_capture_from_fused_mode_restores_it():
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        x = torch.ones(2, device=TPU)
        x.add_(1)  # pending when the capture starts: not part of the graph
        g = torch.tpu.TPUGraph()
        with torch.tpu.graph(g):
            x.mul_(3)
        assert torch.tpu.eager_mode == torch.tpu.EagerMode.DEFER_AND_FUSE
        g.replay()
        torch.testing.assert_close(x.cpu(), torch.full((2,), 6.0))


def test_module_names_mirror_torch_cuda():
    for name in ("TPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing"):
        assert hasattr(torch.tpu, name)
        assert name in torch_tpu.graphs.__all__
    assert isinstance(torch.tpu.graph_pool_handle(), tuple)


def _cut_region():
    """A region with an optimizer step in the middle, so it is captured as
    two programs: `p` is updated by the step, `x` and `out` are plain
    tensors."""
    p = torch.zeros(3, device=TPU, requires_grad=True)
    p.grad = torch.ones(3, device=TPU)
    opt = torch.optim.SGD([p], lr=1.0)
    x = torch.arange(3.0, device=TPU)
    out = torch.zeros(3, device=TPU)
    return p, opt, x, out


def test_values_cross_the_cut_even_when_freed_inside_the_region(always_split):
    p, opt, x, out = _cut_region()
    g = torch.tpu.TPUGraph()
    with torch.tpu.graph(g):
        x.add_(1)
        tmp = x * 2  # written by the first program
        opt.step()  # the cut: p -= grad
        out.copy_(tmp + p)  # the second program reads tmp
        del tmp  # freed before the capture ends: the graph keeps it
    torch.testing.assert_close(out.cpu(), torch.zeros(3))  # capturing ran nothing
    for k in range(1, 4):
        g.replay()
        xk = torch.arange(3.0) + k
        torch.testing.assert_close(x.cpu(), xk)
        torch.testing.assert_close(p.detach().cpu(), torch.full((3,), -float(k)))
        torch.testing.assert_close(out.cpu(), xk * 2 - k)


def test_host_read_after_the_cut_runs_both_parts_eagerly(always_split):
    p, opt, x, out = _cut_region()
    g = torch.tpu.TPUGraph()
    with pytest.raises(RuntimeError, match="tpu graph capture failed: a host read"):
        with torch.tpu.graph(g):
            tmp = x + 10
            opt.step()
            seen = tmp.sum().item()  # a value of the first part, read on the host
            out.copy_(tmp + p)
    assert seen == 33.0
    torch.testing.assert_close(p.detach().cpu(), torch.full((3,), -1.0))
    torch.testing.assert_close(out.cpu(), torch.arange(3.0) + 9)
    assert not torch.tpu.is_current_stream_capturing()


def test_exception_after_the_cut_runs_both_parts_eagerly(always_split):
    p, opt, x, out = _cut_region()
    g = torch.tpu.TPUGraph()
    with pytest.raises(ValueError, match="boom"):
        with torch.tpu.graph(g):
            x.mul_(2)
            opt.step()
            out.copy_(x + p)
            raise ValueError("boom")
    torch.testing.assert_close(x.cpu(), torch.arange(3.0) * 2)
    torch.testing.assert_close(p.detach().cpu(), torch.full((3,), -1.0))
    torch.testing.assert_close(out.cpu(), torch.arange(3.0) * 2 - 1)
    x.add_(1)  # the storages are usable again
    torch.testing.assert_close(x.cpu(), torch.arange(3.0) * 2 + 1)
