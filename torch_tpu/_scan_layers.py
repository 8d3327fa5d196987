"""torch_tpu.scan_layers: a stack of identical modules (the blocks of a GPT
or a Llama) run as one loop over their stacked weights.

Unrolled, a 24-layer model puts 24 copies of its block in the program, and
XLA compiles each. Here the block is traced once and becomes the body of a
scan (torch._higher_order_ops.scan), which tpu lowers to one
stablehlo.while (torch_tpu/_control_flow.py); its backward is a scan too.
So the blocks' share of the program does not grow with depth; what still
grows is per parameter tensor (the stacking, and the optimizer's update).

Two forms:

- scan_layers(layers, x) stacks the weights with torch.stack on every
  call, so gradients reach each layer's own parameters and optimizers,
  state dicts and checkpoints see the model unchanged. The stacking, the
  split of the gradients and the optimizer's update still take a few ops
  per layer and parameter.
- ScannedLayers(layers) holds the weights stacked: one parameter of shape
  [depth, ...] per parameter of the block. The optimizer updates those,
  nothing is stacked per call, and the whole step stops growing with
  depth. Its state dict keeps the per-layer names of the module list it
  replaced ("3.attn.weight"), so checkpoints move between the two forms.
"""
from __future__ import annotations

import copy
from typing import Iterable

import torch
from torch import nn


def _check_same(layers: list[nn.Module]) -> None:
    if any(type(m) is not type(layers[0]) for m in layers):
        raise ValueError("scan_layers: the layers must all be instances of one class")


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
    layers = list(layers)
    if not layers:
        return input_data
    if len(layers) == 1:
        out = layers[0](input_data, *args, **kwargs)
        return out[0] if isinstance(out, tuple) else out
    _check_same(layers)
    params = _stack(layers, lambda m: m.named_parameters())
    buffers = _stack(layers, lambda m: m.named_buffers())
    return _scan(layers[0], params, buffers, input_data, args, kwargs)


def _scan(first: nn.Module, params: dict, buffers: dict, input_data, args, kwargs):
    """The loop: `first`'s forward with each layer's slice of the stacked
    `params` and `buffers` in turn."""
    from torch._higher_order_ops.scan import scan

    def body(hidden, weights):
        p, b = weights
        out = torch.func.functional_call(first, {**p, **b}, (hidden, *args), kwargs, strict=True)
        out = out[0] if isinstance(out, tuple) else out
        # scan's autograd needs a tensor for the per-step output: an empty one.
        return out, out.new_zeros(0)

    final, _ = scan(body, input_data, (params, buffers))
    return final


def _key(name: str) -> str:
    # Parameter names may not hold dots.
    return name.replace(".", "__")


class ScannedLayers(nn.Module):
    """A stack of identical modules held as stacked weights and run as one
    loop: ``ScannedLayers(blocks)(x, *args, **kwargs)`` returns what
    ``for b in blocks: x = b(x, *args, **kwargs)`` returns.

    Build it from an ``nn.ModuleList`` (or any iterable) of modules of one
    class with parameters and buffers of the same names, shapes and dtypes,
    before creating the optimizer: the module then has one parameter of
    shape ``[len(blocks), ...]`` per parameter of the block, and the blocks'
    own parameters are no longer used. ``state_dict()`` and
    ``load_state_dict()`` use the per-layer names of the module list
    (``"0.fc.weight"``, ``"1.fc.weight"``, ...), so a checkpoint of the
    unrolled model loads here and the other way round. The same rules as
    ``scan_layers`` hold for the block: no random numbers (dropout in
    training) and no buffer writes in its forward.
    """

    def __init__(self, layers: Iterable[nn.Module]):
        super().__init__()
        layers = list(layers)
        if not layers:
            raise ValueError("ScannedLayers: needs at least one layer")
        _check_same(layers)
        params = _stack(layers, lambda m: m.named_parameters())
        buffers = _stack(layers, lambda m: m.named_buffers())
        first = layers[0]
        self.num_layers = len(layers)
        self._param_names = list(params)
        self._buffer_names = list(buffers)
        self._state_names = list(first.state_dict(keep_vars=True))  # the block's order
        transient = {f"{p}.{b}" if p else b for p, m in first.named_modules() for b in m._non_persistent_buffers_set}
        self.stacked = nn.ParameterDict(
            {_key(n): nn.Parameter(t.detach().clone(), requires_grad=dict(first.named_parameters())[n].requires_grad)
             for n, t in params.items()})
        for n, t in buffers.items():
            self.register_buffer("stacked_buffer__" + _key(n), t.detach().clone(), persistent=n not in transient)
        # The block's code, with no weights of its own: every call supplies
        # them all. Kept outside the module tree so that parameters() and
        # state_dict() never see it.
        object.__setattr__(self, "_template", _hollow(copy.deepcopy(first)))
        self._template.train(self.training)
        self.register_state_dict_post_hook(_per_layer_state)
        self.register_load_state_dict_pre_hook(_stacked_state)

    def __len__(self) -> int:
        return self.num_layers

    def _apply(self, fn, recurse=True):
        # .to() and friends move the template's empty tensors too: a graph
        # that sees them on another device than its inputs is not replayed.
        super()._apply(fn, recurse)
        self._template._apply(fn, recurse)
        return self

    def train(self, mode: bool = True):
        super().train(mode)
        self._template.train(mode)
        return self

    def forward(self, input_data: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        params = {n: self.stacked[_key(n)] for n in self._param_names}
        buffers = {n: getattr(self, "stacked_buffer__" + _key(n)) for n in self._buffer_names}
        return _scan(self._template, params, buffers, input_data, args, kwargs)

    def extra_repr(self) -> str:
        return f"{self.num_layers} x {type(self._template).__name__}"


def _hollow(block: nn.Module) -> nn.Module:
    """`block` with every parameter and buffer replaced by an empty tensor
    on its device (functional_call replaces them all on every call)."""
    for m in block.modules():
        for n, p in m._parameters.items():
            if p is not None:
                m._parameters[n] = nn.Parameter(p.detach().new_empty(0), requires_grad=False)
        for n, b in m._buffers.items():
            if b is not None:
                m._buffers[n] = b.new_empty(0)
    return block


def _stacked_keys(module: ScannedLayers, prefix: str):
    """(name in the block, key of the stacked tensor) for every stacked
    parameter and buffer."""
    for n in module._param_names:
        yield n, f"{prefix}stacked.{_key(n)}"
    for n in module._buffer_names:
        yield n, f"{prefix}stacked_buffer__{_key(n)}"


def _per_layer_state(module: ScannedLayers, state: dict, prefix: str, local_metadata) -> None:
    # The stacked tensors leave the state dict as one entry per layer, in
    # the module list's order: layer by layer, each in the block's order.
    stacked = {n: state.pop(key) for n, key in _stacked_keys(module, prefix) if key in state}
    for i in range(module.num_layers):
        for n in module._state_names:
            if n in stacked:
                state[f"{prefix}{i}.{n}"] = stacked[n][i]


def _stacked_state(module: ScannedLayers, state: dict, prefix: str, local_metadata, strict, missing, unexpected,
                   errors) -> None:
    # Per-layer entries (this module's state dicts, or the unrolled
    # model's) are stacked back. Incomplete sets stay as they are, so that
    # load_state_dict reports the missing and unexpected keys.
    for n, key in _stacked_keys(module, prefix):
        names = [f"{prefix}{i}.{n}" for i in range(module.num_layers)]
        if key not in state and all(k in state for k in names):
            state[key] = torch.stack([state.pop(k) for k in names])
