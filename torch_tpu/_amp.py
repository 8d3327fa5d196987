"""Autocast support: torch.amp.autocast("tpu") defaults to bfloat16."""
import torch


def _register() -> None:
    try:
        torch._C._set_autocast_dtype("tpu", torch.bfloat16)  # type: ignore[attr-defined]
    except Exception:
        pass
