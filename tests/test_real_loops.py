"""Training steps written the way scripts write them, under
torch.compile(backend="tpu"): the step returns its loss (and logits or a
metric), zeroes gradients first or last, clips them, scales them; results
are checked against the same loop in CPU eager, and the step must stay one
dynamo graph without a break."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo
import torch.nn.functional as F

from torch_tpu import debug

TPU = torch.device("tpu")


pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _batches(n, g_seed=1):
    g = torch.Generator().manual_seed(g_seed)
    return [(torch.randn(16, 8, generator=g), torch.randint(0, 4, (16,), generator=g)) for _ in range(n)]


def _model(dev):
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4)).to(dev)


FORMS = ["return_loss", "return_loss_and_logits", "return_metric", "zero_grad_first", "set_to_none_false",
         "clip_grad_norm"]


def _step_fn(form, m, opt):
    def step(x, y):
        if form == "zero_grad_first":
            opt.zero_grad()
        elif form == "set_to_none_false":
            opt.zero_grad(set_to_none=False)
        logits = m(x)
        loss = F.cross_entropy(logits, y)
        loss.backward()
        if form == "clip_grad_norm":
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
        opt.step()
        if form not in ("zero_grad_first", "set_to_none_false"):
            opt.zero_grad()
        if form == "return_loss_and_logits":
            return loss, logits
        if form == "return_metric":
            return loss, (logits.argmax(-1) == y).float().mean()
        return loss

    return step


@pytest.mark.parametrize("form", FORMS)
def test_the_usual_training_step_stays_one_graph(form):
    # `return loss` after loss.backward() made dynamo restart the trace with
    # a graph break at backward (the returned tensor's autograd graph was
    # consumed), so backward and the optimizer step left the program. Each
    # common shape of a step is now one graph with no break, and its
    # returned values, gradients and weights are CPU eager's.
    batches = _batches(5)

    def run(dev):
        m = _model(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2)
        step = _step_fn(form, m, opt)
        fn = torch.compile(step, backend="tpu") if dev == TPU else step
        outs = []
        for i, (x, y) in enumerate(batches):
            if i == 3:
                before = debug.metrics()
            r = fn(x.to(dev), y.to(dev))
            outs.append([t.detach().cpu() for t in (r if isinstance(r, tuple) else (r,))])
        if dev == TPU:
            after = debug.metrics()
            assert not torch._dynamo.utils.counters["graph_break"], dict(torch._dynamo.utils.counters["graph_break"])
            # set_to_none=False sees no gradient on the first call and one
            # after: two graphs, as on CPU; the others one.
            assert torch._dynamo.utils.counters["stats"]["unique_graphs"] == (2 if form == "set_to_none_false" else 1)
            assert after["compiles"] == before["compiles"]
            assert after["ops_dispatched"] == before["ops_dispatched"]  # replays, no op runs
            # The returned loss reads as in eager: printing, .item().
            assert isinstance(outs[-1][0].item(), float) and "tensor(" in repr(r[0] if isinstance(r, tuple) else r)
        return outs, [p.detach().cpu() for p in m.parameters()], [None if p.grad is None else p.grad.cpu()
                                                                  for p in m.parameters()]

    (got, got_p, got_g), (ref, ref_p, ref_g) = run(TPU), run("cpu")
    for a, b in zip(got, ref):
        for u, v in zip(a, b):
            # atol 1e-5: logits of order 1 after four AdamW steps, where XLA's
            # and ATen's float32 matmuls sum in different orders.
            torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-5)
    for u, v in zip(got_p, ref_p):
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-6)
    for u, v in zip(got_g, ref_g):
        assert (u is None) == (v is None)
        if u is not None:
            torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-6)


def test_a_returned_loss_is_detached_from_the_consumed_graph():
    # In eager, the loss backward() consumed cannot be backpropagated again;
    # the compiled step returns it detached (the one visible difference).
    m = _model(TPU)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    fn = torch.compile(_step_fn("return_loss", m, opt), backend="tpu")
    x, y = _batches(1)[0]
    loss = fn(x.to(TPU), y.to(TPU))
    assert not loss.requires_grad and loss.grad_fn is None


@pytest.mark.parametrize("fused", [False, True], ids=["foreach", "fused"])
def test_grad_scaler_step_matches_cpu(fused):
    # GradScaler.scale runs outside the graph (dynamo skips torch.amp), so the
    # scaled loss reaches the next graph with a grad_fn of its own. Tracing
    # its backward() found no leaf in that graph and made it a no-op: no
    # gradient at all, and GradScaler raised "No inf checks were recorded".
    # Such a backward() is left to the autograd engine.
    batches = _batches(4)

    def run(dev):
        m = _model(dev)
        opt = torch.optim.AdamW(m.parameters(), lr=1e-2, fused=fused)
        scaler = torch.amp.GradScaler(dev.type if isinstance(dev, torch.device) else dev, init_scale=256.0)

        def step(x, y):
            loss = F.cross_entropy(m(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad()
            return loss

        fn = torch.compile(step, backend="tpu") if dev == TPU else step
        losses = [fn(x.to(dev), y.to(dev)).detach().cpu() for x, y in batches]
        return losses, [p.detach().cpu() for p in m.parameters()], scaler.get_scale()

    (got, got_p, got_s), (ref, ref_p, ref_s) = run(TPU), run("cpu")
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for u, v in zip(got_p, ref_p):
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-6)
    assert got_s == ref_s


# --- Changing hyperparameters never recompile ---------------------------------
def _hf_cosine(opt):
    transformers = pytest.importorskip("transformers")
    return transformers.get_cosine_schedule_with_warmup(opt, num_warmup_steps=3, num_training_steps=20)


def _hf_linear(opt):
    transformers = pytest.importorskip("transformers")
    return transformers.get_linear_schedule_with_warmup(opt, num_warmup_steps=3, num_training_steps=20)


SCHEDULERS = {
    "step": lambda o: torch.optim.lr_scheduler.StepLR(o, step_size=2, gamma=0.7),
    "cosine": lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20),
    "one_cycle": lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.05, total_steps=20),
    "linear_warmup": lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.1, total_iters=5),
    "lambda": lambda o: torch.optim.lr_scheduler.LambdaLR(o, lambda e: 1.0 / (1 + e)),
    "sequential": lambda o: torch.optim.lr_scheduler.SequentialLR(o, [
        torch.optim.lr_scheduler.LinearLR(o, start_factor=0.2, total_iters=3),
        torch.optim.lr_scheduler.ExponentialLR(o, gamma=0.9)], milestones=[3]),
    "plateau": lambda o: torch.optim.lr_scheduler.ReduceLROnPlateau(o, factor=0.5, patience=0),
    "hf_cosine_warmup": _hf_cosine,
    "hf_linear_warmup": _hf_linear,
}

OPTIMIZERS = {
    "sgd": lambda ps: torch.optim.SGD(ps, lr=0.05),
    "adam": lambda ps: torch.optim.Adam(ps, lr=1e-2),
    "adamw": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
    "adagrad": lambda ps: torch.optim.Adagrad(ps, lr=0.05),
    "rmsprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-2),
    "adamw_fused": lambda ps: torch.optim.AdamW(ps, lr=1e-2, fused=True),
    "sgd_fused": lambda ps: torch.optim.SGD(ps, lr=0.05, fused=True),
    "adam_cpu_tensor_lr": lambda ps: torch.optim.Adam(ps, lr=torch.tensor(1e-2)),
}


def _scheduled_run(dev, make_opt, make_sched, steps=8, trace_backward=True, warmup=3):
    """Losses and weights of a compiled step with a scheduler stepped after
    each call, and (on tpu) the programs compiled after `warmup` steps."""
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3)).to(dev)
    opt = make_opt(list(m.parameters()))
    sched = make_sched(opt)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(5, 6, generator=g).to(dev), torch.randn(5, 3, generator=g).to(dev)

    def step(x, y):
        loss = (m(x) - y).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    fn = torch.compile(step, backend="tpu", options={"trace_backward": trace_backward}) if dev == TPU else step
    losses, lrs = [], []
    for i in range(steps):
        if i == warmup and dev == TPU:
            before = debug.metrics()["compiles"]
        loss = fn(x, y)
        losses.append(loss.detach().cpu())
        if isinstance(sched, torch.optim.lr_scheduler.ReduceLROnPlateau):
            sched.step(1.0)  # never improves: the lr halves every step
        else:
            sched.step()
        lrs.append(float(opt.param_groups[0]["lr"]))
    compiled = debug.metrics()["compiles"] - before if dev == TPU else 0
    return torch.stack(losses), [p.detach().cpu() for p in m.parameters()], lrs, compiled, opt


def _check_schedule(make_opt, make_sched, **kw):
    got, got_p, got_lr, compiled, _ = _scheduled_run(TPU, make_opt, make_sched, **kw)
    ref, ref_p, ref_lr, _, _ = _scheduled_run("cpu", make_opt, make_sched, **kw)
    assert compiled == 0, f"{compiled} programs compiled after warm-up"
    assert got_lr == ref_lr and len(set(got_lr)) > 2  # the schedule moved
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for u, v in zip(got_p, ref_p):
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("sched", sorted(SCHEDULERS))
def test_every_scheduler_runs_without_recompiling(sched):
    # Dynamo guarded on param_groups[0]['lr'] by value: a new program for
    # every step, until its recompile limit, then the optimizer ran eagerly.
    # The lr is now an input of the program: nothing compiles after warm-up,
    # and every step's loss and weights are CPU eager's with the same schedule.
    _check_schedule(OPTIMIZERS["adamw"], SCHEDULERS[sched])


@pytest.mark.parametrize("opt", sorted(OPTIMIZERS))
def test_every_optimizer_takes_a_scheduled_lr(opt):
    _check_schedule(OPTIMIZERS[opt], SCHEDULERS["cosine"])


def test_a_schedule_with_backward_left_to_the_engine():
    _check_schedule(OPTIMIZERS["adam"], SCHEDULERS["one_cycle"], trace_backward=False)


def test_the_user_sees_numbers_outside_the_step():
    # Outside a compiled call the groups hold the user's floats (schedulers,
    # get_last_lr(), state_dict(), logging see what they always did).
    _, _, _, _, opt = _scheduled_run(TPU, OPTIMIZERS["adamw"], SCHEDULERS["one_cycle"], steps=3, warmup=0)
    group = opt.param_groups[0]
    assert type(group["lr"]) is float
    assert type(group["betas"]) is tuple and all(type(b) is float for b in group["betas"])
    assert type(opt.state_dict()["param_groups"][0]["lr"]) is float


def _sgd_momentum(ps):
    return torch.optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01)


def test_one_cycle_on_sgd_cycles_momentum_without_recompiling():
    # OneCycleLR cycles SGD's momentum with its lr (cycle_momentum=True, the
    # default). torch.optim's SGD tests `momentum != 0` in Python, so the
    # momentum was baked: a recompile every step until dynamo's limit.
    _check_schedule(_sgd_momentum, SCHEDULERS["one_cycle"])


def test_momentum_and_weight_decay_changed_by_hand_match_cpu_without_recompiling():
    def make_sched(opt):
        class Tweak:
            def __init__(self):
                self.n = 0

            def step(self):
                self.n += 1
                for g in opt.param_groups:
                    g["momentum"] = 0.9 - 0.1 * (self.n % 3)
                    g["weight_decay"] = 0.01 * (1 + self.n % 2)
                    g["nesterov"] = True
        return Tweak()

    _check_schedule(_sgd_momentum, lambda o: _Both(o, make_sched(o)))


def test_changed_weight_decay_still_matches_cpu():
    # Hyperparameters that steer torch.optim's Python branches stay constants
    # of the program: a change recompiles, and the result is still CPU's.
    def make_sched(opt):
        class Decay:
            def __init__(self):
                self.n = 0

            def step(self):
                self.n += 1
                for g in opt.param_groups:
                    g["weight_decay"] = 0.01 * (self.n % 2)
        return Decay()

    def run(dev):
        losses, params, _, _, _ = _scheduled_run(dev, OPTIMIZERS["adamw"], lambda o: _Both(o, make_sched(o)), steps=5,
                                                 warmup=0)
        return losses, params

    (got, got_p), (ref, ref_p) = run(TPU), run("cpu")
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-6)
    for u, v in zip(got_p, ref_p):
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-6)


class _Both:
    """A cosine lr schedule and another stepper, stepped together."""

    def __init__(self, opt, other):
        self.sched = SCHEDULERS["cosine"](opt)
        self.other = other

    def step(self):
        self.sched.step()
        self.other.step()


# --- torch.tpu.graph: a scheduled lr reaches every replay ---------------------
def _graph_run(dev, make_opt, steps=8, change=None, scheduled=True):
    torch.manual_seed(0)
    m = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 3)).to(dev)
    opt = make_opt(list(m.parameters()), dev)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=20) if scheduled else None
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(5, 6, generator=g).to(dev), torch.randn(5, 3, generator=g).to(dev)

    def step():
        opt.zero_grad(set_to_none=False)
        loss = (m(x) - y).square().mean()
        loss.backward()
        opt.step()
        return loss

    losses = []
    for _ in range(3):  # warm-up: optimizer state exists before the capture
        losses.append(step().detach().cpu())
        if sched is not None:
            sched.step()
    if dev == TPU:
        graph = torch.tpu.TPUGraph()
        with torch.tpu.graph(graph):
            static_loss = step()
    for i in range(steps - 3):
        if change is not None and i == 2:
            change(opt)
        if dev == TPU:
            graph.replay()
            losses.append(static_loss.detach().cpu())
        else:
            losses.append(step().detach().cpu())
        if sched is not None:
            sched.step()
    return torch.stack(losses), [p.detach().cpu() for p in m.parameters()]


def test_a_tensor_lr_schedule_reaches_every_graph_replay():
    # As with CUDA graphs: a capturable optimizer whose lr is a device tensor
    # is updated in place by the scheduler, and each replay reads it.
    def make(ps, dev):
        return torch.optim.AdamW(ps, lr=torch.tensor(1e-2, device=dev), capturable=dev == TPU)

    (got, got_p), (ref, ref_p) = _graph_run(TPU, make), _graph_run("cpu", make)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)
    for u, v in zip(got_p, ref_p):
        torch.testing.assert_close(u, v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("what", ["scheduled_float_lr", "momentum"])
def test_a_number_changed_after_capture_raises_with_the_fix(what):
    # A float lr (or SGD's momentum) is a constant of the captured program: a
    # replay after it changed would run the old value in silence.
    def change(opt):
        opt.param_groups[0]["momentum"] = 0.5

    def make(ps, dev):
        return torch.optim.SGD(ps, lr=0.05, momentum=0.9)

    match = (r"param_groups\[0\]\['lr'\] of SGD changed from .* after the tpu graph was captured.*"
             r"lr=torch.tensor\(0.01, device=\"tpu\"\)" if what == "scheduled_float_lr"
             else r"param_groups\[0\]\['momentum'\] of SGD changed from 0.9 to 0.5")
    with pytest.raises(RuntimeError, match=match):
        if what == "momentum":
            _graph_run(TPU, make, change=change, scheduled=False)
        else:
            _graph_run(TPU, make)


# --- Say why it recompiled ------------------------------------------------------
def test_a_recompile_warns_once_per_cause_and_the_report_lists_it():
    from torch_tpu import _recompiles

    debug.reset_metrics()
    m = torch.nn.Linear(4, 2).to(TPU)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)

    @torch.compile(backend="tpu")
    def step(x):
        loss = m(x).sum()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return loss

    # Sizes stay static (no automatic dynamic), so each new one recompiles:
    # the first change is not warned about (dynamo's automatic dynamic
    # would have made the size symbolic), the second is.
    sizes = [3, 3, 3, 3, 5, 7]
    with pytest.warns(_recompiles.RecompileWarning) as record, \
            torch._dynamo.config.patch(automatic_dynamic_shapes=False):
        for i, n in enumerate(sizes):
            opt.param_groups[0]["dampening"] = 0.1 * (i % 3)  # a baked number
            step(torch.randn(n, 4, device=TPU))
            sched.step()  # the lr: an input, never a cause
    messages = [str(w.message) for w in record if issubclass(w.category, _recompiles.RecompileWarning)]
    momentum = [msg for msg in messages if "param_groups[0]['dampening'] of the optimizer opt changed" in msg]
    size = [msg for msg in messages if "the size of x (dim 0) changed" in msg]
    assert len(momentum) == 1 and "constants of it" in momentum[0]
    assert len(size) == 1 and "mark_dynamic" in size[0]
    assert not any("'lr'" in msg for msg in messages)
    report = debug.compile_report()
    assert "recompiles, by cause" in report and "'dampening'" in report and "the size of x" in report


def test_the_scheduled_step_warns_nothing():
    import warnings

    from torch_tpu import _recompiles

    with warnings.catch_warnings():
        warnings.simplefilter("error", _recompiles.RecompileWarning)
        _check_schedule(OPTIMIZERS["adamw"], SCHEDULERS["one_cycle"])
