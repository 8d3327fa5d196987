"""torch.compile(backend="tpu"): results against PyTorch on CPU, the same
function compiled with aot_eager on CPU (the same ATen graphs, CPU kernels),
and eager tpu."""
from __future__ import annotations

import contextlib
import copy
import functools
import re

import pytest
import torch
import torch._dynamo

from torch_tpu import debug

TPU = torch.device("tpu")


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


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
    assert after["replays"] - before["replays"] == 1  # the captured program, without running the ops
    assert after["ops_dispatched"] == before["ops_dispatched"]  # no op ran through the dispatcher


def test_graph_of_views_runs_without_the_capture_machinery(monkeypatch):
    # `return loss.detach()` after a training step compiles to a graph that
    # holds only a view: it records no op, so nothing is captured, and later
    # calls run it directly instead of switching modes and flushing.
    from torch_tpu import _C

    cf = torch.compile(lambda x: x.detach().t(), backend="tpu")
    x = torch.randn(3, 5)
    torch.testing.assert_close(cf(x.to(TPU)).cpu(), x.t())

    def refuse(*args):
        raise AssertionError("the capture machinery ran for a graph of views")

    for name in ("_begin_capture", "_end_capture", "_mark_step", "_set_eager_mode"):
        monkeypatch.setattr(_C, name, refuse)
    for _ in range(3):
        x = torch.randn(3, 5)
        out = cf(x.to(TPU))
        assert out.shape == (5, 3) and out.stride() == (1, 5)  # a view, as in eager
        torch.testing.assert_close(out.cpu(), x.t())


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


def _compare_with_aot_eager_on_cpu(run):
    """run(device, backend, check) -> (losses, parameters): tpu's against
    the same step compiled with aot_eager on CPU."""
    ref, ref_params = run("cpu", "aot_eager", False)
    torch._dynamo.reset()
    got, params = run(TPU, "tpu", True)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for p, q in zip(params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_training_step_replays_one_program_per_graph():
    def run(dev, backend, check):
        torch.manual_seed(0)
        torch._dynamo.utils.counters.clear()
        m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)  # dynamo makes it capturable on tpu, as on CUDA
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).to(dev)

        @torch.compile(backend=backend)
        def step():
            opt.zero_grad()
            loss = m(x).square().mean()
            loss.backward()
            opt.step()
            return loss.detach()

        losses = [step() for _ in range(3)]
        before = debug.metrics()
        losses += [step() for _ in range(4)]
        after = debug.metrics()
        if check:
            # Backward is traced, and the optimizer joins the same graph: one program per step.
            assert after["replays"] - before["replays"] == 4
            # Only the autograd engine's ones_like seed for loss.backward() runs as an op.
            assert after["ops_dispatched"] - before["ops_dispatched"] <= 4
            assert after["compiles"] == before["compiles"]
            # AdamW updates each parameter and its two moments in place: the
            # optimizer graph donates their old buffers instead of copying.
            assert after["donated_buffers"] - before["donated_buffers"] >= 4 * 3 * 4
            # The graph of `loss.detach()` holds only a view: it runs no program.
            assert after["flushes"] == before["flushes"]
            # Nothing breaks the step: not zero_grad() (traced for tpu), nor
            # loss.backward(), nor torch_tpu's optimizer hooks.
            breaks = list(torch._dynamo.utils.counters["graph_break"])
            assert not breaks, breaks
        return torch.stack([v.cpu() for v in losses]), [p.detach().cpu() for p in m.parameters()]

    _compare_with_aot_eager_on_cpu(run)
    rep = debug.metrics_report()
    assert "torch.compile graphs" in rep and "replays" in rep


def _small_adamw_step(dev):
    """(step, model): an AdamW training step on a small MLP, returning its
    loss detached before backward (a returned loss must not hold the
    consumed graph), so that dynamo can trace the backward."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2)).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
    x = torch.randn(4, 8, generator=torch.Generator().manual_seed(1)).to(dev)

    def step():
        opt.zero_grad()
        loss = m(x).square().mean()
        out = loss.detach()
        loss.backward()
        opt.step()
        return out

    return step, m


def _seven_traced_steps(step, backend, check, options=None):
    """Compiles step for `backend` with backward traced (tpu: its default or
    `options`; CPU's reference: dynamo's trace_autograd_ops patched) and
    runs it 3 + 4 times: (losses, metrics before the last 4, after)."""
    if check:
        step, ctx = torch.compile(step, backend=backend, options=options), contextlib.nullcontext()
    else:
        step, ctx = torch.compile(step, backend=backend), torch._dynamo.config.patch(trace_autograd_ops=True)
    with ctx:
        losses = [step() for _ in range(3)]
        before = debug.metrics()
        losses += [step() for _ in range(4)]
        after = debug.metrics()
    return losses, before, after


def test_backward_traced_into_the_graph_replays_one_program_per_step():
    # options={"trace_backward": True} (dynamo's trace_autograd_ops, for this
    # function only): loss.backward() is traced (as autograd.grad) into the
    # forward's graph, and the optimizer step joins it (the graph break in
    # torch.optim's step wrapper is dropped, and _init_group sees the traced
    # gradients): one program per step, and no autograd engine at run time.
    # CPU's reference is aot_eager with the same dynamo setting (which
    # still breaks at the optimizer).
    def run(dev, backend, check):
        step, m = _small_adamw_step(dev)
        losses, before, after = _seven_traced_steps(step, backend, check, {"trace_backward": True})
        if check:
            assert not torch._dynamo.config.trace_autograd_ops  # scoped to the compiled function
            assert after["replays"] - before["replays"] == 4  # forward+backward+optimizer: 1 per step
            assert after["ops_dispatched"] == before["ops_dispatched"]  # not even the engine's ones_like
            assert after["compiles"] == before["compiles"]
        return torch.stack([v.cpu() for v in losses]), [p.detach().cpu() for p in m.parameters()]

    _compare_with_aot_eager_on_cpu(run)


_SCALE = 0.5


def test_numbers_of_a_compiled_graph_are_baked_in_and_keyed_by_value():
    # A Python number in a graph whose inputs are all tensors is a constant of
    # dynamo's graph: the program holds it as a constant, not a parameter.
    # Its value must then be part of the program's key: a changed global is a
    # new graph (dynamo's guard) whose program must not be the old one.
    global _SCALE

    def f(x):
        return torch.relu(x * _SCALE - 0.25)

    cf = torch.compile(f, backend="tpu")
    x = torch.randn(6, 3)
    # Each value its own graph (else dynamo makes a changed float an input).
    with torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        try:
            for scale in (0.5, 2.0, -1.5, 0.5):
                _SCALE = scale
                for _ in range(2):  # the capture, then its replay
                    torch.testing.assert_close(cf(x.to(TPU)).cpu(), f(x))
        finally:
            _SCALE = 0.5


def test_numbers_from_a_host_read_or_a_graph_input_reuse_one_program():
    # A number read from the device inside a graph (capture_scalar_outputs)
    # and a float the graph takes as an input change on every call: they stay
    # runtime parameters, so new values compile nothing.
    def f(x):
        return x * x.sum().item() + 0.5

    def g(x, a):
        return x * a + 1.5

    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        cf = torch.compile(f, backend="tpu")
        for i in range(4):
            x = torch.full((4,), float(i + 1))
            before = debug.metrics()["compiles"]
            torch.testing.assert_close(cf(x.to(TPU)).cpu(), f(x))
            if i >= 1:
                assert debug.metrics()["compiles"] == before, i
    cg = torch.compile(g, backend="tpu")
    x = torch.arange(4.0)
    for i, a in enumerate((0.5, 2.0, 3.0, 4.0, 5.0)):
        before = debug.metrics()["compiles"]
        torch.testing.assert_close(cg(x.to(TPU), a).cpu(), g(x, a))
        if i >= 2:  # dynamo makes `a` an input of the graph at its second value
            assert debug.metrics()["compiles"] == before, a


def test_compiled_adamw_step_program_takes_only_tensors(tmp_path):
    # AdamW's numbers (lr, betas, eps, weight decay, for each parameter) were
    # ~100 scalar parameters of the step's program, each one paid on every
    # execute. Baked in, the program's parameters are the tensors:
    # weights, moments, step counts, x and y, and the group's lr and betas.
    from test_device import run_py

    code = """
import torch, torch_tpu
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).to("tpu")
opt = torch.optim.AdamW(m.parameters(), lr=1e-3)
x, y = torch.randn(5, 8).to("tpu"), torch.randint(0, 4, (5,)).to("tpu")

@torch.compile(backend="tpu")
def step():
    opt.zero_grad()
    loss = torch.nn.functional.cross_entropy(m(x), y)
    out = loss.detach()
    loss.backward()
    opt.step()
    return out

for _ in range(3):
    print(step().item())
"""
    p = run_py(code, TORCH_TPU_DUMP_DIR=str(tmp_path / "dump"), TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"))
    assert p.returncode == 0, p.stderr[-2000:]
    fused = [f.read_text() for f in (tmp_path / "dump").iterdir() if "fused" in f.name]
    assert len(fused) == 1, [f.name for f in (tmp_path / "dump").iterdir()]
    main = next(ln for ln in fused[0].splitlines() if "func.func public @main(" in ln)
    params = re.findall(r"%v\d+: tensor<([^>]*)>", main.split(") -> ")[0])
    # 4 weights x (value, exp_avg, exp_avg_sq, step) + x + y, and the
    # group's lr, beta1 and beta2 once each (inputs, so that an LR scheduler
    # never recompiles: tests/test_real_loops.py); no other number.
    assert len(params) == 4 * 4 + 2 + 3, params
    assert params.count("1xf32") == 4 + 3, params  # 0-d values travel as 1-element arrays


def _small_training_setup(dev, make_opt):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3)).to(dev)
    unused = torch.nn.Parameter(torch.ones(4, device=dev))  # never gets a gradient: .grad stays None
    opt = make_opt([*m.parameters(), unused])
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(5, 6, generator=g).to(dev), torch.randn(5, 3, generator=g).to(dev)
    return m, unused, opt, x, y


def _one_program_step_run(make_opt, variant):
    """run(device, backend, check) for _compare_with_aot_eager_on_cpu: a
    step whose optimizer joins the traced backward's graph, in `variant`."""

    def run(dev, backend, check):
        m, unused, opt, x, y = _small_training_setup(dev, make_opt)

        def step():
            opt.zero_grad()
            loss = (m(x) - y).square().mean()
            out = loss.detach()
            loss.backward()
            if variant == "clip":
                torch.nn.utils.clip_grad_norm_(m.parameters(), 0.05)  # in place on the traced gradients
            if variant == "user_break":
                torch._dynamo.graph_break()  # the user's own break stays
            if variant == "data_write":
                with torch.no_grad():
                    unused.data = unused.data * 0.5  # a pending write other than .grad: dynamo breaks
            opt.step()
            return out

        losses, before, after = _seven_traced_steps(step, backend, check)
        if check:
            replays = after["replays"] - before["replays"]
            if variant in ("plain", "clip", "user_break"):
                assert replays == 4 * (2 if variant == "user_break" else 1), (variant, replays)
            else:  # the .data write keeps the step from being one replayed program
                assert replays != 4, replays
            assert after["compiles"] == before["compiles"]
            assert unused.grad is None
        params = [p.detach().cpu() for p in (*m.parameters(), unused)]
        return torch.stack([v.cpu() for v in losses]), params + [p.grad.cpu() for p in m.parameters()]

    return run


@pytest.mark.parametrize("variant", ["plain", "clip", "user_break", "data_write"])
@pytest.mark.parametrize("optim", ["adamw", "sgd_momentum"])
def test_optimizer_step_joins_the_traced_backward_in_one_program(optim, variant):
    # The optimizer's state is created on the first step (AdamW's moments by
    # _init_group on the host, SGD's momentum buffers inside the traced
    # step) and its gradients are the traced backward's, so that weights,
    # gradients and losses over 7 steps are CPU aot_eager's. A user's own
    # graph break and a pending write to a parameter other than .grad keep
    # two programs per step.
    make = {"adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
            "sgd_momentum": lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9)}[optim]
    _compare_with_aot_eager_on_cpu(_one_program_step_run(make, variant))


def test_a_step_that_reads_module_globals_is_compiled_past_zero_grad():
    # A script's step reads its model, optimizer and data as module globals.
    # Where a graph break splits it (here an explicit one; zero_grad() did
    # before it was traced), dynamo's resume function for the rest has no tensor in its locals,
    # which on its own makes dynamo run forward, backward and the optimizer
    # eagerly. For tpu it is compiled: one program per step, no op
    # dispatched, and CPU eager's losses and weights.
    def run(dev):
        m, _, opt, x, y = _small_training_setup(dev, lambda ps: torch.optim.AdamW(ps, lr=1e-2))
        ns = {"m": m, "opt": opt, "x": x, "y": y, "torch": torch}  # the step's module globals
        exec("def step():\n    torch._dynamo.graph_break(); opt.zero_grad(); loss = (m(x) - y).square().mean(); out = loss.detach()\n"
             "    loss.backward(); opt.step(); return out\n", ns)
        step = torch.compile(ns["step"], backend="tpu") if dev == TPU else ns["step"]
        losses = [step() for _ in range(3)]
        before = debug.metrics()
        losses += [step() for _ in range(4)]
        after = debug.metrics()
        if dev == TPU:
            assert after["replays"] - before["replays"] == 4
            assert after["ops_dispatched"] == before["ops_dispatched"]
        return torch.stack([v.cpu() for v in losses]), [p.detach().cpu() for p in ns["m"].parameters()]

    (got, got_params), (ref, ref_params) = run(TPU), run("cpu")
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for p, q in zip(got_params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("zero", ["zero_grad", "zero_grad_positional", "param_groups_loop", "zero_grad_last"])
def test_zero_grad_is_traced_into_the_step(zero):
    # opt.zero_grad() (torch.optim marks it never to be traced) no longer
    # splits a tpu step into two frames: the whole step is one dynamo graph,
    # with no graph break, and each step's gradients, weights and losses are
    # CPU eager's, the unused parameter's .grad None as in eager. Clearing
    # the gradients by hand through opt.param_groups reaches the parameters
    # through the optimizer first (dynamo then makes them graph attributes,
    # not inputs); the traced backward still finds them.
    def run(dev):
        m, unused, opt, x, y = _small_training_setup(dev, lambda ps: torch.optim.AdamW(ps, lr=1e-2))

        def step(xb):
            if zero == "zero_grad":
                opt.zero_grad()
            elif zero == "zero_grad_positional":
                opt.zero_grad(True)
            elif zero == "param_groups_loop":
                for group in opt.param_groups:
                    for p in group["params"]:
                        p.grad = None
            loss = (m(xb) - y).square().mean()
            out = loss.detach()
            loss.backward()
            opt.step()
            if zero == "zero_grad_last":  # after the step instead: every .grad ends None
                opt.zero_grad()
            return out

        fn = torch.compile(step, backend="tpu") if dev == TPU else step
        torch._dynamo.utils.counters.clear()
        losses, grads = [], []
        for i in range(4):
            losses.append(fn(x * (1 + i / 4)).cpu())
            grads.append([None if p.grad is None else p.grad.cpu() for p in opt.param_groups[0]["params"]])
        if dev == TPU:
            assert not torch._dynamo.utils.counters["graph_break"], dict(torch._dynamo.utils.counters["graph_break"])
            assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1
        return losses, grads, [p.detach().cpu() for p in opt.param_groups[0]["params"]]

    (got, got_grads, got_params), (ref, ref_grads, ref_params) = run(TPU), run("cpu")
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for gs, rs in zip(got_grads, ref_grads):
        assert gs[-1] is None and rs[-1] is None  # the unused parameter
        for g, r in zip(gs[:-1], rs[:-1]):
            if r is None:
                assert g is None
            else:
                torch.testing.assert_close(g, r, rtol=1e-5, atol=1e-6)
    for p, q in zip(got_params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("trace_backward", [True, False], ids=["traced_backward", "engine_backward"])
@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.AdamW(ps, lr=1e-2, fused=True),
    lambda ps: torch.optim.Adam(ps, lr=1e-2, fused=True, amsgrad=True),
    lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, fused=True),
    lambda ps: torch.optim.Adagrad(ps, lr=0.1, fused=True),
], ids=["adamw", "adam_amsgrad", "sgd_momentum", "adagrad"])
def test_fused_optimizers_join_the_compiled_step(make_opt, trace_backward):
    # dynamo wraps torch.optim's fused implementations in
    # torch.compiler.disable (Inductor cannot lower them), which broke the
    # step and ran the optimizer eagerly. For tpu the fused op (_fused_adamw_,
    # ...) is traced as one op: no graph break, and CPU eager's fused
    # optimizer gives the same losses and weights.
    def run(dev):
        m, unused, opt, x, y = _small_training_setup(dev, make_opt)

        def step(xb):
            opt.zero_grad()
            loss = (m(xb) - y).square().mean()
            out = loss.detach()
            loss.backward()
            opt.step()
            return out

        fn = torch.compile(step, backend="tpu", options={"trace_backward": trace_backward}) if dev == TPU else step
        torch._dynamo.utils.counters.clear()
        losses = [fn(x * (1 + i / 4)).cpu() for i in range(4)]
        if dev == TPU:
            breaks = dict(torch._dynamo.utils.counters["graph_break"])
            assert not any("fused optimizer" in k for k in breaks), breaks
            # With the engine's backward, backward() and what surrounds it
            # break as for any optimizer; a traced step has no break at all.
            assert not breaks or not trace_backward, breaks
        return losses, [p.detach().cpu() for p in opt.param_groups[0]["params"]]

    (got, got_params), (ref, ref_params) = run(TPU), run("cpu")
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for p, q in zip(got_params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_fused_optimizers_stay_disabled_for_other_backends():
    # Only tpu compiles trace the fused implementations; dynamo's own
    # graph break stays for every other backend.
    m = torch.nn.Linear(3, 2)
    opt = torch.optim.AdamW(m.parameters(), lr=1e-2, fused=True)

    def step(x):
        opt.zero_grad()
        m(x).sum().backward()
        opt.step()

    step(torch.randn(2, 3))  # the optimizer state exists before the compile
    torch._dynamo.utils.counters.clear()
    torch.compile(step, backend="eager")(torch.randn(2, 3))
    assert any("fused optimizer" in k for k in torch._dynamo.utils.counters["graph_break"])


def test_skipping_dynamos_guards_replays_the_same_step():
    # torch.compiler.set_stance(skip_guard_eval_unsafe=True) after warm-up
    # (dynamo's own option; docs/execution_modes.md): the compiled step still
    # replays one program per step and gives eager's losses and weights.
    def run(dev):
        step, m = _small_adamw_step(dev)
        if dev == TPU:
            step = torch.compile(step, backend="tpu")
        losses = [step() for _ in range(3)]
        before = debug.metrics()
        with torch.compiler.set_stance("default", skip_guard_eval_unsafe=True):
            losses += [step() for _ in range(4)]
        if dev == TPU:
            after = debug.metrics()
            assert after["replays"] - before["replays"] == 4
            assert after["ops_dispatched"] == before["ops_dispatched"]
        return torch.stack([v.cpu() for v in losses]), [p.detach().cpu() for p in m.parameters()]

    (got, got_params), (ref, ref_params) = run(TPU), run("cpu")
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for p, q in zip(got_params, ref_params):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)


def test_a_compile_leaves_dynamos_shared_constants_unsourced():
    # dynamo 2.14 has one shared ConstantVariable for None (and for True and
    # False); reading a parameter's .grad in a trace gave it that .grad's
    # source, and every later trace in the process then reloaded "None"
    # from there: an unrelated CPU compile failed with
    # "'opt' not in cell_and_freevars". torch_tpu hands out fresh constants.
    from torch._dynamo.variables import constant

    def steps(dev, backend):
        fn = torch.compile(_small_adamw_step(dev)[0], backend=backend)
        with torch._dynamo.config.patch(trace_autograd_ops=True):
            return torch.stack([fn().cpu() for _ in range(3)])

    got = steps(TPU, "tpu")
    for c in (constant.CONSTANT_VARIABLE_NONE, constant.CONSTANT_VARIABLE_TRUE, constant.CONSTANT_VARIABLE_FALSE):
        assert c.source is None, c.source
    torch._dynamo.reset()
    ref = steps("cpu", "aot_eager")  # failed to compile before the fix
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)


def test_has_grad_hooks_sees_every_kind_of_gradient_hook():
    from torch_tpu import _C

    p = torch.nn.Parameter(torch.ones(3, device=TPU))
    assert not _C._has_grad_hooks(p)
    assert not _C._has_grad_hooks(torch.ones(3, device=TPU))  # no grad at all
    h = p.register_hook(lambda g: g)
    assert _C._has_grad_hooks(p)
    h.remove()
    assert not _C._has_grad_hooks(p)
    h = p.register_post_accumulate_grad_hook(lambda t: None)
    assert _C._has_grad_hooks(p)
    h.remove()
    assert not _C._has_grad_hooks(p)
    # A hook on the gradient accumulator node (how DDP and FSDP1 attach
    # theirs): visible while its owner holds the node.
    acc = p.view_as(p).grad_fn.next_functions[0][0]
    h = acc.register_hook(lambda gi, go: None)
    assert _C._has_grad_hooks(p)
    h.remove()
    assert not _C._has_grad_hooks(p)
    acc.register_prehook(lambda go: None)
    assert _C._has_grad_hooks(p)
    del acc
    assert not _C._has_grad_hooks(p)  # the node (and its hook) are gone


def _hook_scenario(kind, when):
    """A step compiled with options={"trace_backward": True}, a gradient hook
    added before the first call or after two; returns the gradients of four
    steps, the hook's calls, or the error registering it raised."""
    def make(dev):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3)).to(dev)
        x = torch.randn(5, 6, generator=torch.Generator().manual_seed(1)).to(dev)
        return m, x

    calls, keep = [], []

    def add_hook(m, record):
        w = m[0].weight
        if kind == "tensor":
            w.register_hook(lambda g: (record and calls.append(1)) or g * 2)
        elif kind == "post_accumulate":
            def post(t):
                record and calls.append(1)
                with torch.no_grad():
                    t.grad.mul_(2)
            w.register_post_accumulate_grad_hook(post)
        else:
            acc = w.view_as(w).grad_fn.next_functions[0][0]
            keep.append(acc)  # as DDP keeps its accumulators

            def post_acc(grad_inputs, grad_outputs):
                record and calls.append(1)
            acc.register_hook(post_acc)

    def run(dev, record):
        m, x = make(dev)

        def step():
            m.zero_grad()
            loss = m(x).square().sum()
            out = loss.detach()
            loss.backward()
            return out

        fn = torch.compile(step, backend="tpu", options={"trace_backward": True}) if dev == TPU else step
        grads = []
        for i in range(4):
            if i == (0 if when == "before" else 2):
                try:
                    add_hook(m, record)
                except RuntimeError as e:
                    return str(e)
            fn()
            grads.append([p.grad.detach().cpu().clone() for p in m.parameters()])
        return grads

    return run("cpu", False), run(TPU, True), len(calls)


@pytest.mark.parametrize("kind, when", [
    ("tensor", "before"), ("post_accumulate", "before"), ("accumulator", "before"),
    ("tensor", "after"), ("post_accumulate", "after"),
])
def test_gradient_hooks_are_never_skipped_by_the_traced_backward(kind, when):
    # dynamo's traced backward would skip hooks on the leaves: a hook present
    # when the step is traced keeps backward in the autograd engine (the
    # reference is CPU eager with the same hook, which doubles the gradient);
    # registering one after the first steps raises (a hook on the accumulator
    # node then is not seen: docs/execution_modes.md). In a subprocess, so
    # that the hooks and the traced leaves these scenarios leave behind reach
    # no later test.
    import os
    import pickle
    import subprocess
    import sys

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    code = ("import pickle, sys, torch\nfrom tests.test_compile import _hook_scenario\n"
            f"sys.stdout.buffer.write(pickle.dumps(_hook_scenario({kind!r}, {when!r})))\n")
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=300, cwd=root)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    ref, got, calls = pickle.loads(r.stdout)
    if when == "after":
        assert "cannot register a gradient hook" in got, got
        assert calls == 0
        return
    for g, q in zip(got, ref):
        for a, b in zip(g, q):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert calls == 4


@pytest.mark.parametrize("trace", [None, False])
def test_backward_is_traced_by_default_and_can_be_left_to_the_engine(trace):
    m = torch.nn.Linear(4, 2).to(TPU)
    x = torch.randn(3, 4).to(TPU)

    def step():
        m.zero_grad()
        loss = m(x).sum()
        loss.backward()
        return loss.detach()

    torch._dynamo.utils.counters.clear()
    f = torch.compile(step, backend="tpu", **({} if trace is None else {"options": {"trace_backward": trace}}))
    f()
    torch.testing.assert_close(m.weight.grad.cpu(), x.cpu().sum(0).expand(2, 4))
    broke = any("backward" in b.lower() for b in torch._dynamo.utils.counters["graph_break"])
    assert broke == (trace is False)


def _training_patterns_step(pattern, m, opt, x, y):
    if pattern != "accumulate":
        opt.zero_grad(set_to_none=pattern != "zero_grad_keeps_tensors")
    out = m(x)
    loss = (out - y).square().mean()
    if pattern == "two_losses":
        aux = out.abs().mean()
        (loss + aux).backward()
    else:
        loss.backward(retain_graph=pattern == "retain_graph")
    if pattern == "clip":
        torch.nn.utils.clip_grad_norm_(m.parameters(), 0.1)
    if pattern != "accumulate":
        opt.step()
    if pattern == "item":
        return loss.item()
    return loss  # returned after backward, as most training loops do


@pytest.mark.parametrize("pattern", ["plain", "item", "accumulate", "zero_grad_keeps_tensors", "two_losses",
                                     "retain_graph", "clip"])
def test_compiled_training_step_patterns_match_cpu_eager(pattern):
    # Common ways to write a step, with BatchNorm buffers and a batch-size
    # change (a recompile) part way, under the default compile (backward
    # traced where it can be): losses, weights, gradients and buffers as CPU
    # eager's.
    def run(dev):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.BatchNorm1d(8),
                                torch.nn.Linear(8, 3)).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        fn = functools.partial(_training_patterns_step, pattern)
        if dev == TPU:
            fn = torch.compile(fn, backend="tpu")
        losses = []
        for b in (5, 5, 5, 7, 7, 5):
            g = torch.Generator().manual_seed(b)
            x, y = torch.randn(b, 6, generator=g).to(dev), torch.randn(b, 3, generator=g).to(dev)
            v = fn(m, opt, x, y)
            losses.append(torch.as_tensor(v.detach().cpu() if isinstance(v, torch.Tensor) else v))
        state = [p.detach().cpu() for p in m.parameters()] + [p.grad.cpu() for p in m.parameters()]
        return losses, state + [b.cpu() for b in m.buffers()]

    ref, got = run("cpu"), run(TPU)
    for a, b in zip(got[0] + got[1], ref[0] + ref[1]):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)


def test_replay_refuses_inputs_that_differ_from_the_capture():
    from torch_tpu import _C

    a = torch.randn(4, 6).to(TPU)
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        _C._begin_capture()
        out = a * 2 + 1
        handle, why = _C._end_capture([a], [out])
    assert handle is not None, why
    b = torch.randn(4, 6)
    (r,) = _C._replay(handle, [b.to(TPU)])
    torch.testing.assert_close(r.cpu(), b * 2 + 1)
    assert _C._replay(handle, [b.t().contiguous().t().to(TPU)]) is None  # column-major strides
    assert _C._replay(handle, [torch.randn(6, 4).to(TPU).t()]) is None  # other strides
    assert _C._replay(handle, [torch.randn(4, 6, dtype=torch.float64).to(TPU)]) is None  # other dtype
    assert _C._replay(handle, [torch.randn(24).to(TPU)[:24].view(4, 6)]) is not None
    assert _C._replay(handle, []) is None


def test_warm_disk_cache_compiles_nothing(tmp_path):
    from test_device import run_py

    code = (
        "import torch, torch_tpu\n"
        "from torch_tpu import debug\n"
        "m = torch.nn.Linear(5, 3).to('tpu')\n"
        "opt = torch.optim.SGD(m.parameters(), lr=0.1)\n"
        "x = torch.randn(2, 5).to('tpu')\n"
        "@torch.compile(backend='tpu')\n"
        "def step():\n"
        "    opt.zero_grad(); loss = m(x).sum(); loss.backward(); opt.step(); return loss.detach()\n"
        "step(); step().cpu()\n"
        "print('COMPILES', debug.metrics()['compiles'])\n"
    )
    env = {"TORCH_TPU_CACHE_DIR": str(tmp_path)}
    first = run_py(code, **env)
    assert first.returncode == 0, first.stderr
    assert int(first.stdout.split("COMPILES")[1]) > 0
    second = run_py(code, **env)
    assert second.returncode == 0, second.stderr
    assert int(second.stdout.split("COMPILES")[1]) == 0


def test_compiled_training_step_does_not_import_inductor(tmp_path):
    # Dynamo asks Inductor's CUDA-graph manager about each gradient of a
    # compiled optimizer step; importing Inductor for that cost 1.5 s of the
    # first compiled step on this machine. Only the tpu backend runs here.
    from test_device import run_py

    code = (
        "import sys, torch, torch_tpu\n"
        "m = torch.nn.Linear(5, 3).to('tpu')\n"
        "opt = torch.optim.AdamW(m.parameters(), lr=0.1)\n"
        "x = torch.randn(2, 5)\n"
        "ref = torch.nn.Linear(5, 3); ref.load_state_dict({k: v.cpu() for k, v in m.state_dict().items()})\n"
        "ropt = torch.optim.AdamW(ref.parameters(), lr=0.1)\n"
        "@torch.compile(backend='tpu')\n"
        "def step():\n"
        "    opt.zero_grad(); loss = m(x.to('tpu')).sum(); loss.backward(); opt.step(); return loss.detach()\n"
        "for _ in range(2):\n"
        "    step().cpu(); ropt.zero_grad(); ref(x).sum().backward(); ropt.step()\n"
        "torch.testing.assert_close(m.weight.detach().cpu(), ref.weight.detach(), rtol=1e-5, atol=1e-5)\n"
        "print('INDUCTOR', 'torch._inductor.compile_fx' in sys.modules)\n"
    )
    r = run_py(code, TORCH_TPU_CACHE_DIR=str(tmp_path))
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split("INDUCTOR")[1].strip() == "False", r.stdout


def test_hf_generate_with_static_cache_replays_the_decode_step():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model = transformers.LlamaForCausalLM(cfg).eval()
    ids = torch.randint(0, 96, (1, 6))
    kw = dict(max_new_tokens=16, do_sample=False, cache_implementation="static")
    with torch.no_grad():
        expected = model.generate(ids, **kw)
    tm = model.to(TPU)
    tm.forward = torch.compile(tm.forward, backend="tpu")
    before = debug.metrics()
    with torch.no_grad():
        got = tm.generate(ids.to(TPU), **kw)
    after = debug.metrics()
    assert torch.equal(got.cpu(), expected)
    # Two dynamo graphs (prefill, decode), each captured once; tokens 3.. replay the decode program.
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 2
    assert after["replays"] - before["replays"] == 14


def _bucketed_and_captured():
    from torch_tpu import _compile

    return _compile.stats["bucketed"], _compile.stats["captured"]


def test_dynamic_sizes_share_power_of_two_buckets():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.LayerNorm(16),
                            torch.nn.Linear(16, 4)).eval()
    cm = torch.compile(copy.deepcopy(m).to(TPU), backend="tpu", dynamic=True)
    b0, c0 = _bucketed_and_captured()
    with torch.no_grad():
        for n in (3, 5, 6, 7, 8, 9, 12, 16, 5):
            x = torch.randn(n, 8)
            got = cm(x.to(TPU))
            assert got.shape == (n, 4)
            torch.testing.assert_close(got.cpu(), m(x))
    b1, c1 = _bucketed_and_captured()
    assert b1 - b0 == 1
    assert c1 - c0 == 3  # buckets 4, 8 and 16: one program each
    assert "power-of-two buckets" in debug.metrics_report()


def test_dynamic_batch_and_sequence_buckets_with_embeddings():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 16), torch.nn.ReLU(),
                            torch.nn.Linear(16, 4)).eval()
    cm = torch.compile(copy.deepcopy(m).to(TPU), backend="tpu", dynamic=True)
    b0, c0 = _bucketed_and_captured()
    with torch.no_grad():
        for b, t in ((3, 4), (5, 6), (6, 7), (7, 8), (2, 3)):
            idx = torch.randint(0, 50, (b, t))
            torch.testing.assert_close(cm(idx.to(TPU)).cpu(), m(idx))
    b1, c1 = _bucketed_and_captured()
    assert b1 - b0 == 1 and c1 - c0 == 3  # (4, 4), (8, 8) and (2, 4)


def test_dynamic_batch_of_a_convnet_buckets_with_mark_dynamic():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                            torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 5)).eval()
    cm = torch.compile(copy.deepcopy(m).to(TPU), backend="tpu")
    b0, c0 = _bucketed_and_captured()
    with torch.no_grad():
        for n in (5, 6, 7, 9, 12):
            x = torch.randn(n, 3, 8, 8)
            xt = x.to(TPU)
            torch._dynamo.mark_dynamic(xt, 0)
            torch.testing.assert_close(cm(xt).cpu(), m(x), rtol=1e-4, atol=1e-5)
    b1, c1 = _bucketed_and_captured()
    assert b1 - b0 == 1 and c1 - c0 == 2  # buckets 8 and 16


def test_dynamic_training_step_pads_the_forward_and_matches_cpu():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    mt = copy.deepcopy(m).to(TPU)
    cm = torch.compile(mt, backend="tpu", dynamic=True)
    for n in (3, 5, 6, 7):
        x = torch.randn(n, 8)
        w = torch.randn(n, 4)
        (cm(x.to(TPU)) * w.to(TPU)).sum().backward()
        (m(x) * w).sum().backward()
    for a, b in zip(mt.parameters(), m.parameters()):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)


def test_dynamic_graphs_that_mix_rows_are_not_padded():
    # Attention over a dynamic sequence, and a reduction over a dynamic batch,
    # would see the padding: they compile per size and still match CPU.
    torch.manual_seed(0)
    enc = torch.nn.TransformerEncoder(torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, dropout=0.0), 1,
                                      enable_nested_tensor=False).eval()
    cm = torch.compile(copy.deepcopy(enc).to(TPU), backend="tpu", dynamic=True)

    def f(x):
        return torch.softmax(x, 0) * x.mean(0)

    cf = torch.compile(f, backend="tpu", dynamic=True)
    b0, _ = _bucketed_and_captured()
    with torch.no_grad():
        for n in (3, 5, 6):
            x = torch.randn(2, n, 16)
            torch.testing.assert_close(cm(x.to(TPU)).cpu(), enc(x), rtol=1e-4, atol=1e-5)
            y = torch.randn(n, 4)
            torch.testing.assert_close(cf(y.to(TPU)).cpu(), f(y))
    assert _bucketed_and_captured()[0] == b0


def test_dynamic_shapes_share_a_bucket_capture():
    def f(x):
        return (x.sin() * 2).sum(0) + x.shape[0]

    cf = torch.compile(f, backend="tpu", dynamic=True)
    before = debug.metrics()
    for n in (4, 5, 6, 4, 5, 6, 7):
        x = torch.randn(n, 3)
        torch.testing.assert_close(cf(x.to(TPU)).cpu(), f(x))
    after = debug.metrics()
    assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == 1  # one symbolic graph
    # The sum over the dynamic dim and the size read as a number run at the
    # bucket size 8 with a mask and the real size: one capture, then replays.
    assert after["replays"] - before["replays"] == 6


def test_tpu_compiles_skip_dynamos_guard_latency_profile(monkeypatch):
    # Dynamo times each frame's guards once after a cache flush, for a log
    # line; tpu compiles skip it (a tenth of a small model's first compiled
    # step), other backends keep it.
    import torch._dynamo.guards as guards

    calls = []
    monkeypatch.setattr(guards.profile_guard_manager, "__wrapped__", lambda *a, **k: calls.append(a) or 0.0)

    def f(x):
        return (x * 2).sum()

    x = torch.randn(6)
    torch.testing.assert_close(torch.compile(f, backend="tpu")(x.to(TPU)).cpu(), f(x))
    assert calls == []
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(f, backend="aot_eager")(x), f(x))
    assert len(calls) >= 1


def test_tpu_compiles_skip_dynamos_function_name_lookup(monkeypatch):
    # Dynamo tokenizes each traced source file to name functions in a log
    # line it builds even with the log off; tpu compiles skip it.
    import torch._dynamo.symbolic_convert as sc

    calls = []
    monkeypatch.setattr(sc.get_funcname, "__wrapped__", lambda *a: calls.append(a))
    m = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())
    x = torch.randn(2, 4)
    ref = m(x)
    torch.testing.assert_close(torch.compile(m.to(TPU), backend="tpu")(x.to(TPU)).cpu(), ref)
    assert calls == []
    torch._dynamo.reset()
    torch.testing.assert_close(torch.compile(m.cpu(), backend="aot_eager")(x), ref)
    assert len(calls) >= 1


def _without_aot():
    from torch_tpu import _compile

    return _compile.stats["without_aot"]


@pytest.mark.parametrize("force_aot", [False, True])
def test_training_step_graphs_skip_aot_autograd_and_match_cpu(monkeypatch, force_aot):
    # A traced training step's graph needs no autograd at run time: the
    # forward+backward (autograd.grad inside) and the AdamW step (parameters
    # and state read through get_attr, updated in place) in one graph. It
    # runs as dynamo captured it, without AOTAutograd, and is captured and
    # replayed as one program; TORCH_TPU_COMPILE_AOT=1 sends it through it.
    if force_aot:
        monkeypatch.setenv("TORCH_TPU_COMPILE_AOT", "1")

    def run(dev, compiled):
        torch.manual_seed(0)
        m = torch.nn.Sequential(torch.nn.Linear(6, 16, bias=False), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
                                torch.nn.Linear(16, 3)).to(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        g = torch.Generator().manual_seed(1)
        x, y = torch.randn(8, 6, generator=g).to(dev), torch.randint(0, 3, (8,), generator=g).to(dev)

        def step():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(m(x), y)
            out = loss.detach()
            loss.backward()
            opt.step()
            return out

        if compiled:
            step = torch.compile(step, backend="tpu")
        losses = torch.stack([step().cpu() for _ in range(5)])
        return losses, [t.detach().cpu() for t in (*m.parameters(), *m.buffers())]

    before, replays = _without_aot(), debug.metrics()["replays"]
    got, got_state = run(TPU, True)
    assert (_without_aot() - before >= 1) != force_aot
    assert debug.metrics()["replays"] - replays >= 4  # one program per step replayed from the second on
    ref, ref_state = run("cpu", False)
    torch.testing.assert_close(got, ref)
    for a, b in zip(got_state, ref_state):  # weights, BatchNorm's running stats and its step count
        torch.testing.assert_close(a, b)


def test_graph_whose_output_needs_autograd_goes_through_aot_autograd():
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 2))
    mt = copy.deepcopy(m).to(TPU)
    cm = torch.compile(mt, backend="tpu")
    before = _without_aot()
    for _ in range(3):
        x = torch.randn(3, 5)
        cm(x.to(TPU)).square().sum().backward()
        m(x).square().sum().backward()
    assert _without_aot() == before  # the forward's output requires grad: AOTAutograd splits it
    for p, q in zip(mt.parameters(), m.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad)


def test_metadata_mutations_match_cpu_and_go_through_aot_autograd():
    # Dynamo runs a metadata change of an input (unsqueeze_) between graphs;
    # one of an intermediate (t_) stays in the graph, which then goes
    # through AOTAutograd (a capture replays values, not metadata changes).
    def f(x, y):
        y.add_(1)
        x.unsqueeze_(0)
        z = x * 2
        z.t_()
        return z + 1, z

    cf = torch.compile(f, backend="tpu")
    before = _without_aot()
    for _ in range(3):
        x, y = torch.randn(4), torch.randn(3)
        xt, yt = x.to(TPU), y.to(TPU)
        got, want = cf(xt, yt), f(x, y)
        for a, b in zip(got, want):
            assert a.shape == b.shape
            torch.testing.assert_close(a.cpu(), b)
        assert xt.shape == x.shape == (1, 4)
        torch.testing.assert_close(yt.cpu(), y)
    assert _without_aot() == before + 1  # y.add_ alone: the graph with t_ went through AOTAutograd


def test_graph_without_aot_keeps_outputs_that_alias_inputs():
    def f(x):
        x.mul_(2)
        return x[1:], x.sum()

    cf = torch.compile(f, backend="tpu")
    before, replays = _without_aot(), debug.metrics()["replays"]
    for _ in range(3):
        x = torch.randn(5)
        xt = x.to(TPU)
        (view, s), (view_c, s_c) = cf(xt), f(x)
        torch.testing.assert_close(s.cpu(), s_c)
        view.add_(1)  # writes through to the input, as on CPU
        view_c.add_(1)
        torch.testing.assert_close(xt.cpu(), x)
        torch.testing.assert_close(view.cpu(), view_c)
    assert _without_aot() == before + 1
    assert debug.metrics()["replays"] - replays == 2
