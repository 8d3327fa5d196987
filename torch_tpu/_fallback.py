"""CPU fallback for ops tpu does not implement (off by default)."""
from __future__ import annotations

import contextlib

from torch_tpu import _C


def set_cpu_fallback(enabled: bool) -> None:
    """Run unimplemented ops on the CPU (each op counted and logged once).

    The same switch as the TORCH_TPU_CPU_FALLBACK=1 environment variable.
    """
    _C._set_cpu_fallback(bool(enabled))


def get_cpu_fallback() -> bool:
    return bool(_C._cpu_fallback_enabled())


@contextlib.contextmanager
def cpu_fallback(enabled: bool = True):
    """Context manager form of :func:`set_cpu_fallback`."""
    old = get_cpu_fallback()
    set_cpu_fallback(enabled)
    try:
        yield
    finally:
        set_cpu_fallback(old)
