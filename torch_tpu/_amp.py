"""Autocast support: torch.amp.autocast("tpu") defaults to bfloat16.

The per-op cast policies live in C++ (csrc/aten/autocast.cc). ATen's
default autocast dtype for PrivateUse1 is float16; TPUs want bfloat16.
PyTorch keeps the autocast dtype per thread, so this sets it for the
importing thread; threads created later start with ATen's float16 default
unless they pass dtype= (or call torch.set_autocast_dtype("tpu", ...)).
"""
import torch


def _register() -> None:
    torch.set_autocast_dtype("tpu", torch.bfloat16)
