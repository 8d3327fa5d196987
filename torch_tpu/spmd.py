"""SPMD across the devices of one host: ``torch_tpu.spmd``.

One process drives every local device. A tensor marked with a sharding is
one logical tensor whose storage is spread over a device mesh, one block per
device. A ``torch.compile(backend="tpu")`` graph, or a fused-eager flush
(``EagerMode.DEFER_AND_FUSE``), that reads a sharded tensor compiles as one
SPMD program: the shardings become ``mhlo.sharding`` annotations, XLA's
partitioner splits the program over the mesh and inserts the collectives,
and every device runs its part at once. Results come back sharded as the
partitioner laid them out; a tensor the program updates in place (a
parameter, an optimizer state) keeps its sharding.

The names follow torch_xla's ``torch_xla.distributed.spmd``::

    import numpy as np
    import torch_tpu.spmd as xs

    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
    xs.mark_sharding(linear.weight, mesh, ("model", None))  # rows over "model"
    batch = xs.shard(host_batch, mesh, ("data", None))       # one call from the host

Reading a sharded tensor on the host (``.cpu()``, ``.item()``, printing)
assembles the whole value. A strict-eager op on one runs on the whole value,
gathered onto the tensor's device once (with a warning); the tensor keeps its
sharding for the next SPMD program. See docs/spmd.md.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from torch_tpu import _C

__all__ = ["Mesh", "mark_sharding", "clear_sharding", "shard", "get_sharding", "local_shards", "ShardingSpec"]


class Mesh:
    """A logical grid of devices: ``device_ids`` (tpu device indices) laid
    out row-major in ``mesh_shape``, each axis optionally named. Partition
    ``p`` of an SPMD program runs on ``device_ids[p]``."""

    def __init__(self, device_ids, mesh_shape: Sequence[int], axis_names: Sequence[str] | None = None):
        ids = [int(d) for d in (device_ids.tolist() if hasattr(device_ids, "tolist") else device_ids)]
        ids = list(_flatten(ids))
        shape = tuple(int(s) for s in mesh_shape)
        if math.prod(shape) != len(ids):
            raise ValueError(f"Mesh: mesh_shape {shape} holds {math.prod(shape)} devices, but {len(ids)} device ids "
                             "were given")
        if len(set(ids)) != len(ids):
            raise ValueError(f"Mesh: device ids must be distinct, got {ids}")
        count = torch.tpu.device_count()
        for d in ids:
            if not 0 <= d < count:
                raise ValueError(f"Mesh: device id {d} is out of range: this process has {count} tpu device(s) "
                                 "(TORCH_TPU_NUM_CPU_DEVICES sets how many on XLA:CPU)")
        if axis_names is not None:
            axis_names = tuple(axis_names)
            if len(axis_names) != len(shape):
                raise ValueError(f"Mesh: {len(axis_names)} axis names for a mesh of {len(shape)} dimensions")
            if len(set(axis_names)) != len(axis_names):
                raise ValueError(f"Mesh: axis names must be distinct, got {axis_names}")
        self.device_ids = tuple(ids)
        self.mesh_shape = shape
        self.axis_names = axis_names

    def size(self) -> int:
        return len(self.device_ids)

    def shape(self) -> dict:
        names = self.axis_names or tuple(range(len(self.mesh_shape)))
        return dict(zip(names, self.mesh_shape))

    def get_logical_mesh(self):
        import numpy as np

        return np.array(self.device_ids).reshape(self.mesh_shape)

    def _axis(self, a) -> int:
        if isinstance(a, int):
            if not 0 <= a < len(self.mesh_shape):
                raise ValueError(f"partition spec: mesh axis {a} is out of range for a mesh of "
                                 f"{len(self.mesh_shape)} dimensions")
            return a
        if self.axis_names is None or a not in self.axis_names:
            raise ValueError(f"partition spec: unknown mesh axis {a!r} (the mesh's axes are "
                             f"{self.axis_names or tuple(range(len(self.mesh_shape)))})")
        return self.axis_names.index(a)

    def __eq__(self, other) -> bool:
        return (isinstance(other, Mesh) and self.device_ids == other.device_ids and self.mesh_shape == other.mesh_shape
                and self.axis_names == other.axis_names)

    def __hash__(self) -> int:
        return hash((self.device_ids, self.mesh_shape, self.axis_names))

    def __repr__(self) -> str:
        return f"Mesh(device_ids={list(self.device_ids)}, mesh_shape={self.mesh_shape}, axis_names={self.axis_names})"


def _flatten(xs):
    for x in xs:
        if isinstance(x, (list, tuple)):
            yield from _flatten(x)
        else:
            yield x


class ShardingSpec:
    """A tensor's layout over a mesh: tiles per dimension, how many devices
    hold each tile, and the partition holding each (row-major), as XLA's
    HloSharding."""

    def __init__(self, devices, tiles, replicas, assignment, dims, hlo):
        self.devices = tuple(devices)  # the mesh's devices, per partition
        self.tiles = tuple(tiles)
        self.replicas = int(replicas)
        self.assignment = tuple(assignment)
        self.dims = tuple(dims)
        self.hlo = hlo

    @property
    def replicated(self) -> bool:
        return not self.tiles

    def __repr__(self) -> str:
        return f"ShardingSpec({self.hlo}, devices={list(self.devices)})"


def _layout(mesh: Mesh, ndim: int, partition_spec) -> tuple[list, int, list]:
    """(tiles per tensor dim, replicas, partition ids row-major) for a spec."""
    import numpy as np

    spec = tuple(partition_spec)
    if len(spec) != ndim:
        raise ValueError(f"mark_sharding: the partition spec {spec} has {len(spec)} entries for a tensor of "
                         f"{ndim} dimensions (one per dimension: a mesh axis, a tuple of axes, or None)")
    used: list[int] = []
    per_dim: list[list[int]] = []
    for entry in spec:
        axes = [] if entry is None else [mesh._axis(a) for a in (entry if isinstance(entry, tuple) else (entry,))]
        for a in axes:
            if a in used:
                raise ValueError(f"mark_sharding: mesh axis {a!r} appears twice in the partition spec {spec}")
            used.append(a)
        per_dim.append(axes)
    rest = [a for a in range(len(mesh.mesh_shape)) if a not in used]
    grid = np.arange(mesh.size()).reshape(mesh.mesh_shape).transpose(used + rest)
    tiles = [math.prod(mesh.mesh_shape[a] for a in axes) for axes in per_dim]
    replicas = math.prod(mesh.mesh_shape[a] for a in rest)
    if all(t == 1 for t in tiles):
        return [], mesh.size(), list(range(mesh.size()))
    return tiles, replicas, grid.reshape(-1).tolist()


def _blocks(host: torch.Tensor, tiles: list, replicas: int, assignment: list, n: int) -> list[torch.Tensor]:
    """Per partition, its block of `host` (padded with zeros to the even
    block size where a dimension does not split evenly, as XLA pads)."""
    if not tiles:
        flat = host.reshape(-1).contiguous()
        return [flat] * n
    sizes = [-(-d // t) for d, t in zip(host.shape, tiles)]
    out = []
    for p in range(n):
        pos = assignment.index(p) // replicas
        idx = []
        for t in reversed(tiles):
            idx.append(pos % t)
            pos //= t
        idx.reverse()
        block = host
        for d, (i, s) in enumerate(zip(idx, sizes)):
            block = block.narrow(d, min(i * s, host.shape[d]), max(0, min(s, host.shape[d] - i * s)))
        if list(block.shape) != sizes:
            pad = torch.zeros(sizes, dtype=host.dtype)
            pad[tuple(slice(0, b) for b in block.shape)] = block
            block = pad
        out.append(block.contiguous())
    return out


def _place(target: torch.Tensor, host: torch.Tensor, mesh: Mesh, partition_spec) -> None:
    tiles, replicas, assignment = _layout(mesh, host.dim(), partition_spec)
    blocks = _blocks(host, tiles, replicas, assignment, mesh.size())
    dims = list(host.shape) if tiles else [host.numel()]
    _C._spmd_shard(target, list(mesh.device_ids), tiles, replicas, assignment, dims, blocks)


def _from_dtensor_layout(mesh, placements, ndim: int):
    """A torch.distributed DeviceMesh over local tpu devices and DTensor
    placements (Shard(d) / Replicate()), as a Mesh and a partition spec."""
    from torch.distributed.tensor import Replicate, Shard

    ids = mesh.mesh.reshape(-1).tolist()
    names = mesh.mesh_dim_names or tuple(f"dim{i}" for i in range(mesh.mesh.dim()))
    ours = Mesh(ids, tuple(mesh.mesh.shape), names)
    spec: list = [None] * ndim
    for axis, pl in enumerate(placements):
        if isinstance(pl, Shard):
            d = pl.dim % ndim
            spec[d] = names[axis] if spec[d] is None else (*(spec[d] if isinstance(spec[d], tuple) else (spec[d],)),
                                                           names[axis])
        elif not isinstance(pl, Replicate):
            raise ValueError(f"mark_sharding: the placement {pl} has no SPMD layout (only Shard and Replicate)")
    return ours, tuple(spec)


def _resolve(t: torch.Tensor, mesh, partition_spec):
    if not isinstance(mesh, Mesh) and hasattr(mesh, "mesh") and hasattr(mesh, "device_type"):
        return _from_dtensor_layout(mesh, partition_spec, t.dim())
    if not isinstance(mesh, Mesh):
        raise TypeError(f"mark_sharding: expected a torch_tpu.spmd.Mesh (or a DeviceMesh), got {type(mesh).__name__}")
    return mesh, partition_spec


def mark_sharding(t: torch.Tensor, mesh: Mesh, partition_spec) -> torch.Tensor:
    """Spreads ``t`` (a tpu tensor, in place) over ``mesh``: entry ``i`` of
    ``partition_spec`` names the mesh axis (or tuple of axes) dimension
    ``i`` is split over, or ``None`` to keep it whole. Mesh axes the spec does
    not name hold replicas. Returns ``t``."""
    if not isinstance(t, torch.Tensor) or t.device.type != "tpu":
        raise TypeError(f"mark_sharding: expected a tpu tensor, got {getattr(t, 'device', type(t).__name__)}; move "
                        "it with .to('tpu') or use torch_tpu.spmd.shard(tensor, mesh, spec) for a host tensor")
    mesh, partition_spec = _resolve(t, mesh, partition_spec)
    base = t.data if isinstance(t, torch.nn.Parameter) else t
    host = base.detach().cpu()
    _place(base, host, mesh, partition_spec)
    return t


def shard(tensor: torch.Tensor, mesh: Mesh, partition_spec) -> torch.Tensor:
    """A new tpu tensor holding ``tensor`` (host or tpu) sharded over
    ``mesh``: each device receives only its block, straight from the host."""
    mesh, partition_spec = _resolve(tensor, mesh, partition_spec)
    host = tensor.detach().cpu() if tensor.device.type != "cpu" else tensor.detach()
    out = torch.empty(host.shape, dtype=host.dtype, device=torch.device("tpu", mesh.device_ids[0]))
    _place(out, host, mesh, partition_spec)
    return out


def clear_sharding(t: torch.Tensor) -> torch.Tensor:
    """Gathers ``t`` whole onto its own device and drops its sharding."""
    _C._spmd_clear(t.data if isinstance(t, torch.nn.Parameter) else t)
    return t


def get_sharding(t: torch.Tensor) -> ShardingSpec | None:
    """``t``'s layout over its mesh, or None when it is not sharded."""
    info = _C._spmd_info(t.data if isinstance(t, torch.nn.Parameter) else t)
    return None if info is None else ShardingSpec(*info)


def local_shards(t: torch.Tensor) -> list[torch.Tensor]:
    """Per partition, the block its device holds, copied to the host (XLA
    pads blocks of an uneven split)."""
    return _C._spmd_host_shards(t.data if isinstance(t, torch.nn.Parameter) else t)
