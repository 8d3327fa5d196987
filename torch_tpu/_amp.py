"""Autocast support: torch.amp.autocast("tpu") defaults to bfloat16.

The per-op cast policies live in C++ (csrc/aten/autocast.cc). ATen keeps
the autocast dtype per thread and starts every thread at float16 for
PrivateUse1; TPUs want bfloat16. So each thread's tpu autocast dtype is set
to bfloat16 the first time that thread reads it, sets it or enters
autocast("tpu"); a dtype the thread sets itself is kept.
"""
import threading

import torch

_seen = threading.local()


def _register() -> None:
    if getattr(torch.get_autocast_dtype, "_torch_tpu", False):
        return
    orig_init = torch.amp.autocast.__init__
    orig_get, orig_set = torch.get_autocast_dtype, torch.set_autocast_dtype

    def ensure_thread() -> None:
        if not getattr(_seen, "done", False):
            _seen.done = True
            orig_set("tpu", torch.bfloat16)

    def get_autocast_dtype(device_type):
        if device_type == "tpu":
            ensure_thread()
        return orig_get(device_type)

    def set_autocast_dtype(device_type, dtype):
        if device_type == "tpu":
            _seen.done = True
        return orig_set(device_type, dtype)

    def __init__(self, device_type, dtype=None, enabled=True, cache_enabled=None):
        if device_type == "tpu":
            ensure_thread()
        orig_init(self, device_type, dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)

    for f, orig in ((get_autocast_dtype, orig_get), (set_autocast_dtype, orig_set), (__init__, orig_init)):
        f.__doc__, f._torch_tpu = orig.__doc__, True
    torch.get_autocast_dtype = get_autocast_dtype
    torch.set_autocast_dtype = set_autocast_dtype
    torch.amp.autocast.__init__ = __init__
    ensure_thread()
