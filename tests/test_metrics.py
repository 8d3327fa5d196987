"""torch_tpu.debug.metrics() counters and metrics_report().

Each test uses shapes no other test uses, so "first call compiles" holds
whatever ran before in this process."""
import torch

import torch_tpu
from tests.helpers import TPU

KEYS = ["ops_dispatched", "compiles", "compile_ms", "cache_hits", "cache_misses", "executions",
        "h2d_transfers", "h2d_bytes", "d2h_transfers", "d2h_bytes", "fallbacks", "cached_executables",
        "background_compiles", "background_compile_ms", "background_pending"]


def m():
    return torch_tpu.debug.metrics()


def delta(before, after, key):
    return after[key] - before[key]


def test_keys_and_reset():
    d = m()
    for k in KEYS:
        assert k in d
    assert isinstance(d["fallbacks"], dict)
    torch.ones(3, device=TPU) + 1
    torch_tpu.debug.reset_metrics()
    d = m()
    for k in ["ops_dispatched", "compiles", "cache_hits", "cache_misses", "executions",
              "h2d_transfers", "h2d_bytes", "d2h_transfers", "d2h_bytes"]:
        assert d[k] == 0, k
    assert d["fallbacks"] == {}


def test_compile_once_then_hit():
    x = torch.randn(37, 3).to(TPU)
    y = torch.randn(37, 3).to(TPU)
    b = m()
    z = x + y
    a = m()
    assert delta(b, a, "ops_dispatched") >= 1
    assert delta(b, a, "compiles") == 1
    assert delta(b, a, "cache_misses") == 1
    assert delta(b, a, "executions") == 1
    assert a["cached_executables"] >= 1
    b = m()
    for _ in range(3):
        z = x + y
    a = m()
    assert delta(b, a, "compiles") == 0
    assert delta(b, a, "cache_misses") == 0
    assert delta(b, a, "cache_hits") == 3
    assert delta(b, a, "executions") == 3
    assert delta(b, a, "ops_dispatched") == 3
    torch.testing.assert_close(z.cpu(), x.cpu() + y.cpu())


def test_python_scalars_share_executable():
    x = torch.randn(41, 2).to(TPU)
    b = m()
    r1 = x + 0.5
    mid = m()
    r2 = x + 0.7
    a = m()
    assert delta(b, mid, "compiles") == 1
    assert delta(mid, a, "compiles") == 0
    assert delta(mid, a, "cache_hits") == 1
    torch.testing.assert_close(r2.cpu() - r1.cpu(), torch.full((41, 2), 0.2), atol=1e-6, rtol=0)


def test_new_shape_compiles_again():
    x = torch.randn(43).to(TPU)
    x * 2.0
    b = m()
    torch.randn(44).to(TPU) * 2.0
    a = m()
    assert delta(b, a, "compiles") == 1


def test_transfer_counts_and_bytes():
    src = torch.randn(17, 5)
    b = m()
    x = src.to(TPU)
    a = m()
    assert delta(b, a, "h2d_transfers") == 1
    assert delta(b, a, "h2d_bytes") == 17 * 5 * 4
    b = m()
    back = x.cpu()
    a = m()
    assert delta(b, a, "d2h_transfers") == 1
    assert delta(b, a, "d2h_bytes") == 17 * 5 * 4
    assert torch.equal(back, src)
    b = m()
    torch.arange(10, dtype=torch.int64).to(TPU).cpu()
    a = m()
    # A small integer upload carries its room (twice its length rounded up
    # to a power of two: 32 elements, ops/shape/append.cc); the copy back
    # reads the tensor's own 10.
    assert delta(b, a, "h2d_bytes") == 32 * 8 and delta(b, a, "d2h_bytes") == 80


def test_compile_time_accumulates():
    b = m()
    torch.randn(47, 3).to(TPU).mul(3.0)
    a = m()
    assert a["compile_ms"] > b["compile_ms"]


def test_report_text():
    torch.ones(2, device=TPU) * 2
    text = torch_tpu.debug.metrics_report()
    assert isinstance(text, str)
    for name in ["ops dispatched", "executions", "compiles", "cache hits", "cache misses",
                 "host->device", "device->host", "bytes", "cpu fallbacks"]:
        assert name in text, name
    assert len(text.splitlines()) >= 8


def test_compiles_by_op():
    torch_tpu.debug.reset_metrics()
    x = torch.randn(53, 7).to(TPU)
    (x * 3).exp().cpu()
    by_op = m()["compiles_by_op"]
    assert set(by_op) >= {"mul", "exp"}
    n, ms = by_op["exp"]
    assert n == 1 and ms > 0
    assert "compiles by op" in torch_tpu.debug.metrics_report()
    x2 = torch.randn(53, 7).to(TPU)
    (x2 * 3).exp().cpu()  # cache hits: nothing new
    assert m()["compiles_by_op"]["exp"][0] == 1


def test_reset_clears_the_compile_graph_counts():
    f = torch.compile(lambda a: a * 2 + 1, backend="tpu")
    f(torch.ones(3, device=TPU)).cpu()
    assert "torch.compile graphs" in torch_tpu.debug.metrics_report()
    torch_tpu.debug.reset_metrics()
    assert "torch.compile graphs" not in torch_tpu.debug.metrics_report()
    assert m()["replays"] == 0
