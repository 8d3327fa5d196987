"""The compilation cache: memory -> disk -> shared directory.

Python API (mirrors the environment variables in docs/environment_variables.md):

    torch_tpu.cache.set_cache_dir(path_or_None)        # TORCH_TPU_CACHE_DIR
    torch_tpu.cache.set_shared_cache_dir(path_or_None) # TORCH_TPU_SHARED_CACHE_DIR
    torch_tpu.cache.set_max_bytes(n)                   # TORCH_TPU_CACHE_MAX_BYTES
    torch_tpu.cache.stats()                            # same as torch.tpu._get_cache_stats()

Command line:

    python -m torch_tpu.cache info|list|clear|prune [--tier disk|shared] [--max-bytes N]
"""
from __future__ import annotations

from torch_tpu import _C


def _apply(**changes) -> None:
    s = _C._cache_settings()
    s.update(changes)
    _C._cache_configure(s["disk_dir"], s["shared_dir"], int(s["max_bytes"]))


def set_cache_dir(path: str | None) -> None:
    """Directory of the persistent disk tier; None or "disabled" turns it off."""
    _apply(disk_dir="" if path in (None, "disabled") else str(path))


def set_shared_cache_dir(path: str | None) -> None:
    _apply(shared_dir="" if path in (None, "disabled") else str(path))


def set_max_bytes(n: int) -> None:
    _apply(max_bytes=int(n))


def settings() -> dict:
    return _C._cache_settings()


def stats() -> dict:
    """Requests, hits and misses per tier, compile time spent and saved,
    entries and bytes on disk."""
    return _C._cache_stats()


def flush() -> None:
    """Waits for background compiles and cache writes (also done at exit)."""
    _C._cache_flush()


def wait_background_compiles(timeout: float | None = None) -> bool:
    """Waits until the background (full-option) compiles of tiered compiles
    have ended and replaced their quick programs; ``timeout`` in seconds.
    Returns whether they have. See docs/compilation_cache.md."""
    return _C._wait_background_compiles(-1 if timeout is None else int(timeout * 1000))


def entries(tier: str = "disk") -> list[dict]:
    return _C._cache_list(tier)


def clear(tier: str = "disk") -> int:
    return _C._cache_prune(tier, 0)


def prune(max_bytes: int, tier: str = "disk") -> int:
    return _C._cache_prune(tier, int(max_bytes))


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def _fmt_age(s: int) -> str:
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"
