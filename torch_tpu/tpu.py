"""The ``torch.tpu`` device module, mirroring ``torch.cuda`` where it fits."""
from __future__ import annotations

import dataclasses
import os
from typing import Any

import torch

from torch_tpu import (
    _C,
    amp,  # noqa: F401 (torch.tpu.amp)
    comm,  # noqa: F401 (torch.tpu.comm)
)
from torch_tpu._eager import EagerMode, get_eager_mode, mark_step, set_eager_mode
from torch_tpu.graphs import TPUGraph, graph, graph_pool_handle, is_current_stream_capturing

__all__ = [
    "is_available", "device_count", "current_device", "set_device", "device", "synchronize",
    "get_device_name", "get_device_properties", "manual_seed", "manual_seed_all", "seed", "seed_all",
    "initial_seed", "get_rng_state", "set_rng_state", "get_rng_state_all", "set_rng_state_all",
    "memory_allocated", "max_memory_allocated", "reset_peak_memory_stats", "is_initialized", "init",
    "memory_stats", "memory_reserved", "max_memory_reserved", "reset_max_memory_allocated",
    "reset_accumulated_memory_stats", "empty_cache", "mem_get_info", "memory_summary", "Stream", "Event",
    "current_stream", "default_stream", "set_stream", "stream", "StreamContext", "get_device_capability", "amp", "comm",
    "get_amp_supported_dtype", "is_bf16_supported", "default_generators",  # noqa: F822 (module __getattr__)
    "EagerMode", "eager_mode", "set_eager_mode", "get_eager_mode", "mark_step",  # noqa: F822
    "TPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing",
]

_current = 0


def is_available() -> bool:
    """True when a PJRT plugin loads and reports at least one device."""
    return _C._device_count() > 0


def device_count() -> int:
    return _C._device_count()


def is_initialized() -> bool:
    return _C._is_initialized()


def init() -> None:
    _C._init()


_lazy_init = init


def _is_in_bad_fork() -> bool:
    return False


def _index(d: Any = None) -> int:
    if d is None:
        return _current
    if isinstance(d, int):
        return d
    d = torch.device(d)
    if d.type != "tpu":
        raise ValueError(f"Expected a tpu device, but got: {d}")
    return _current if d.index is None else d.index


def current_device() -> int:
    return _current


def set_device(d: Any) -> None:
    global _current
    i = _index(d)
    if i < 0:
        return
    if i >= device_count():
        raise RuntimeError(f"tpu device index {i} is out of range ({device_count()} devices)")
    _current = i
    # The C++ device guard holds the thread's current device for allocations.
    torch._C._accelerator_setDeviceIndex(i)


class device:
    """Context manager that changes the current tpu device."""

    def __init__(self, d: Any):
        self.idx = _index(d)
        self.prev = -1

    def __enter__(self):
        self.prev = current_device()
        if self.idx != self.prev:
            set_device(self.idx)

    def __exit__(self, *exc):
        if self.idx != self.prev:
            set_device(self.prev)
        return False


def synchronize(device: Any = None) -> None:
    """Runs any pending fused-eager graph and waits for all enqueued tpu work (raises its errors)."""
    _C._synchronize()


def get_device_name(device: Any = None) -> str:
    """The platform and device kind, e.g. 'XLA:CPU (cpu)'."""
    kind = _C._device_kind(_index(device))
    platform = _C._platform_name()
    label = {"cpu": "XLA:CPU", "cuda": "XLA:CUDA", "tpu": "TPU"}.get(platform, platform)
    return f"{label} ({kind})" if kind and kind.lower() != platform else label


@dataclasses.dataclass(frozen=True)
class _DeviceProperties:
    name: str
    platform: str
    device_kind: str
    index: int
    plugin: str
    plugin_api_version: str
    total_memory: int

    def __repr__(self) -> str:
        return (f"_TpuDeviceProperties(name='{self.name}', platform='{self.platform}', "
                f"total_memory={self.total_memory // (1024 * 1024)}MB)")


def get_device_properties(device: Any = None) -> _DeviceProperties:
    i = _index(device)
    info = _C._plugin_info()
    total = 0
    if _C._platform_name() == "cpu":
        try:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        except (ValueError, OSError):
            total = 0
    return _DeviceProperties(get_device_name(i), _C._platform_name(), _C._device_kind(i), i,
                             info["path"], info["api_version"], total)


# --- RNG -----------------------------------------------------------------

def _generators() -> tuple:
    return tuple(_C._get_default_generator(i) for i in range(max(1, device_count())))


def __getattr__(name: str):
    if name == "default_generators":
        return _generators()
    if name == "eager_mode":
        return get_eager_mode()
    raise AttributeError(f"module 'torch.tpu' has no attribute '{name}'")


def manual_seed(seed: int) -> None:
    _C._get_default_generator(current_device()).manual_seed(int(seed))


def manual_seed_all(seed: int) -> None:
    for g in _generators():
        g.manual_seed(int(seed))


def seed() -> None:
    _C._get_default_generator(current_device()).seed()


def seed_all() -> None:
    for g in _generators():
        g.seed()


def initial_seed() -> int:
    return _C._get_default_generator(current_device()).initial_seed()


def get_rng_state(device: Any = "tpu") -> torch.Tensor:
    return _C._get_default_generator(_index(device)).get_state()


def set_rng_state(new_state: torch.Tensor, device: Any = "tpu") -> None:
    _C._get_default_generator(_index(device)).set_state(new_state)


def get_rng_state_all() -> list:
    return [g.get_state() for g in _generators()]


def set_rng_state_all(states) -> None:
    for g, s in zip(_generators(), states):
        g.set_state(s)


def _get_generator(device: torch.device):
    return _C._get_default_generator(_index(device))


# --- memory --------------------------------------------------------------
# Bytes are tpu storages' sizes. PJRT allocates the buffer behind a storage
# when a program first writes it and frees it with the storage; nothing is
# cached, so "reserved" equals "allocated" and empty_cache() has nothing to
# release. The allocator is also torch.accelerator's DeviceAllocator.

def _stats(device: Any = None) -> dict:
    return _C._memory_stats(_index(device))


def memory_stats(device: Any = None) -> dict:
    """Allocator statistics in torch.cuda.memory_stats' flat key format."""
    import collections

    m = _stats(device)
    out = {}
    byte = dict(current=m["allocated"], peak=m["peak"], allocated=m["allocated_total"], freed=m["freed_total"])
    count = dict(current=m["count"], peak=m["count_peak"], allocated=m["count_total"], freed=m["count_freed"])
    for name, src in (("allocated_bytes", byte), ("reserved_bytes", byte), ("active_bytes", byte),
                      ("requested_bytes", byte), ("allocation", count), ("segment", count), ("active", count)):
        for pool in ("all", "large_pool", "small_pool"):
            for k, v in src.items():
                out[f"{name}.{pool}.{k}"] = v if pool == "all" else 0
    out.update(num_ooms=m["num_ooms"], num_alloc_retries=0, num_device_alloc=m["count_total"],
               num_device_free=m["count_freed"], num_sync_all_streams=0)
    return collections.OrderedDict(sorted(out.items()))


def memory_allocated(device: Any = None) -> int:
    """Bytes held by live tpu storages."""
    return _stats(device)["allocated"]


def max_memory_allocated(device: Any = None) -> int:
    return _stats(device)["peak"]


def memory_reserved(device: Any = None) -> int:
    return memory_allocated(device)


def max_memory_reserved(device: Any = None) -> int:
    return max_memory_allocated(device)


def reset_peak_memory_stats(device: Any = None) -> None:
    _C._reset_peak_memory_stats(_index(device))


def reset_max_memory_allocated(device: Any = None) -> None:
    reset_peak_memory_stats(device)


def reset_accumulated_memory_stats(device: Any = None) -> None:
    _C._reset_accumulated_memory_stats(_index(device))


def empty_cache() -> None:
    """No-op: tpu keeps no cache of free buffers (PJRT frees them at once)."""


def mem_get_info(device: Any = None) -> tuple[int, int]:
    """(free, total) bytes: the plugin's figures, or host memory on XLA:CPU."""
    free, total = _C._mem_get_info(_index(device))
    return int(free), int(total)


def memory_summary(device: Any = None, abbreviated: bool = False) -> str:
    m = _stats(device)
    free, total = mem_get_info(device)

    def size(n: int) -> str:
        for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
            if abs(n) < 1024 or unit == "TiB":
                return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
            n /= 1024
        return ""

    rows = [("allocated (live storages)", size(m["allocated"]), size(m["peak"]),
             size(m["allocated_total"]), size(m["freed_total"])),
            ("storages", str(m["count"]), str(m["count_peak"]), str(m["count_total"]), str(m["count_freed"]))]
    lines = [f"torch_tpu memory summary, tpu:{_index(device)}",
             f"{'':<28}{'current':>12}{'peak':>12}{'allocated':>12}{'freed':>12}"]
    lines += [f"{r[0]:<28}{r[1]:>12}{r[2]:>12}{r[3]:>12}{r[4]:>12}" for r in rows]
    lines.append(f"out-of-memory errors: {m['num_ooms']}; device memory free {size(free)} of {size(total)}")
    return "\n".join(lines)


# --- streams and events ----------------------------------------------------
# A tpu device runs its programs in the order their buffers depend on each
# other, so streams are names rather than separate queues: an Event covers
# all work enqueued before it (and times it, from the buffers' completion
# callbacks), and waiting on an event needs no device action.

class Stream(torch.Stream):
    """A tpu stream (torch.Stream with device type tpu)."""

    def __new__(cls, device: Any = None, priority: int = 0, **kwargs):
        if "stream_id" in kwargs:
            return super().__new__(cls, **kwargs)
        return super().__new__(cls, device=torch.device("tpu", _index(device)), priority=priority)


class Event:
    """A point in the tpu work queue: makes a torch.Event on tpu (torch's own
    type, which its methods such as elapsed_time require of their argument)."""

    def __new__(cls, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False):
        return torch.Event(device="tpu", enable_timing=enable_timing, blocking=blocking, interprocess=interprocess)


_PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1


def current_stream(device: Any = None) -> Stream:
    sid, idx = _C._current_stream(_index(device))
    return Stream(stream_id=sid, device_index=idx, device_type=_PRIVATEUSE1)


def default_stream(device: Any = None) -> Stream:
    return Stream(stream_id=0, device_index=_index(device), device_type=_PRIVATEUSE1)


def set_stream(stream: torch.Stream) -> None:
    if stream is None:
        return
    _C._set_stream(stream.stream_id, stream.device_index)


class StreamContext:
    """Makes `stream` current on its device for a block (torch.cuda.StreamContext)."""

    def __init__(self, stream: torch.Stream | None):
        self.stream = stream
        self.prev = None

    def __enter__(self):
        if self.stream is not None:
            self.prev = current_stream(self.stream.device_index)
            set_stream(self.stream)
        return self.stream

    def __exit__(self, *exc):
        if self.prev is not None:
            set_stream(self.prev)


def stream(stream: torch.Stream | None) -> StreamContext:
    return StreamContext(stream)


def get_device_capability(device: Any = None) -> tuple[int, int]:
    """(major, minor) of the device generation where the plugin names one
    (TPU v5 -> (5, 0)); (0, 0) for XLA:CPU and devices without a number."""
    import re

    m = re.search(r"v(\d+)", get_device_name(device) or "")
    return (int(m.group(1)), 0) if m else (0, 0)


# --- AMP -----------------------------------------------------------------

def get_amp_supported_dtype() -> list:
    return [torch.bfloat16, torch.float16, torch.float32]


def is_bf16_supported(including_emulation: bool = True) -> bool:
    return True


def _get_cache_stats() -> dict:
    """Cache statistics per tier (TorchTPU's name; see torch_tpu.cache.stats)."""
    from torch_tpu import cache

    st = cache.stats()
    mem = st["memory"]
    st["num_cache_reqs"] = mem["requests"]
    st["num_cache_hits"] = mem["hits"] + sum(st[t]["hits"] for t in ("disk", "shared") if t in st)
    st["num_cache_misses"] = st["compiles"]
    return st


# ``torch.tpu.eager_mode = EagerMode.DEFER_AND_FUSE`` must switch the mode,
# so the module's class gets a setter for that one attribute.
class _DeviceModule(type(_C)):
    # torch.utils.checkpoint and torch.random.fork_rng save and restore a
    # device's RNG state only when its module says it is initialized.
    @property
    def _initialized(self) -> bool:
        return _C._is_initialized()

    @property
    def eager_mode(self) -> EagerMode:
        return get_eager_mode()

    @eager_mode.setter
    def eager_mode(self, mode) -> None:
        from torch_tpu import _eager

        _eager._set(mode)


import sys as _sys  # noqa: E402

_sys.modules[__name__].__class__ = _DeviceModule
