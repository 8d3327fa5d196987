"""The torch.tpu device module and the device's integration with PyTorch:
autoload, PrivateUse1 naming, plugin errors, launch blocking, unimplemented
ops and the CPU fallback, mixing devices."""
import os
import subprocess
import sys
import warnings

import pytest
import torch

import torch_tpu
from tests.helpers import TPU

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_py(code, **env):
    """Runs `code` in a fresh interpreter with this checkout first on the path."""
    e = dict(os.environ)
    e["PYTHONPATH"] = ROOT + os.pathsep + e.get("PYTHONPATH", "")
    for k, v in env.items():
        if v is None:
            e.pop(k, None)
        else:
            e[k] = v
    return subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)


# An op nobody plans to implement, so the test keeps meaning "unimplemented".
# (histogramdd first reaches aten::_histogramdd_bin_edges.)
def _unimplemented(x):
    return torch.histogramdd(x.reshape(4, 2), bins=2).hist


UNIMPLEMENTED_NAME = "aten::_histogramdd_bin_edges"


# --- torch.tpu module ----------------------------------------------------------------

def test_availability_and_devices():
    assert torch.tpu.is_available()
    n = torch.tpu.device_count()
    assert n >= 1
    assert torch.tpu.current_device() == 0
    assert torch.tpu.is_initialized() or torch.zeros(1, device=TPU) is not None
    assert torch.tpu.is_initialized()


def test_set_device_and_context():
    torch.tpu.set_device(0)
    assert torch.tpu.current_device() == 0
    torch.tpu.set_device("tpu:0")
    torch.tpu.set_device(torch.device("tpu", 0))
    n = torch.tpu.device_count()
    with pytest.raises(RuntimeError, match="out of range"):
        torch.tpu.set_device(n)
    assert torch.tpu.current_device() == 0
    with pytest.raises(ValueError):
        torch.tpu.set_device("cpu")
    with torch.tpu.device(0):
        assert torch.tpu.current_device() == 0
        x = torch.ones(2, device="tpu")
        assert x.device == torch.device("tpu", 0)
    assert torch.tpu.current_device() == 0


def test_synchronize_and_names():
    x = torch.ones(3, device=TPU) + 1
    torch.tpu.synchronize()
    torch.tpu.synchronize(0)
    assert x.cpu().tolist() == [2.0, 2.0, 2.0]
    name = torch.tpu.get_device_name()
    assert isinstance(name, str) and "XLA:CPU" in name
    assert torch.tpu.get_device_name(0) == name
    props = torch.tpu.get_device_properties(0)
    assert props.name == name
    assert props.platform == "cpu"
    assert props.index == 0
    assert props.total_memory > 0
    assert "total_memory" in repr(props)


def test_seed_functions():
    torch.tpu.manual_seed(123)
    assert torch.tpu.initial_seed() == 123
    torch.tpu.manual_seed_all(321)
    assert torch.tpu.initial_seed() == 321
    torch.tpu.seed()
    s = torch.tpu.initial_seed()
    assert isinstance(s, int)
    torch.tpu.seed_all()
    # torch.manual_seed reaches the tpu generator too
    torch.manual_seed(5)
    assert torch.tpu.initial_seed() == 5
    state = torch.tpu.get_rng_state()
    assert state.dtype == torch.uint8 and state.device.type == "cpu"
    torch.tpu.manual_seed(99)
    torch.tpu.set_rng_state(state)
    assert torch.tpu.initial_seed() == 5
    assert len(torch.tpu.get_rng_state_all()) == torch.tpu.device_count()
    torch.tpu.set_rng_state_all(torch.tpu.get_rng_state_all())
    with pytest.raises(RuntimeError):
        torch.tpu.set_rng_state(torch.zeros(3, dtype=torch.uint8))


def test_rng_state_reproduces_random_values():
    torch.tpu.manual_seed(11)
    st = torch.tpu.get_rng_state()
    a = torch.rand(8, device=TPU).cpu()
    b = torch.rand(8, device=TPU).cpu()
    assert not torch.equal(a, b)
    torch.tpu.set_rng_state(st)
    assert torch.equal(torch.rand(8, device=TPU).cpu(), a)


def test_memory_allocated():
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    x = torch.empty(1024, 1024, device=TPU)  # 4 MiB
    grown = torch.tpu.memory_allocated()
    assert grown >= base + 4 * 1024 * 1024
    assert torch.tpu.max_memory_allocated() >= grown
    del x
    assert torch.tpu.memory_allocated() <= grown - 4 * 1024 * 1024
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == torch.tpu.memory_allocated()


# --- tensor / module integration ---------------------------------------------------------

def test_tensor_and_module_methods():
    t = torch.arange(4.0)
    assert not t.is_tpu
    u = t.tpu()
    assert u.is_tpu and u.device == torch.device("tpu", 0)
    assert torch.equal(u.cpu(), t)
    m = torch.nn.Linear(3, 2)
    m2 = m.tpu()
    assert m2 is m
    assert all(p.is_tpu for p in m.parameters())
    assert torch.tensor([1.0], device="tpu").is_tpu


def test_current_accelerator():
    acc = getattr(torch, "accelerator", None)
    if acc is None or not hasattr(acc, "current_accelerator"):
        pytest.skip("torch.accelerator needs a newer torch")
    assert acc.current_accelerator() == torch.device("tpu")


def test_mixing_cpu_and_tpu():
    a = torch.ones(3, device=TPU)
    with pytest.raises(RuntimeError):
        a + torch.ones(3)
    with pytest.raises(RuntimeError):
        torch.ones(3) + a
    # a 0-dim CPU tensor is a scalar
    r = a + torch.tensor(2.0)
    assert r.device.type == "tpu"
    assert r.cpu().tolist() == [3.0, 3.0, 3.0]
    r = torch.tensor(2.0) * a
    assert r.device.type == "tpu"
    assert r.cpu().tolist() == [2.0, 2.0, 2.0]


# --- unimplemented ops and the CPU fallback ------------------------------------------------

def test_unimplemented_op_raises():
    assert not torch_tpu.get_cpu_fallback()
    x = torch.randn(8, device=TPU)
    with pytest.raises(NotImplementedError) as ei:
        _unimplemented(x)
    msg = str(ei.value)
    assert UNIMPLEMENTED_NAME.split("::")[1] in msg
    assert "TORCH_TPU_CPU_FALLBACK" in msg and "set_cpu_fallback" in msg


def test_cpu_fallback_runs_counts_and_warns_once():
    x_cpu = torch.randn(8)
    x = x_cpu.to(TPU)
    torch_tpu.debug.reset_metrics()
    try:
        torch_tpu.set_cpu_fallback(True)
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            y = _unimplemented(x)
            y2 = _unimplemented(x)
    finally:
        torch_tpu.set_cpu_fallback(False)
    expected = _unimplemented(x_cpu)
    assert y.device.type == "tpu" or y.device.type == "cpu"
    torch.testing.assert_close(y.cpu(), expected)
    torch.testing.assert_close(y2.cpu(), expected)
    fb = torch_tpu.debug.metrics()["fallbacks"]
    name = UNIMPLEMENTED_NAME.split("::")[1]
    hits = {k: v for k, v in fb.items() if name in k}
    assert hits and sum(hits.values()) >= 2
    msgs = [str(m.message) for m in w if name in str(m.message) and "fallback" in str(m.message)]
    assert len(msgs) == 1
    # off again: raises
    with pytest.raises(NotImplementedError):
        _unimplemented(x)


def test_cpu_fallback_context_manager():
    x = torch.randn(8, device=TPU)
    with torch_tpu.cpu_fallback():
        assert torch_tpu.get_cpu_fallback()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _unimplemented(x)
    assert not torch_tpu.get_cpu_fallback()


def test_cpu_fallback_env_subprocess():
    code = (
        "import warnings, torch, torch_tpu\n"
        "a = torch.randn(6, 2)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    y = torch.histogramdd(a.to('tpu'), bins=3).hist\n"
        "torch.testing.assert_close(y.cpu(), torch.histogramdd(a, bins=3).hist)\n"
        "fb = torch_tpu.debug.metrics()['fallbacks']\n"
        "assert any('_histogramdd_bin_edges' in k for k in fb), fb\n"
        "assert any('fallback' in str(m.message) for m in w)\n"
        "print('OK')\n"
    )
    r = run_py(code, TORCH_TPU_CPU_FALLBACK="1")
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


# --- process-level behaviour (subprocesses) ------------------------------------------------

def test_autoload_without_import():
    r = run_py("import torch; print(torch.randn(2).to('tpu').device)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "tpu:0"


def test_autoload_disabled():
    r = run_py("import torch, sys; print('torch_tpu' in sys.modules)", TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "False"


def test_privateuse1_taken_by_another_backend():
    code = (
        "import torch\n"
        "torch.utils.rename_privateuse1_backend('foo')\n"
        "import torch_tpu\n"
    )
    r = run_py(code, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode == 1
    assert "RuntimeError" in r.stderr
    assert "'foo'" in r.stderr and "PrivateUse1" in r.stderr


def test_bad_plugin_path_is_a_clear_error():
    r = run_py("import torch\ntorch.zeros(2, device='tpu')", TORCH_TPU_PJRT_PLUGIN="/nonexistent")
    # A Python exception (exit status 1), not an abort (negative status).
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "Traceback" in r.stderr
    assert "RuntimeError" in r.stderr
    assert "/nonexistent" in r.stderr and "TORCH_TPU_PJRT_PLUGIN" in r.stderr


def test_launch_blocking_subprocess():
    code = (
        "import torch, torch_tpu\n"
        "assert torch_tpu._C._launch_blocking()\n"
        "a = torch.arange(6.0).reshape(2, 3).to('tpu')\n"
        "b = (a * 2 + 1).cpu()\n"
        "assert b.tolist() == [[1.0, 3.0, 5.0], [7.0, 9.0, 11.0]], b\n"
        "print('OK')\n"
    )
    r = run_py(code, TORCH_TPU_LAUNCH_BLOCKING="1")
    assert r.returncode == 0, r.stderr
    assert "OK" in r.stdout


@pytest.mark.parametrize("env", ["0", "1"])
def test_backward_thread(env):
    """Backward runs its tpu nodes on the calling thread by default (no
    hand-off to the engine's device thread); TORCH_TPU_BACKWARD_THREAD=1
    keeps PyTorch's device thread. Gradients are CPU's either way."""
    code = (
        "import threading, torch, torch_tpu\n"
        "seen = []\n"
        "w = torch.randn(3, 4, requires_grad=True)\n"
        "x = torch.randn(5, 3)\n"
        "wt = w.detach().to('tpu').requires_grad_()\n"
        "y = (x.to('tpu') @ wt).tanh().sum()\n"
        "y.grad_fn.register_hook(lambda *a: seen.append(threading.get_ident()))\n"
        "y.backward()\n"
        "(x @ w).tanh().sum().backward()\n"
        "torch.testing.assert_close(wt.grad.cpu(), w.grad)\n"
        "print('SAME' if seen == [threading.get_ident()] else 'OTHER')\n"
        # A thread started later keeps PyTorch's default (the switch is thread-local).
        "t = threading.Thread(target=lambda: seen.append(torch._C._is_multithreading_enabled()))\n"
        "t.start(); t.join(); print('THREAD', seen[-1])\n"
    )
    r = run_py(code, TORCH_TPU_BACKWARD_THREAD=env)
    assert r.returncode == 0, r.stderr
    assert ("SAME" if env == "0" else "OTHER") in r.stdout, r.stdout
    assert "THREAD True" in r.stdout, r.stdout


def test_multiple_cpu_devices_in_a_subprocess():
    import subprocess
    import sys
    code = (
        "import torch\n"
        "assert torch.tpu.device_count() == 2\n"
        "a = torch.ones(3, device='tpu:1'); b = a * 2\n"
        "assert b.device == torch.device('tpu:1')\n"
        "c = b.to('tpu:0'); assert c.device == torch.device('tpu:0')\n"
        "assert (c + 1).cpu().tolist() == [3.0, 3.0, 3.0]\n"
        "with torch.tpu.device(1):\n"
        "    assert torch.zeros(2, device='tpu').device == torch.device('tpu:1')\n"
        "try:\n"
        "    a + c\n"
        "    raise SystemExit('mixing devices did not raise')\n"
        "except RuntimeError as e:\n"
        "    assert 'same device' in str(e)\n"
        "print('ok')\n"
    )
    env = dict(__import__("os").environ, TORCH_TPU_NUM_CPU_DEVICES="2")
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr


def test_module_to_tpu_keeps_tied_weights():
    emb = torch.nn.Embedding(10, 4)
    head = torch.nn.Linear(4, 10, bias=False)
    head.weight = emb.weight
    model = torch.nn.ModuleDict({"emb": emb, "head": head})
    p_before = emb.weight
    model.to("tpu")
    assert model["emb"].weight is model["head"].weight
    assert model["emb"].weight is p_before  # swapped in place, same Parameter
    assert model["emb"].weight.device.type == "tpu"
    model.to("cpu")
    assert model["emb"].weight is model["head"].weight


def test_xla_options_env():
    code = (
        "import torch, torch_tpu\n"
        "x = (torch.arange(4.0, device='tpu') * 3).cpu()\n"
        "assert x.tolist() == [0.0, 3.0, 6.0, 9.0], x\n"
        "print('OK')\n"
    )
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        ok = run_py(code, TORCH_TPU_XLA_OPTIONS="xla_backend_optimization_level=1", TORCH_TPU_CACHE_DIR=d)
        assert ok.returncode == 0 and "OK" in ok.stdout, ok.stderr
        bad = run_py(code, TORCH_TPU_XLA_OPTIONS="xla_no_such_option=1", TORCH_TPU_CACHE_DIR=d)
        assert bad.returncode != 0 and "No such compile option" in bad.stderr, bad.stderr
        assert "Traceback" in bad.stderr  # a Python exception, not an abort
        malformed = run_py(code, TORCH_TPU_XLA_OPTIONS="xla_backend_optimization_level", TORCH_TPU_CACHE_DIR=d)
        assert malformed.returncode != 0 and "expected name=value" in malformed.stderr, malformed.stderr


def test_synchronize_waits_for_work_whose_results_were_dropped():
    # The results of these matmuls are freed at once, while XLA still runs
    # them; synchronize() (and an Event recorded after them) must still wait,
    # or "run, synchronize, read the clock" would time nothing.
    a = torch.randn(1024, 1024, device=TPU)
    (a @ a).cpu()
    torch.tpu.synchronize()
    for _ in range(6):
        a @ a
    assert torch_tpu._C._work_in_flight() > 0
    ev = torch.tpu.Event()
    ev.record()
    ev.synchronize()
    assert ev.query()
    torch.tpu.synchronize()
    assert torch_tpu._C._work_in_flight() == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread niceness is a Linux notion")
@pytest.mark.parametrize("env, expect", [(None, 5), ("0", 0), ("12", 12)])
def test_xla_cpu_worker_threads_rank_below_python(env, expect):
    """XLA:CPU's worker threads (the PJRT client's Eigen pools) run
    TORCH_TPU_CPU_WORKER_NICE levels below the Python thread, which keeps
    its own priority; results are unchanged."""
    code = (
        "import os, torch, torch_tpu\n"
        "x = torch.arange(6.0, device='tpu')\n"
        "torch.testing.assert_close((x * 2).cpu(), torch.arange(6.0) * 2)\n"
        "threads = torch_tpu._C._plugin_threads()\n"
        "live = set(int(t) for t in os.listdir('/proc/self/task'))\n"
        "assert threads and all(tid in live and tid != os.getpid() for tid, _ in threads), threads\n"
        "print(sorted({n for _, n in threads}), os.getpriority(os.PRIO_PROCESS, 0))\n"
    )
    r = run_py(code, TORCH_TPU_CPU_WORKER_NICE=env)
    assert r.returncode == 0, r.stderr
    main = os.getpriority(os.PRIO_PROCESS, 0)  # the child's Python thread inherits this process's
    assert r.stdout.split("\n")[0] == f"[{min(main + expect, 19)}] {main}", r.stdout


def test_bad_cpu_worker_nice_is_a_clear_error():
    r = run_py("import torch, torch_tpu\ntorch.zeros(2, device='tpu')", TORCH_TPU_CPU_WORKER_NICE="high")
    assert r.returncode == 1, (r.returncode, r.stderr)
    assert "RuntimeError" in r.stderr and "TORCH_TPU_CPU_WORKER_NICE must be an integer from 0 to 19" in r.stderr


def test_pinned_host_memory_is_reported_pinned():
    # DDP's unused-parameter reduction allocates a pinned host buffer and
    # asserts is_pinned(); DataLoader(pin_memory=True) and non_blocking
    # copies rely on the same contract, views included.
    t = torch.empty(6, pin_memory=True)
    assert t.is_pinned() and t[2:].is_pinned()
    assert not torch.empty(6).is_pinned()
    src = torch.arange(6.0)
    pinned = src.pin_memory()
    assert pinned.is_pinned() and pinned.data_ptr() != src.data_ptr()
    got = pinned.to("tpu", non_blocking=True)
    torch.testing.assert_close(got.cpu(), src)
