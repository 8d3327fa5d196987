"""Device execution spans in ``torch.profiler`` traces.

Kineto records host activity only for a PrivateUse1 device without a
profiler plugin, so torch_tpu records device spans itself: while a profiler
records, every program launch registers a PJRT completion callback (see
csrc/runtime/device_spans.h). ``stop_trace`` collects the spans, and
``export_chrome_trace`` adds them as one ``tpu:N (device)`` track per device,
beside the host threads, on Kineto's clock.
"""

from __future__ import annotations

import gzip
import json
import os

from torch_tpu import _C

# A device track's pid in the Chrome trace: far above any real process id.
_PID_BASE = 1_000_000
# How long stop_trace waits for programs still running on the device.
_WAIT_MS = int(os.environ.get("TORCH_TPU_PROFILER_WAIT_MS", "10000"))


def device_spans(prof) -> list[dict]:
    """The device spans of a finished ``torch.profiler.profile``: dicts with
    ``name``, ``device``, ``start_ns`` and ``end_ns`` (CLOCK_REALTIME ns)."""
    return [
        {"name": n, "device": d, "start_ns": s, "end_ns": e}
        for n, d, s, e in getattr(prof, "_tpu_device_spans", [])
    ]


def _trace_events(spans: list[dict], base_ns: int) -> list[dict]:
    events = []
    for d in sorted({s["device"] for s in spans}):
        pid = _PID_BASE + d
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": f"tpu:{d} (device)"}})
        events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}})
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": 0, "args": {"name": "programs"}})
    for s in spans:
        events.append(
            {
                "ph": "X",
                "cat": "tpu_device",
                "name": s["name"],
                "pid": _PID_BASE + s["device"],
                "tid": 0,
                "ts": (s["start_ns"] - base_ns) / 1000.0,
                "dur": (s["end_ns"] - s["start_ns"]) / 1000.0,
                "args": {"device": s["device"]},
            }
        )
    return events


def _add_to_file(path: str, spans: list[dict]) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    # Kineto writes timestamps in microseconds from baseTimeNanoseconds.
    base_ns = int(trace.get("baseTimeNanoseconds", 0))
    trace.setdefault("traceEvents", []).extend(_trace_events(spans, base_ns))
    tmp = path + ".tpu-tmp"
    with opener(tmp, "wt") as f:
        json.dump(trace, f)
    os.replace(tmp, path)


def _install() -> None:
    from torch.profiler import profiler as tp

    cls = tp._KinetoProfile
    if getattr(cls, "_tpu_patched", False):
        return
    start_trace, stop_trace, export = cls.start_trace, cls.stop_trace, cls.export_chrome_trace

    def _start_trace(self):
        self._tpu_device_spans = []
        _C._set_device_spans(True)
        start_trace(self)

    def _stop_trace(self):
        stop_trace(self)
        _C._set_device_spans(False)
        self._tpu_device_spans = _C._take_device_spans(_WAIT_MS)

    def _export_chrome_trace(self, path, *args, **kwargs):
        result = export(self, path, *args, **kwargs)
        spans = device_spans(self)
        if spans and os.path.exists(path):
            _add_to_file(path, spans)
        return result

    cls.start_trace = _start_trace
    cls.stop_trace = _stop_trace
    cls.export_chrome_trace = _export_chrome_trace
    cls._tpu_patched = True
