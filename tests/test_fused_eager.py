"""Fused eager (torch.tpu.EagerMode.DEFER_AND_FUSE): recorded ops run as one
program when a value is needed. Every result is compared with PyTorch on CPU."""
from __future__ import annotations

import pytest
import torch
from test_device import run_py

import torch_tpu
from torch_tpu import debug

TPU = torch.device("tpu")
EagerMode = torch.tpu.EagerMode


@pytest.fixture(autouse=True)
def fused():
    with torch.tpu.set_eager_mode(EagerMode.DEFER_AND_FUSE):
        yield
    assert torch.tpu.eager_mode == EagerMode.DEFER_NEVER


def metrics_delta(fn):
    before = debug.metrics()
    out = fn()
    after = debug.metrics()
    return out, {k: after[k] - before[k] for k in ("flushes", "fused_ops", "executions", "fused_cache_hits")}


def test_mode_api():
    assert torch.tpu.eager_mode == EagerMode.DEFER_AND_FUSE
    torch.tpu.eager_mode = EagerMode.DEFER_NEVER
    assert torch.tpu.get_eager_mode() == EagerMode.DEFER_NEVER
    torch.tpu.eager_mode = "DEFER_AND_FUSE"
    assert torch.tpu.eager_mode == EagerMode.DEFER_AND_FUSE
    with pytest.raises(ValueError, match="unknown eager mode"):
        torch.tpu.eager_mode = "FAST"
    with pytest.raises(ValueError, match="unknown eager mode"):
        torch.tpu.eager_mode = 7
    assert str(EagerMode.DEFER_AND_FUSE) == "EagerMode.DEFER_AND_FUSE"
    assert torch_tpu.EagerMode is EagerMode


def test_ops_are_deferred_until_a_value_is_needed():
    x = torch.randn(4, 5)
    a = x.to(TPU)

    def work():
        return (a * 2 + 1).relu().sum(0)

    r, d = metrics_delta(work)
    assert d["executions"] == 0 and d["flushes"] == 0 and d["fused_ops"] == 0
    got, d = metrics_delta(r.cpu)
    assert d["flushes"] == 1 and d["executions"] == 1 and d["fused_ops"] == 4
    torch.testing.assert_close(got, (x * 2 + 1).relu().sum(0))
    assert "host read: copy_to_host" in debug.metrics()["flush_reasons"]


def test_inplace_on_views_inside_a_graph():
    x = torch.randn(6, 8)
    a = x.to(TPU)
    for t in (x, a):
        v = t[1:5, ::2]
        v.mul_(3)
        t.t()[2].add_(1)  # a column, through a transposed view
        v.sub_(v.mean())
        t.clamp_(min=-1)
    torch.testing.assert_close(a.cpu(), x)


def test_item_in_the_middle_of_a_graph():
    x = torch.randn(16)
    a = x.to(TPU)
    s = (a * a).sum()
    scale = s.item()  # flushes the graph so far
    torch.testing.assert_close(scale, float((x * x).sum()), rtol=1e-6, atol=1e-6)
    b = a / scale
    torch.testing.assert_close(b.cpu(), x / scale)


def test_data_dependent_shape_materialises():
    x = torch.tensor([0.0, 1.5, 0.0, -2.0, 3.0])
    a = x.to(TPU)
    idx = torch.nonzero(a * 2)
    torch.testing.assert_close(idx.cpu(), torch.nonzero(x * 2))
    torch.testing.assert_close(a[a > 0].cpu(), x[x > 0])


def test_kernel_error_surfaces_at_the_op_and_leaves_the_graph_intact():
    x = torch.randn(3, 4)
    a = x.to(TPU)
    b = a + 1
    with pytest.raises(RuntimeError, match="must match the size"):
        b + torch.ones(5, device=TPU)
    c = b * 2
    torch.testing.assert_close(c.cpu(), (x + 1) * 2)


def test_mutation_of_a_graph_input():
    x = torch.randn(5)
    a = x.to(TPU)
    b = a * 2  # reads a's buffer
    a.add_(10)  # then a is written in the same graph
    c = a + b
    torch.testing.assert_close(b.cpu(), x * 2)
    torch.testing.assert_close(a.cpu(), x + 10)
    torch.testing.assert_close(c.cpu(), x + 10 + x * 2)


def test_inplace_updates_donate_the_old_buffer_and_copies_keep_theirs():
    import copy

    x = torch.arange(6.0)
    a = x.to(TPU)
    view = a.view(2, 3)
    deep = copy.deepcopy(a)
    raw = torch.tensor([], device=TPU).set_(a.untyped_storage().clone())
    before = debug.metrics()["donated_buffers"]
    a.mul_(3)
    a.add_(1)
    torch.testing.assert_close(a.cpu(), x * 3 + 1)
    assert debug.metrics()["donated_buffers"] - before == 1  # the program wrote a's storage in place
    torch.testing.assert_close(view.cpu(), (x * 3 + 1).view(2, 3))
    torch.testing.assert_close(deep.cpu(), x)
    torch.testing.assert_close(raw.cpu(), x)
    b = a * 1  # read, then overwritten in the same graph: the read sees the old value
    a.zero_()
    torch.testing.assert_close(b.cpu(), x * 3 + 1)
    torch.testing.assert_close(a.cpu(), torch.zeros(6))


def test_host_write_to_a_pending_storage_keeps_order():
    a = torch.zeros(4, device=TPU)
    a.add_(1)  # pending
    a.copy_(torch.full((4,), 7.0))  # a host write: must land after the pending add
    torch.testing.assert_close(a.cpu(), torch.full((4,), 7.0))
    b = torch.zeros(3, device=TPU)
    b.add_(2)
    b.resize_(5)  # resizing reads the pending value
    torch.testing.assert_close(b[:3].cpu(), torch.full((3,), 2.0))


def test_freed_intermediates_do_not_break_the_graph():
    x = torch.randn(32)
    a = x.to(TPU)
    t = a.exp()
    u = t * 2
    del t  # freed before the flush: a dead intermediate
    r = u.sum()
    torch.testing.assert_close(r.cpu(), (x.exp() * 2).sum())


def test_dropout_reproducible_under_a_seed():
    x = torch.ones(64, 64)
    a = x.to(TPU)

    def run():
        torch.manual_seed(123)
        return torch.nn.functional.dropout(a, 0.5).cpu()

    first = run()
    torch.tpu.eager_mode = EagerMode.DEFER_NEVER
    strict = run()
    torch.tpu.eager_mode = EagerMode.DEFER_AND_FUSE
    torch.testing.assert_close(run(), first)
    torch.testing.assert_close(first, strict)  # the same mask as strict eager
    assert 0.3 < (first == 0).float().mean() < 0.7


def test_synchronize_and_mark_step_flush():
    a = torch.ones(3, device=TPU)
    b = a + 1
    _, d = metrics_delta(torch.tpu.synchronize)
    assert d["flushes"] == 1
    c = b * 3
    _, d = metrics_delta(torch_tpu.mark_step)
    assert d["flushes"] == 1
    torch.testing.assert_close(c.cpu(), torch.full((3,), 6.0))


def test_mode_change_flushes():
    a = torch.ones(3, device=TPU)
    b = a * 5
    before = debug.metrics()["flushes"]
    torch.tpu.eager_mode = EagerMode.DEFER_NEVER
    assert debug.metrics()["flushes"] == before + 1
    torch.testing.assert_close(b.cpu(), torch.full((3,), 5.0))
    torch.tpu.eager_mode = EagerMode.DEFER_AND_FUSE


def _mlp():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(20, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


@pytest.mark.parametrize("split", [False, True], ids=["one_program", "split"])
@pytest.mark.parametrize("opt_name", ["sgd", "adamw"])
def test_training_matches_cpu_and_hits_the_cache_from_step_two(opt_name, split, monkeypatch):
    if split:  # what a model with more parameters gets (_eager._split_min_bytes)
        monkeypatch.setattr(torch_tpu._eager, "_split_min_bytes", 0)
    X, Y = torch.randn(16, 20), torch.randint(0, 4, (16,))

    def train(dev, steps=6):
        m = _mlp().to(dev)
        if opt_name == "sgd":
            opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
        else:
            opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        x, y = X.to(dev), Y.to(dev)
        losses = []
        for _ in range(steps):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), y)
            loss.backward()
            opt.step()  # the step boundary: fused eager flushes here
            losses.append(loss.detach())
        return [float(v) for v in losses], m

    ref, mc = train("cpu")
    before = debug.metrics()
    got, mt = train(TPU)
    after = debug.metrics()
    torch.testing.assert_close(torch.tensor(got), torch.tensor(ref), rtol=1e-5, atol=1e-5)
    for p, q in zip(mt.parameters(), mc.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-5)
    # One flush per step at the step's end, or split (for XLA:CPU,
    # _eager._optimizer_step_begin) two: forward+backward, then the
    # optimizer step. Steps 2.. repeat step 2's graphs (step 1 also creates
    # the optimizer state).
    per_step = 2 if split else 1
    assert after["flushes"] - before["flushes"] >= 6 * per_step
    assert after["fused_cache_hits"] - before["fused_cache_hits"] >= 4 * per_step
    reasons = {k: after["flush_reasons"].get(k, 0) - before["flush_reasons"].get(k, 0)
               for k in ("mark_step: before optimizer step", "mark_step: optimizer step")}
    assert reasons == {"mark_step: before optimizer step": 6 if split else 0, "mark_step: optimizer step": 6}, reasons


def test_the_step_is_split_by_the_size_of_the_parameters(monkeypatch):
    # 512 KiB of parameters and up: split before optimizer.step(); below, the
    # step joins forward and backward. add_param_group() re-decides.
    from torch_tpu import _eager

    assert _eager._split_min_bytes == 512 * 1024  # the default ("auto")
    small = torch.zeros(1000, device=TPU, requires_grad=True)
    big = torch.zeros(128 * 1024, device=TPU, requires_grad=True)  # 512 KiB of float32
    opt = torch.optim.SGD([small], lr=0.5)
    assert not _eager._split_before_step(opt)
    opt.add_param_group({"params": [big]})
    assert _eager._split_before_step(opt)
    assert _eager._split_before_step(torch.optim.SGD([big], lr=0.5))
    half = torch.zeros(128 * 1024, device=TPU, dtype=torch.bfloat16, requires_grad=True)
    assert not _eager._split_before_step(torch.optim.SGD([half], lr=0.5))  # bytes, not elements

    # End to end in fused eager: the big model's step flushes twice, and the
    # update is CPU's.
    for p in (small, big):
        p.grad = torch.ones_like(p)
    before = debug.metrics()
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        (big * 2).sum().backward()
        opt.step()
        got = big.detach().cpu()
    after = debug.metrics()
    torch.testing.assert_close(got, torch.full((128 * 1024,), -1.5))  # -(1 + 2) * 0.5
    assert after["flush_reasons"].get("mark_step: before optimizer step", 0) - \
        before["flush_reasons"].get("mark_step: before optimizer step", 0) == 1


@pytest.mark.parametrize("value,expected", [("auto", 512 * 1024), ("", 512 * 1024), ("1", 0), ("0", float("inf"))])
def test_split_env_var(monkeypatch, value, expected):
    from torch_tpu import _eager

    monkeypatch.setenv("TORCH_TPU_SPLIT_OPTIMIZER_STEP", value)
    assert _eager._split_min_bytes_from_env() == expected


def test_split_env_var_rejects_other_values(monkeypatch):
    from torch_tpu import _eager

    monkeypatch.setenv("TORCH_TPU_SPLIT_OPTIMIZER_STEP", "sometimes")
    with pytest.raises(ValueError, match="TORCH_TPU_SPLIT_OPTIMIZER_STEP must be auto, 1 or 0"):
        _eager._split_min_bytes_from_env()


def test_size_limit_and_env_var():
    code = (
        "import torch, torch_tpu\n"
        "from torch_tpu import debug\n"
        "assert torch.tpu.eager_mode == torch.tpu.EagerMode.DEFER_AND_FUSE\n"
        "x = torch.zeros(4, device='tpu')\n"
        "for _ in range(10):\n"
        "    x.add_(1)\n"
        "m = debug.metrics()\n"
        "assert m['flushes'] == 2 and m['flush_reasons'] == {'size limit: size limit': 2}, m\n"
        "assert x.cpu().tolist() == [10.0] * 4\n"
        "print('OK')\n"
    )
    r = run_py(code, TORCH_TPU_DEFER_AND_FUSE="1", TORCH_TPU_FUSE_MAX_OPS="4")
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


def test_metrics_report_shows_flushes():
    a = torch.ones(2, device=TPU) * 2
    a.cpu()
    rep = debug.metrics_report()
    assert "fused eager" in rep and "flushes" in rep and "host read" in rep


def test_strict_eager_runs_the_optimizer_step_as_one_program():
    torch.tpu.eager_mode = EagerMode.DEFER_NEVER  # the fixture restores fused eager's exit check
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 7), torch.nn.Linear(7, 5), torch.nn.Linear(5, 2)).to(TPU)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    x = torch.randn(3, 6).to(TPU)
    for _ in range(2):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()
    m(x).sum().backward()
    before = debug.metrics()
    opt.step()
    after = debug.metrics()
    assert torch.tpu.eager_mode == EagerMode.DEFER_NEVER  # restored after the step
    assert after["flushes"] - before["flushes"] == 1
    assert after["executions"] - before["executions"] == 1  # six tensors, one program
    torch.tpu.eager_mode = EagerMode.DEFER_AND_FUSE


def test_a_failing_optimizer_step_leaves_the_mode_as_it_was():
    torch.tpu.eager_mode = EagerMode.DEFER_NEVER
    p = torch.nn.Parameter(torch.ones(3, device=TPU))
    p.grad = torch.ones(3, device=TPU)
    opt = torch.optim.SGD([p], lr=0.1)
    opt.param_groups[0]["lr"] = "bad"  # the step raises inside, after the pre-hook
    with pytest.raises(TypeError):
        opt.step()
    opt.param_groups[0]["lr"] = 0.1
    opt.step()  # the next step restores the mode the user had
    assert torch.tpu.eager_mode == EagerMode.DEFER_NEVER
    torch.testing.assert_close(p.detach().cpu(), torch.full((3,), 0.9))
    torch.tpu.eager_mode = EagerMode.DEFER_AND_FUSE


def test_a_compiled_graph_run_nested_in_another_keeps_the_outer_flag():
    # Each graph run sets the flag and restores what it found, so an inner
    # run's end does not clear the outer run's flag early.
    from torch_tpu import _C

    assert _C._set_compiled_graph_run(True) is False  # the outer run begins
    try:
        assert _C._set_compiled_graph_run(True) is True  # an inner run begins
        assert _C._set_compiled_graph_run(True) is True  # the inner run ends, restoring the outer's value
    finally:
        assert _C._set_compiled_graph_run(False) is True  # the outer run ends
    assert _C._set_compiled_graph_run(False) is False
