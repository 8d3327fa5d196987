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

The patch is applied when `transformers.generation.utils` is first imported,
so importing torch_tpu costs nothing for users without transformers. A model
that defines its own `create_masks_for_generate` method keeps it as is.
"""
from __future__ import annotations

import functools

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


def _fused_in_strict_eager(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        # Strict eager only: fused eager records the mask already, and debug
        # eager (launch blocking) keeps one program per op on purpose.
        if _C._eager_mode() != EagerMode.DEFER_NEVER or torch.compiler.is_compiling() or not _on_tpu(args, kwargs):
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


def _install() -> None:
    after_import("transformers.generation.utils", _patch)
