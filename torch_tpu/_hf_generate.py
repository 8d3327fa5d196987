"""Hugging Face `generate()` on tpu: a static cache's attention mask as one
program.

With a compilable cache (`cache_implementation="static"`), `generate()`
builds the 4-D attention mask eagerly, outside the model's (possibly
compiled) forward, before the prefill and before every decode step:
transformers' `create_masks_for_generate`, called from
`prepare_inputs_for_generation`. In strict eager its half-dozen small ops
(arange, add, the comparisons and the ands with the padding mask) are each a
program compiled for every new (prompt, cache) shape and launched on every
token. Recorded by the fused driver and run at its end, as
`optimizer.step()` is, the mask is one program per shape and one launch per
token; the values are the same.

One part of that mask is a question asked on the host: whether the padding
mask is all ones, so that SDPA may use `is_causal` instead of a mask
(transformers' `_ignore_causal_mask_sdpa`). Asked of the device, it is a
read in the middle of the recorded mask, which cuts it into two programs,
each compiled again for every new shape. The 2-D mask it is asked of is the
caller's `attention_mask` padded with zeros, so while the mask is built the
question is answered from a host copy of `attention_mask`, taken once per
call: the same answer, and the mask stays one program.

The patch is applied when `transformers.generation.utils` is first imported,
so importing torch_tpu costs nothing for users without transformers. A model
that defines its own `create_masks_for_generate` method keeps it as is.
"""
from __future__ import annotations

import contextlib
import functools
import inspect
import threading

import torch

from torch_tpu import _C
from torch_tpu._after_import import after_import
from torch_tpu._eager import EagerMode

_PATCHED = "_torch_tpu_fused_mask"


def _on_tpu(args, kwargs) -> bool:
    for v in (*args, *kwargs.values()):
        if isinstance(v, torch.Tensor):
            return v.device.type == "tpu"
    return False


# The host copy of the 2-D attention mask of the create_masks_for_generate
# call in progress on this thread, as bool (None outside one).
_host = threading.local()


@contextlib.contextmanager
def _host_mask(mask):
    saved = getattr(_host, "mask", None)
    ok = isinstance(mask, torch.Tensor) and mask.dim() == 2 and mask.device.type == "tpu"
    _host.mask = mask.cpu().to(torch.bool) if ok else None
    try:
        yield
    finally:
        _host.mask = saved


def _answered_on_host(fn, prepare):
    """transformers' `_ignore_causal_mask_sdpa`, asked of the host copy of
    the padding mask where one is known (see the module docstring)."""
    @functools.wraps(fn)
    def wrapper(padding_mask, q_length, kv_length, q_offset, kv_offset, *args, **kwargs):
        host = getattr(_host, "mask", None)
        if host is not None and isinstance(padding_mask, torch.Tensor) and padding_mask.device.type == "tpu":
            # sdpa_mask's padding mask is prepare_padding_mask(attention_mask,
            # kv_length, kv_offset) of this call's mask; a shape that does not
            # match says it is some other mask, which is asked of the device.
            mirrored = prepare(host, kv_length, kv_offset)
            if mirrored.shape == padding_mask.shape:
                padding_mask = mirrored
        return fn(padding_mask, q_length, kv_length, q_offset, kv_offset, *args, **kwargs)

    setattr(wrapper, _PATCHED, True)
    return wrapper


def _fused_in_strict_eager(fn):
    params = inspect.signature(fn).parameters
    mask_at = list(params).index("attention_mask") if "attention_mask" in params else None

    def attention_mask(args, kwargs):
        if "attention_mask" in kwargs:
            return kwargs["attention_mask"]
        return args[mask_at] if mask_at is not None and mask_at < len(args) else None

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        mode = _C._eager_mode()
        # Debug eager (launch blocking) keeps one program per op on purpose.
        blocking = mode == EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING
        if blocking or torch.compiler.is_compiling() or not _on_tpu(args, kwargs):
            return fn(*args, **kwargs)
        with _host_mask(attention_mask(args, kwargs)):
            if mode != EagerMode.DEFER_NEVER:  # fused eager records the mask already
                return fn(*args, **kwargs)
            _C._set_eager_mode(int(EagerMode.DEFER_AND_FUSE))
            try:
                return fn(*args, **kwargs)
            finally:
                # Leaving fused eager runs the recorded mask as one program.
                _C._set_eager_mode(int(EagerMode.DEFER_NEVER))

    setattr(wrapper, _PATCHED, True)
    return wrapper


def _patch(module) -> None:
    fn = getattr(module, "create_masks_for_generate", None)
    if fn is None or getattr(fn, _PATCHED, False):
        return
    module.create_masks_for_generate = _fused_in_strict_eager(fn)


def _patch_masking(module) -> None:
    fn = getattr(module, "_ignore_causal_mask_sdpa", None)
    prepare = getattr(module, "prepare_padding_mask", None)
    if fn is None or prepare is None or getattr(fn, _PATCHED, False):
        return
    module._ignore_causal_mask_sdpa = _answered_on_host(fn, prepare)


def _install() -> None:
    after_import("transformers.generation.utils", _patch)
    after_import("transformers.masking_utils", _patch_masking)
