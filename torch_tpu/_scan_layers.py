"""torch_tpu.scan_layers: a stack of identical modules (the blocks of a GPT
or a Llama) run as one loop over their stacked weights.

Unrolled, a 24-layer model puts 24 copies of its block in the program, and
XLA compiles each. Here the block is traced once and becomes the body of a
scan (torch._higher_order_ops.scan), which tpu lowers to one
stablehlo.while (torch_tpu/_control_flow.py); its backward is a scan too.
So the blocks' share of the program does not grow with depth; what still
grows is per parameter tensor (the stacking, and the optimizer's update).

The weights are stacked with torch.stack on every call, so gradients reach
each layer's own parameters and optimizers, state dicts and checkpoints
see the model unchanged.
"""
from __future__ import annotations

from typing import Iterable

import torch
from torch import nn


def _stack(layers: list[nn.Module], named) -> dict:
    per_layer = [dict(named(m)) for m in layers]
    names = list(per_layer[0])
    for i, d in enumerate(per_layer[1:], 1):
        if list(d) != names:
            raise ValueError(f"scan_layers: layer {i} has other parameters or buffers than layer 0; "
                             "the layers must be identical modules")
        for n in names:
            if d[n].shape != per_layer[0][n].shape or d[n].dtype != per_layer[0][n].dtype:
                raise ValueError(f"scan_layers: '{n}' of layer {i} is {tuple(d[n].shape)} {d[n].dtype}, but "
                                 f"{tuple(per_layer[0][n].shape)} {per_layer[0][n].dtype} in layer 0")
    return {n: torch.stack([d[n] for d in per_layer]) for n in names}


def scan_layers(layers: Iterable[nn.Module], input_data: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    """Returns what ``for layer in layers: input_data = layer(input_data, *args, **kwargs)``
    returns, computed as one loop.

    ``layers`` (an ``nn.ModuleList`` or any iterable) must hold modules of
    one class with parameters and buffers of the same names, shapes and
    dtypes. ``args`` and ``kwargs`` (an attention mask, position embeddings)
    go unchanged to every layer. A layer that returns a tuple (as Hugging
    Face decoder layers may) passes its first element on. Works in eager on
    any device, under ``torch.compile``, and with autograd. Layers must not
    draw random numbers (dropout in training) or change their buffers: the
    loop body is traced once.
    """
    from torch._higher_order_ops.scan import scan

    layers = list(layers)
    if not layers:
        return input_data
    if len(layers) == 1:
        out = layers[0](input_data, *args, **kwargs)
        return out[0] if isinstance(out, tuple) else out
    first = layers[0]
    if any(type(m) is not type(first) for m in layers):
        raise ValueError("scan_layers: the layers must all be instances of one class")
    params = _stack(layers, lambda m: m.named_parameters())
    buffers = _stack(layers, lambda m: m.named_buffers())

    def body(hidden, weights):
        p, b = weights
        out = torch.func.functional_call(first, {**p, **b}, (hidden, *args), kwargs, strict=True)
        out = out[0] if isinstance(out, tuple) else out
        # scan's autograd needs a tensor for the per-step output: an empty one.
        return out, out.new_zeros(0)

    final, _ = scan(body, input_data, (params, buffers))
    return final
