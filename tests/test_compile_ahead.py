"""Strict eager's compile-ahead queue (eager/strict_driver.cc): a cache miss
compiles on a pool thread while later ops go on recording; ops that read a
queued value wait behind it, independent ops run at once. Every case checks
values against PyTorch on CPU, and the queue must be invisible: the same
results, the same errors, bit-identical training to TORCH_TPU_COMPILE_THREADS=0."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
import torch._dynamo

import torch_tpu
from torch_tpu import _C, debug

TPU = "tpu"
pytestmark = pytest.mark.skipif(_C._compile_threads() == 0, reason="compile-ahead is off on one core")


@pytest.fixture(autouse=True)
def _slow_compiles():
    # Each compile waits 300 ms before it starts, so the ops after a miss
    # reliably find it still queued (the tests assert that they do).
    _C._internal_set_compile_delay_ms(300)
    yield
    _C._internal_set_compile_delay_ms(0)
    _C._drain_compile_ahead()


def queued():
    return _C._compile_ahead_queued()


def _fresh(n):
    """A size no other test uses: every op on it misses the memory cache."""
    return 1009 + 17 * n


def test_misses_compile_ahead_and_match_cpu():
    before = debug.metrics()
    n = _fresh(1)
    x = torch.randn(n)
    t = x.to(TPU)
    # A chain of misses, each reading the last one's queued value.
    y = ((t * 3 + 1).sin() / 2).exp().cumsum(0)
    assert queued() >= 5
    after = debug.metrics()
    assert after["compiles_ahead"] - before["compiles_ahead"] >= 5
    torch.testing.assert_close(y.cpu(), ((x * 3 + 1).sin() / 2).exp().cumsum(0))


def test_in_place_ops_on_views_of_queued_values():
    n = _fresh(2)
    x = torch.randn(4, n)
    t = x.to(TPU)
    a = t.cos()
    assert queued() == 1
    a[1:3].mul_(2)  # a partial write of a queued storage
    a[:, ::2].add_(1)  # strided view, queued behind it
    col = a[:, 5].clone()
    ref = x.cos()
    ref[1:3].mul_(2)
    ref[:, ::2].add_(1)
    torch.testing.assert_close(a.cpu(), ref)
    torch.testing.assert_close(col.cpu(), ref[:, 5])


def test_host_read_in_the_middle_runs_the_queue():
    n = _fresh(3)
    x = torch.randn(n)
    t = x.to(TPU)
    s = (t.tanh() * 5).sum()
    assert queued() >= 2
    mid = s.item()  # a sync point: everything queued before it runs
    assert queued() == 0
    y = t.tanh() * mid
    torch.testing.assert_close(mid, float((x.tanh() * 5).sum()), rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(y.cpu(), x.tanh() * mid)


def test_a_host_read_runs_the_queue_only_up_to_its_value():
    # A training loop's first loss is read while its backward and optimizer
    # step still compile: the read waits for the calls up to the one that
    # writes the value, not for the ones queued after it.
    n = _fresh(40)
    x = torch.randn(n)
    t = x.to(TPU)
    a = t.sin() * 2
    later = (t.cos() + 3).exp()
    assert queued() >= 5
    torch.testing.assert_close(a.cpu(), x.sin() * 2)
    assert queued() >= 3, "the calls after the value read must stay queued"
    # A strided view of a queued value: its copy queues at the end, so the
    # read runs everything before it.
    torch.testing.assert_close(later[::3].cpu(), (x.cos() + 3).exp()[::3])
    assert queued() == 0
    torch.testing.assert_close(later.cpu(), (x.cos() + 3).exp())


def test_an_independent_hit_overwrites_a_queued_value():
    n = _fresh(4)
    x = torch.randn(n)
    t = x.to(TPU)
    warm = torch.zeros(n, device=TPU)
    warm.fill_(2.0)  # compiles fill_ for this size, so the next fill_ is a hit
    warm.cpu()
    out = t.asinh()  # a miss: queued, its storage pending
    assert queued() == 1
    keep = out.view(-1)  # the same storage
    out.fill_(7.0)  # a hit that reads nothing queued: runs at once, and wins
    assert queued() == 1  # asinh still waits for its compile
    torch.testing.assert_close(keep.cpu(), torch.full((n,), 7.0))


def test_freed_intermediates_and_reused_storages():
    n = _fresh(5)
    x = torch.randn(n)
    t = x.to(TPU)
    acc = torch.zeros(n, device=TPU)
    ref = torch.zeros(n)
    most = 0
    for k in range(6):
        tmp = (t + k).atan()  # freed while its value may still be queued
        acc = acc + tmp
        ref = ref + (x + k).atan()
        del tmp
        most = max(most, queued())
    assert most >= 3
    torch.testing.assert_close(acc.cpu(), ref)


def test_optimizer_step_reads_queued_gradients():
    torch.manual_seed(0)
    n = _fresh(6) % 61 + 3
    model = torch.nn.Sequential(torch.nn.Linear(n, 23), torch.nn.Tanh(), torch.nn.Linear(23, 5))
    ref = torch.nn.Sequential(torch.nn.Linear(n, 23), torch.nn.Tanh(), torch.nn.Linear(23, 5))
    ref.load_state_dict(model.state_dict())
    model.to(TPU)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ropt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    x, y = torch.randn(9, n), torch.randn(9, 5)
    for i in range(3):
        for m, o, xx, yy in ((model, opt, x.to(TPU), y.to(TPU)), (ref, ropt, x, y)):
            o.zero_grad()
            torch.nn.functional.mse_loss(m(xx), yy).backward()
            if i == 0 and m is model:
                assert queued() >= 1
            o.step()  # fused eager's program reads the queued gradients
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5)


def test_errors_still_raise_at_the_op():
    n = _fresh(7)
    x = torch.randn(n)
    t = x.to(TPU).exp()
    assert queued() == 1
    with pytest.raises(RuntimeError, match="size of tensor a"):
        t + torch.ones(n + 1, device=TPU)  # shape checks run before anything is queued
    with pytest.raises(torch.OutOfMemoryError):
        torch.empty(10**12, device=TPU).fill_(1.0)  # large results run at once
    torch.testing.assert_close(t.cpu(), x.exp())  # the queued op ran, unharmed


def test_metrics_count_finished_work():
    n = _fresh(8)
    debug.reset_metrics()
    y = torch.randn(n, device=TPU).sinh().cosh()
    m = debug.metrics()  # reading the metrics runs the queue first
    assert m["compiles"] >= 3 and m["executions"] >= 3
    assert "compiled ahead" in debug.metrics_report()
    y.cpu()


def test_a_fused_graph_that_misses_is_queued_not_compiled_in_place():
    # Fused eager's flush queues a graph whose program misses, so Python
    # records the next ops (dynamo traces the next frame) while it compiles.
    n = _fresh(9)
    x = torch.randn(n)
    before = debug.metrics()
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        outs = []
        for _ in range(2):  # the second graph is the same program, still compiling
            t = x.to(TPU)
            y = (t.sin() * 2 + 1).exp()
            torch_tpu.mark_step()
            assert queued() >= 1
            outs.append(y)
        z = outs[0] + outs[1]  # a fused op reading both queued values
    torch.testing.assert_close(z.cpu(), 2 * (x.sin() * 2 + 1).exp())
    after = debug.metrics()
    assert after["compiles_ahead"] - before["compiles_ahead"] >= 1
    # One compile for the two identical graphs (the second waits for the
    # first's), one for the sum.
    assert after["compiles"] - before["compiles"] == 2


def test_a_compiled_graph_runs_from_the_queue_and_then_replays():
    torch._dynamo.reset()
    n = _fresh(10) % 53 + 7
    model = torch.nn.Sequential(torch.nn.Linear(n, 11), torch.nn.GELU(), torch.nn.Linear(11, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(n, 11), torch.nn.GELU(), torch.nn.Linear(11, 3))
    ref.load_state_dict(model.state_dict())
    model.to(TPU)
    opt, ropt = torch.optim.SGD(model.parameters(), lr=0.1), torch.optim.SGD(ref.parameters(), lr=0.1)
    x, y = torch.randn(5, n), torch.randn(5, 3)
    xt, yt = x.to(TPU), y.to(TPU)

    @torch.compile(backend="tpu")
    def step():
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xt), yt)
        out = loss.detach()
        loss.backward()
        opt.step()
        return out

    before = debug.metrics()
    for i in range(3):
        got = step()
        if i == 0:
            assert queued() >= 1  # the step's last program is still compiling
        ropt.zero_grad()
        expected = torch.nn.functional.mse_loss(ref(x), y)
        expected.backward()
        ropt.step()
        torch.testing.assert_close(got.cpu(), expected.detach(), rtol=1e-5, atol=1e-5)
    after = debug.metrics()
    assert after["replays"] - before["replays"] >= 2  # the captures from the queued run replay
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-5, atol=1e-5)
    torch._dynamo.reset()


_TRAIN = r"""
import json, os, torch, torch_tpu
from torch_tpu.bench.train import torch_setup
torch.manual_seed(0)
step = torch_setup("gpt", "tpu")
if os.environ["MODE"] == "fused":
    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
elif os.environ["MODE"] == "compile":
    step = torch.compile(step, backend="tpu")
losses = [step().cpu().item() for _ in range(3)]
m = torch_tpu.debug.metrics()
torch_tpu.cache.flush()
print(json.dumps({"losses": losses, "ahead": m["compiles_ahead"], "compiles": m["compiles"]}))
"""


def _train(tmp_path, threads, mode="strict"):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path / f"cache{threads}"), TORCH_TPU_COMPILE_THREADS=threads,
               MODE=mode)
    env.pop("TORCH_TPU_TIERED_COMPILE", None)
    p = subprocess.run([sys.executable, "-c", _TRAIN], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_training_is_bit_identical_with_and_without_compile_ahead(tmp_path):
    ahead = _train(tmp_path, "2")
    plain = _train(tmp_path, "0")
    # Nearly every program of the step compiles ahead (41 programs since
    # attention became two; 61 before).
    assert ahead["ahead"] >= 0.8 * ahead["compiles"] >= 0.8 * 30 and plain["ahead"] == 0, (ahead, plain)
    assert ahead["compiles"] == plain["compiles"]
    # The same programs run in the same order on the same values.
    assert ahead["losses"] == plain["losses"]


@pytest.mark.parametrize("mode", ["fused", "compile"])
def test_queued_graphs_train_bit_identically(tmp_path, mode):
    # Fused eager's and torch.compile's graphs go through the same queue:
    # the same programs on the same values as compiling each in place.
    ahead = _train(tmp_path, "2", mode)
    plain = _train(tmp_path, "0", mode)
    assert ahead["ahead"] >= 1 and plain["ahead"] == 0, (ahead, plain)
    assert ahead["compiles"] == plain["compiles"]
    assert ahead["losses"] == plain["losses"]


_FORK = r"""
import os, sys, torch, torch_tpu
torch_tpu._C._internal_set_compile_delay_ms(300)
x = torch.arange(1000, dtype=torch.float32, device="tpu") / 1000
y = x.sin().cos().exp()  # queued: the compiles are held back
assert torch_tpu._C._compile_ahead_queued() >= 1
pid = os.fork()
if pid == 0:
    sys.exit(0)  # the child's exit flushes the cache: it must not wait for the parent's compiles
_, status = os.waitpid(pid, 0)
ref = (torch.arange(1000, dtype=torch.float32) / 1000).sin().cos().exp()
torch.testing.assert_close(y.cpu(), ref)
print("STATUS", status)
"""


def test_a_forked_child_exits_without_waiting_for_the_parents_queue(tmp_path):
    env = dict(os.environ, TORCH_TPU_CACHE_DIR=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", _FORK], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.split("STATUS")[1].strip() == "0"
