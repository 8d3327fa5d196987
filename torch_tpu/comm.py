"""Collectives across the tpu devices of one process: ``torch.tpu.comm``.

The counterpart of ``torch.cuda.comm`` and ``torch.cuda.nccl`` for the case
where one process drives several devices. Each call is one StableHLO
program (``all_reduce``, ``all_gather``, ``reduce_scatter``, ``all_to_all``)
compiled with one replica per device and cached like every other program,
so the exchange happens inside XLA: over ICI on a TPU, NVLink/NCCL under the
CUDA plugin, shared memory across XLA:CPU's logical devices
(``TORCH_TPU_NUM_CPU_DEVICES``). Tensors are given in group order: the
position in the list, not the device index, decides where a piece goes.

Across processes use ``torch.distributed`` with the ``"tpu"`` backend
(docs/distributed.md).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch

from torch_tpu import _C

__all__ = ["all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all", "reduce_add", "broadcast_to"]

_OPS = {"sum": "sum", "avg": "avg", "mean": "avg", "min": "min", "max": "max", "product": "product", "prod": "product"}


def _op_name(op) -> str:
    if isinstance(op, str):
        name = _OPS.get(op.lower())
    else:  # torch.distributed.ReduceOp or its RedOpType
        name = _OPS.get(str(getattr(op, "name", op)).split(".")[-1].lower())
    if name is None:
        raise ValueError(f"unsupported reduce op {op!r} (expected sum, avg, min, max or product)")
    return name


def _list(tensors: Sequence[torch.Tensor], what: str) -> list[torch.Tensor]:
    if isinstance(tensors, torch.Tensor):
        raise TypeError(f"{what}: expected a sequence of tensors, one per device, got a single tensor")
    return list(tensors)


def all_reduce(tensors: Sequence[torch.Tensor], op="sum") -> list[torch.Tensor]:
    """In place: every tensor becomes the reduction of all of them."""
    ts = _list(tensors, "all_reduce")
    return _C._device_collective("all_reduce", ts, _op_name(op), 0, True)


def broadcast(tensors: Sequence[torch.Tensor], root: int = 0) -> list[torch.Tensor]:
    """In place: every tensor becomes a bit-exact copy of ``tensors[root]``."""
    ts = _list(tensors, "broadcast")
    return _C._device_collective("broadcast", ts, "sum", int(root), True)


def all_gather(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per device, the tensors concatenated along dim 0 (0-d: stacked)."""
    return _C._device_collective("all_gather", _list(tensors, "all_gather"), "sum", 0, False)


def reduce_scatter(tensors: Sequence[torch.Tensor], op="sum") -> list[torch.Tensor]:
    """Per device k, piece k (along dim 0) of the reduction of all tensors."""
    return _C._device_collective("reduce_scatter", _list(tensors, "reduce_scatter"), _op_name(op), 0, False)


def all_to_all(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Per device k, piece k (along dim 0) of every tensor, concatenated in order."""
    return _C._device_collective("all_to_all", _list(tensors, "all_to_all"), "sum", 0, False)


# torch.cuda.comm's names.


def broadcast_to(tensor: torch.Tensor, devices: Sequence[int | str | torch.device]) -> tuple[torch.Tensor, ...]:
    """``tensor`` copied to each of ``devices`` (its own device among them): ``torch.cuda.comm.broadcast``."""
    devs = [torch.device("tpu", d) if isinstance(d, int) else torch.device(d) for d in devices]
    if tensor.device not in devs:
        raise ValueError(f"broadcast_to: the source {tensor.device} must be one of the devices")
    outs = [tensor if d == tensor.device else torch.empty_like(tensor, device=d) for d in devs]
    return tuple(broadcast(outs, root=devs.index(tensor.device)))


def reduce_add(inputs: Sequence[torch.Tensor], destination: int | None = None) -> torch.Tensor:
    """The sum of ``inputs`` on device ``destination`` (default: the first input's): ``torch.cuda.comm.reduce_add``."""
    ts = _list(inputs, "reduce_add")
    results = _C._device_collective("all_reduce", ts, "sum", 0, False)
    if destination is None:
        return results[0]
    for t, r in zip(ts, results):
        if t.device.index == destination:
            return r
    raise ValueError(f"reduce_add: no input is on tpu:{destination}")
