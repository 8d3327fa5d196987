"""nn.TransformerEncoder, TransformerEncoderLayer and MultiheadAttention on
tpu take PyTorch's composite ("slow") path.

Their inference fast path runs fused kernels over nested tensors
(_nested_tensor_from_mask_left_aligned, _transformer_encoder_layer_fwd,
_native_multi_head_attention), which PyTorch offers to every PrivateUse1
device. tpu has no nested tensors, so for calls with tpu inputs the fast path
reads as disabled (torch.backends.mha's own switch, per thread), exactly as
when a user turns it off: the modules then run their ordinary ops, which
compile to the same fused programs anyway.

One visible difference is kept away: where CPU's TransformerEncoder would
have packed the batch into a nested tensor (inference with a key padding
mask), its output has zeros at the padded positions, while the composite
path computes values there. The tpu output is zeroed at those positions
under the same conditions, so it matches CPU's.
"""
from __future__ import annotations

import functools
import threading

import torch

from torch_tpu import _dynamo_patches

_state = threading.local()


def _install() -> None:
    mha = torch.backends.mha
    if getattr(mha.get_fastpath_enabled, "_torch_tpu", False):
        return
    orig_get = mha.get_fastpath_enabled

    @functools.wraps(orig_get)
    def get_fastpath_enabled() -> bool:
        if torch.compiler.is_compiling() and _dynamo_patches._in_call:
            # dynamo tracing for tpu: a constant, where torch.backends (which
            # dynamo never traces) would break the graph at the first line
            # of the module's forward and leave all of it uncompiled.
            return False
        return orig_get() and not getattr(_state, "tpu_call", False)

    get_fastpath_enabled._torch_tpu = True
    mha.get_fastpath_enabled = get_fastpath_enabled

    def on_tpu(args, kwargs) -> bool:
        return any(isinstance(a, torch.Tensor) and a.device.type == "tpu"
                   for a in (*args, *kwargs.values()))

    for cls in (torch.nn.TransformerEncoder, torch.nn.TransformerEncoderLayer, torch.nn.MultiheadAttention):
        orig = cls.forward

        @functools.wraps(orig)
        def forward(self, *args, _orig=orig, _cls=cls, **kwargs):
            if torch.compiler.is_compiling() and _dynamo_patches._in_call:
                return _orig(self, *args, **kwargs)  # traced for tpu: the switch above decides
            if not on_tpu(args, kwargs) or getattr(_state, "tpu_call", False):
                return _orig(self, *args, **kwargs)
            nested_on_cpu = _cls is torch.nn.TransformerEncoder and orig_get() and _cpu_would_nest(
                self, *args, **kwargs)
            _state.tpu_call = True
            try:
                out = _orig(self, *args, **kwargs)
            finally:
                _state.tpu_call = False
            if nested_on_cpu:
                pad = kwargs.get("src_key_padding_mask", args[2] if len(args) > 2 else None)
                pad = pad if pad.dtype == torch.bool else pad != 0  # a float mask: -inf marks padding
                out = out.masked_fill(pad.unsqueeze(-1), 0.0)
            return out

        cls.forward = forward


def _cpu_would_nest(enc, src, mask=None, src_key_padding_mask=None, is_causal=None) -> bool:
    """Whether CPU's TransformerEncoder.forward would run this call on a
    nested tensor (the conditions it checks, in its order, for a supported
    device)."""
    first = enc.layers[0]
    if not getattr(enc, "use_nested_tensor", False) or first.training or src.dim() != 3:
        return False
    if src_key_padding_mask is None or mask is not None or src.is_nested or torch.is_autocast_enabled():
        return False
    if getattr(enc, "mask_check", True):
        if torch.compiler.is_compiling():
            return False
        # Left-aligned: every row's kept positions come first.
        pad = src_key_padding_mask
        keep = (pad.logical_not() if pad.dtype == torch.bool else pad == 0).cpu()
        if not bool((keep.cummin(dim=1).values == keep).all()):
            return False
    params = [p for m in (first.self_attn, first.self_attn.out_proj, first.norm1, first.norm2, first.linear1,
                          first.linear2) for p in m.parameters(recurse=False)]
    return not (torch.is_grad_enabled() and (src.requires_grad or any(p.requires_grad for p in params)))
