"""``torch.tpu.amp``: the device-specific spelling of ``torch.amp`` (as
``torch.cuda.amp``), for code written against CUDA."""
from __future__ import annotations

import torch

__all__ = ["autocast", "GradScaler"]


class autocast(torch.amp.autocast):  # noqa: N801 (PyTorch's name)
    """``torch.amp.autocast("tpu", ...)``; bfloat16 unless ``dtype`` is given."""

    def __init__(self, enabled: bool = True, dtype: torch.dtype | None = None, cache_enabled: bool = True):
        super().__init__("tpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(torch.amp.GradScaler):
    """``torch.amp.GradScaler("tpu", ...)`` (only needed for float16)."""

    def __init__(self, init_scale: float = 2.0**16, growth_factor: float = 2.0, backoff_factor: float = 0.5,
                 growth_interval: int = 2000, enabled: bool = True):
        super().__init__("tpu", init_scale=init_scale, growth_factor=growth_factor, backoff_factor=backoff_factor,
                         growth_interval=growth_interval, enabled=enabled)
