"""nn.TransformerEncoder, TransformerEncoderLayer and MultiheadAttention on
tpu take PyTorch's composite ("slow") path.

Their inference fast path runs fused kernels over nested tensors
(_nested_tensor_from_mask_left_aligned, _transformer_encoder_layer_fwd,
_native_multi_head_attention), which PyTorch offers to every PrivateUse1
device. tpu has no nested tensors, so for calls with tpu inputs the fast path
reads as disabled (torch.backends.mha's own switch, per thread), exactly as
when a user turns it off: the modules then run their ordinary ops, which
compile to the same fused programs anyway.
"""
from __future__ import annotations

import functools
import threading

import torch

_state = threading.local()


def _install() -> None:
    mha = torch.backends.mha
    if getattr(mha.get_fastpath_enabled, "_torch_tpu", False):
        return
    orig_get = mha.get_fastpath_enabled

    @functools.wraps(orig_get)
    def get_fastpath_enabled() -> bool:
        return orig_get() and not getattr(_state, "tpu_call", False)

    get_fastpath_enabled._torch_tpu = True
    mha.get_fastpath_enabled = get_fastpath_enabled

    def on_tpu(args, kwargs) -> bool:
        return any(isinstance(a, torch.Tensor) and a.device.type == "tpu"
                   for a in (*args, *kwargs.values()))

    for cls in (torch.nn.TransformerEncoder, torch.nn.TransformerEncoderLayer, torch.nn.MultiheadAttention):
        orig = cls.forward

        @functools.wraps(orig)
        def forward(self, *args, _orig=orig, **kwargs):
            if not on_tpu(args, kwargs) or getattr(_state, "tpu_call", False):
                return _orig(self, *args, **kwargs)
            _state.tpu_call = True
            try:
                return _orig(self, *args, **kwargs)
            finally:
                _state.tpu_call = False

        cls.forward = forward
