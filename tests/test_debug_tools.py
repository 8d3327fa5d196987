"""torch_tpu.debug's numerics tools: compare_with_cpu finds the first module
(or gradient) that differs from CPU, and detect_nan / TORCH_TPU_DETECT_NAN
raise at the first op producing NaN or Inf, forward or backward."""
import subprocess
import sys
import warnings

import pytest
import torch
from test_device import ROOT
from torch import nn

import torch_tpu
from torch_tpu import debug


class OffOnTpu(nn.Module):
    """Adds `delta` only on tpu: a stand-in for a wrong kernel."""

    def __init__(self, delta):
        super().__init__()
        self.delta = delta

    def forward(self, x):
        return x + self.delta if x.device.type == "tpu" else x


def _mlp(middle):
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), middle, nn.Tanh(), nn.Linear(8, 3)).to("tpu")


def test_compare_with_cpu_passes_a_correct_model_and_keeps_its_grads():
    m = _mlp(nn.ReLU())
    m[0].weight.grad = torch.full_like(m[0].weight, 7.0)
    rep = debug.compare_with_cpu(m, torch.randn(5, 4))
    assert rep.ok, str(rep)
    assert [n for n, _, _ in rep.outputs] == ["0", "1", "2", "3", ""]
    assert {n for n, _, _ in rep.grads} == {n for n, _ in m.named_parameters()}
    torch.testing.assert_close(m[0].weight.grad.cpu(), torch.full((8, 4), 7.0))


def test_compare_with_cpu_names_the_first_module_that_differs():
    m = _mlp(OffOnTpu(1e-2))
    rep = debug.compare_with_cpu(m, torch.randn(5, 4))
    assert not rep.ok
    kind, name, err = rep.first_mismatch
    assert (kind, name) == ("output", "1"), str(rep)
    assert err == pytest.approx(1e-2, rel=1e-3)
    assert "the output of 1 differs" in str(rep)


def test_detect_nan_raises_at_the_op_forward_and_backward():
    with debug.detect_nan():
        with pytest.raises(RuntimeError, match=r"aten\.log\.default produced Inf .*test_debug_tools\.py"):
            torch.log(torch.tensor([1.0, 0.0], device="tpu"))
        x = torch.tensor([0.0, 4.0], device="tpu", requires_grad=True)
        y = torch.sqrt(x).sum()  # finite forward; d/dx sqrt at 0 is inf
        with pytest.raises(RuntimeError, match="produced Inf .* at the backward of SqrtBackward0"):
            y.backward()
        # With anomaly mode on, the forward line that made the node is named.
        with torch.autograd.set_detect_anomaly(True), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            y = torch.sqrt(x).sum()
            with pytest.raises(RuntimeError, match=r"SqrtBackward0 \(forward: .*test_debug_tools\.py"):
                y.backward()
        # A normal step raises nothing.
        m = _mlp(nn.ReLU())
        m(torch.randn(2, 4, device="tpu")).sum().backward()


def test_detect_nan_environment_variable():
    code = ("import torch, torch_tpu\n"
            "x = torch.tensor([-1.0], device='tpu')\n"
            "torch.sqrt(x)\n")
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300,
                       env={**__import__("os").environ, "TORCH_TPU_DETECT_NAN": "1"})
    assert p.returncode != 0 and "aten.sqrt.default produced NaN" in p.stderr, p.stderr[-2000:]
    assert torch_tpu.debug._global_nan_mode is None  # not on in this process


def test_dump_dir_writes_every_program_with_its_ops_lines_key_and_compile_time(tmp_path):
    from test_device import run_py

    dump, cache = tmp_path / "dump", tmp_path / "cache"
    code = """
import torch, torch_tpu
x = torch.arange(12.0).reshape(3, 4).to("tpu")
y = (x * 3).sum(0)  # LINE_STRICT
with torch.tpu.set_eager_mode("DEFER_AND_FUSE"):
    w = torch.relu(x - 1) * 2  # LINE_FUSED
print(w.cpu().sum().item(), y.cpu().sum().item())
"""
    script = tmp_path / "script.py"  # a file, so the dumps can quote its lines
    script.write_text(code)
    run_file = f"exec(compile(open({str(script)!r}).read(), {str(script)!r}, 'exec'))"
    for run in range(2):  # the second run loads every program from the disk cache, and dumps it too
        d = dump / str(run)
        p = run_py(run_file, TORCH_TPU_DUMP_DIR=str(d), TORCH_TPU_CACHE_DIR=str(cache))
        assert p.returncode == 0, p.stderr[-2000:]
        assert p.stdout.split() == ["110.0", "198.0"]  # relu(x - 1) * 2 and 3 * x, summed
        files = {f.name: f.read_text() for f in d.iterdir()}
        mul = next(t for n, t in files.items() if n.endswith("-mul.mlir"))
        assert "// cache key: " in mul and "stablehlo.multiply" in mul and "func.func public @main" in mul
        assert "mul  at " in mul and "# LINE_STRICT" in mul
        assert ("compiled in " in mul) if run == 0 else ("disk tier" in mul)
        fused = next(t for n, t in files.items() if "fused" in n)
        ops = [ln.split()[1] for ln in fused.splitlines() if ln.startswith("//   ")]
        assert ops == ["sub", "relu", "mul"], fused[:600]
        assert fused.count("# LINE_FUSED") == 3


def test_compile_report_explains_each_recompile(tmp_path):
    from test_device import run_py

    # A fresh process and cache: programs this process already holds are not
    # compiled again, so what the report lists depends on what ran before.
    code = """
import torch, torch_tpu
from torch_tpu import debug
for n in (5, 6):  # a new shape
    (torch.ones(n, 3, device="tpu") * 2.5).cpu()
(torch.ones(5, 3, device="tpu", dtype=torch.float64) * 2.5).cpu()  # a new dtype
for dim in (0, 1):  # the same types, a different compile-time attribute
    torch.ones(4, 4, device="tpu").cumsum(dim).cpu()
print(debug.compile_report())
debug.reset_metrics()
print(debug.compile_report())
"""
    p = run_py(code, TORCH_TPU_CACHE_DIR=str(tmp_path / "cache"))
    assert p.returncode == 0, p.stderr[-2000:]
    report = p.stdout
    assert "mul: 3 programs" in report, report
    assert "a new shape: tensor<15xf32> became tensor<18xf32>" in report, report
    assert "a new dtype: tensor<15xf32> became tensor<15xf64>" in report, report
    assert "cumsum: 2 programs" in report and "a compile-time value differs" in report, report
    assert "report: 0 programs" in report.splitlines()[-1], report


def test_profiler_shows_torch_tpu_work(tmp_path, monkeypatch):
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(16, 16)
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        t = x.to("tpu")  # host to device
        y = (t @ t.T * 1.25).relu()  # a new program: compile, then launch
        with torch.tpu.set_eager_mode("DEFER_AND_FUSE"):
            z = (y * 2 + 1).sum()
        got = z.cpu()  # fused flush, then device to host
    torch.testing.assert_close(got, ((x @ x.T * 1.25).relu() * 2 + 1).sum())
    names = {e.name for e in prof.events()}
    for span in ("tpu::host_to_device", "tpu::launch", "tpu::fused_flush", "tpu::device_to_host"):
        assert span in names, sorted(n for n in names if n.startswith("tpu::"))
    assert names & {"tpu::compile", "tpu::cache_load (disk tier)"}, sorted(names)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    assert "tpu::launch" in path.read_text()


@pytest.mark.parametrize("suffix", [".json", ".json.gz"])
def test_profiler_trace_has_device_spans(tmp_path, suffix):
    import gzip
    import json

    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    t = x.to("tpu")
    torch.tpu.synchronize()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        y = (t @ t).relu()
        with torch.tpu.set_eager_mode("DEFER_AND_FUSE"):
            z = (y * 2 + 1).sum()
        got = z.cpu()
    torch.testing.assert_close(got, ((x @ x).relu() * 2 + 1).sum(), rtol=1e-4, atol=1e-2)
    # Work outside the profiler is not recorded.
    (t + 1).cpu()

    spans = torch_tpu.debug.device_spans(prof)
    names = [s["name"] for s in spans]
    assert "gemm" in names and "relu" in names and "fused graph" in names, names
    for a, b in zip(spans, spans[1:]):
        assert a["start_ns"] <= a["end_ns"] <= b["start_ns"] <= b["end_ns"], (a, b)

    path = tmp_path / f"trace{suffix}"
    prof.export_chrome_trace(str(path))
    opener = gzip.open if suffix.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    tracks = {e["pid"]: e["args"]["name"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"}
    assert tracks.get(1_000_000) == "tpu:0 (device)", tracks
    device = [e for e in events if e.get("pid") == 1_000_000 and e.get("ph") == "X"]
    assert [e["name"] for e in device] == names
    # On Kineto's clock: each program runs after its own host launch range began.
    launches = sorted(e["ts"] for e in events if e.get("name") == "tpu::launch")
    assert len(launches) >= len(device)
    # Kineto converts its cycle-counter readings to wall time approximately
    # (off by a few ns to µs), so "after" allows 50 µs; a clock mix-up would
    # be off by days.
    assert launches[0] <= device[0]["ts"] + 50 and device[-1]["ts"] <= launches[-1] + 5e6
    assert all(e["dur"] >= 0 for e in device)
