"""The torch.cuda surface a user reaches for, on torch.tpu: streams, events,
memory statistics (also through torch.accelerator), torch.tpu.amp and the
autocast dtype in every thread."""
from __future__ import annotations

import threading

import pytest
import torch

TPU = torch.device("tpu")


def test_streams_are_per_thread_and_restore():
    default = torch.tpu.current_stream()
    assert default == torch.tpu.default_stream() and default.stream_id == 0
    s1, s2 = torch.tpu.Stream(), torch.tpu.Stream()
    assert isinstance(s1, torch.Stream) and s1 != s2 and s1.device == torch.device("tpu:0")
    with torch.tpu.stream(s1):
        assert torch.tpu.current_stream() == s1
        seen = []
        t = threading.Thread(target=lambda: seen.append(torch.tpu.current_stream()))
        t.start()
        t.join()
        assert seen[0] == default  # the current stream is per thread, as on CUDA
        with torch.tpu.stream(s2):
            assert torch.tpu.current_stream() == s2
        assert torch.tpu.current_stream() == s1
    assert torch.tpu.current_stream() == default
    torch.tpu.set_stream(s2)
    assert torch.tpu.current_stream() == s2
    torch.tpu.set_stream(default)


def test_events_cover_earlier_work_and_time_it():
    a = torch.randn(256, 256, device=TPU) / 64  # a contraction: the chain stays well conditioned
    start, end = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    start.record()
    b = a
    for _ in range(20):
        b = torch.tanh(b @ a)
    end.record()
    end.synchronize()
    assert start.query() and end.query()
    ms = start.elapsed_time(end)
    assert ms >= 0.0
    # Work recorded before an event is finished once the event is.
    torch.testing.assert_close(b.cpu(), _cpu_chain(a.cpu()), rtol=1e-4, atol=1e-4)
    s = torch.tpu.Stream()
    s.wait_event(end)
    s.wait_stream(torch.tpu.current_stream())
    s.synchronize()
    assert s.query()
    b.record_stream(s)  # accepted: PJRT keeps buffers alive for queued work


def _cpu_chain(a):
    b = a
    for _ in range(20):
        b = torch.tanh(b @ a)
    return b


def test_events_around_donating_programs():
    # A fused in-place update donates its old buffer, whose handle outlives
    # the donation until the next donating program: an event must neither
    # wait on that handle (it has no event left) nor lose the work recorded
    # before a later donation.
    x = torch.randn(256, 256, device=TPU)
    want = x.cpu()
    marks = []
    for _ in range(3):
        e = torch.tpu.Event(enable_timing=True)
        e.record()
        marks.append(e)
        with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
            x.mul_(0.5)
            x.add_(1.0)
        want = want * 0.5 + 1.0
    assert torch_tpu_metric("donated_buffers") > 0
    end = torch.tpu.Event(enable_timing=True)
    end.record()
    end.synchronize()
    for e in marks:
        e.synchronize()
        assert e.query() and e.elapsed_time(end) >= 0.0
    torch.testing.assert_close(x.cpu(), want)


def torch_tpu_metric(name):
    import torch_tpu

    return torch_tpu._C._metrics()[name]


def test_elapsed_time_needs_recorded_events():
    e1, e2 = torch.tpu.Event(enable_timing=True), torch.tpu.Event(enable_timing=True)
    e1.record()
    with pytest.raises(ValueError, match="Both events must be recorded"):  # torch.Event's own check, as CUDA
        e1.elapsed_time(e2)


def test_memory_stats_follow_live_storages():
    torch.tpu.synchronize()
    base = torch.tpu.memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    x = torch.empty(1 << 20, device=TPU)  # 4 MiB
    assert torch.tpu.memory_allocated() == base + (4 << 20)
    st = torch.tpu.memory_stats()
    assert st["allocated_bytes.all.current"] == base + (4 << 20)
    assert st["allocated_bytes.all.peak"] >= base + (4 << 20)
    assert st["allocation.all.current"] >= 1
    assert torch.tpu.memory_reserved() == torch.tpu.memory_allocated()
    del x
    assert torch.tpu.memory_allocated() == base
    assert torch.tpu.max_memory_allocated() >= base + (4 << 20)
    assert torch.tpu.max_memory_reserved() == torch.tpu.max_memory_allocated()
    torch.tpu.reset_peak_memory_stats()
    assert torch.tpu.max_memory_allocated() == base
    torch.tpu.reset_accumulated_memory_stats()
    assert torch.tpu.memory_stats()["allocated_bytes.all.freed"] == 0
    torch.tpu.empty_cache()
    free, total = torch.tpu.mem_get_info()
    assert 0 < free <= total
    assert "tpu:0" in torch.tpu.memory_summary()


def test_torch_accelerator_memory_api_uses_the_tpu_allocator():
    if torch.accelerator.current_accelerator().type != "tpu":
        pytest.skip("another accelerator is current in this process")
    base = torch.accelerator.memory_allocated()
    x = torch.empty(1000, device=TPU)
    assert torch.accelerator.memory_allocated() == base + 4000
    assert torch.accelerator.max_memory_allocated() >= base + 4000
    torch.accelerator.empty_cache()
    torch.accelerator.reset_peak_memory_stats()
    assert torch.accelerator.memory_stats()["allocated_bytes.all.current"] == base + 4000
    del x


def test_out_of_memory_is_counted():
    before = torch.tpu.memory_stats()["num_ooms"]
    t = torch.empty(10**12, device=TPU)
    with pytest.raises(torch.OutOfMemoryError):
        t.fill_(0)
    del t
    assert torch.tpu.memory_stats()["num_ooms"] == before + 1


def _matmul_dtype():
    return (torch.ones(2, 2, device=TPU) @ torch.ones(2, 2, device=TPU)).dtype


def test_autocast_defaults_to_bfloat16_in_every_thread():
    seen = {}

    def work():
        seen["get"] = torch.get_autocast_dtype("tpu")
        with torch.autocast("tpu"):
            seen["first"] = _matmul_dtype()
        with torch.autocast("tpu"):
            seen["second"] = _matmul_dtype()
        torch.set_autocast_dtype("tpu", torch.float16)  # a thread's own choice is kept
        with torch.autocast("tpu"):
            seen["chosen"] = _matmul_dtype()

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert seen == {"get": torch.bfloat16, "first": torch.bfloat16, "second": torch.bfloat16,
                    "chosen": torch.float16}
    with torch.autocast("tpu"):
        assert _matmul_dtype() == torch.bfloat16


def test_torch_tpu_amp_and_capability():
    with torch.tpu.amp.autocast():
        assert _matmul_dtype() == torch.bfloat16
    with torch.tpu.amp.autocast(dtype=torch.float16):
        assert _matmul_dtype() == torch.float16
    scaler = torch.tpu.amp.GradScaler(enabled=False)
    assert isinstance(scaler, torch.amp.GradScaler)
    major, minor = torch.tpu.get_device_capability()
    assert isinstance(major, int) and isinstance(minor, int)
