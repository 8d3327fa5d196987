"""Checkpoints that a crash cannot leave half-written, for torch.distributed.checkpoint.

``dcp.save`` writes one file per rank and then the metadata. Saving over the
previous checkpoint's directory means a rank killed in the middle leaves a
mix of old and new files that still looks like a checkpoint. Here every
save goes to a directory of its own, ``<root>/step_<n>``; after every rank
has written (a barrier), rank 0 marks it complete with a file written
atomically; only then are older checkpoints removed (the newest ``keep``
complete ones stay). ``latest`` finds the newest complete checkpoint, so a
directory cut short by a crash is never read::

    found = torch_tpu.checkpoint.latest(root)
    if found is not None:
        path, step = found
        dcp.load(state, checkpoint_id=path)
    ...
    torch_tpu.checkpoint.save(state, root, step)

docs/distributed.md, "Faults and restarts", has the whole pattern.
"""
from __future__ import annotations

import os
import re
import shutil

__all__ = ["save", "latest"]

MARKER = "complete"
_NAME = re.compile(r"^step_(\d+)$")


def _complete(root: str) -> list[tuple[int, str]]:
    """(step, path) of the complete checkpoints under root, oldest first."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return []
    out = []
    for name in names:
        m = _NAME.match(name)
        path = os.path.join(root, name)
        if m and os.path.isfile(os.path.join(path, MARKER)):
            out.append((int(m.group(1)), path))
    return sorted(out)


def latest(root: str) -> tuple[str, int] | None:
    """(path, step) of the newest complete checkpoint under root, or None."""
    found = _complete(root)
    return (found[-1][1], found[-1][0]) if found else None


def save(state: dict, root: str, step: int, keep: int = 2) -> str:
    """``dcp.save(state)`` into ``<root>/step_<step>``, marked complete once
    every rank has written; then checkpoints older than the newest `keep`
    complete ones are removed (rank 0). Call it on every rank. Returns the
    checkpoint's path."""
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp

    if keep < 1:
        raise ValueError(f"torch_tpu.checkpoint.save: keep must be at least 1, got {keep}")
    if step < 0:
        raise ValueError(f"torch_tpu.checkpoint.save: step must be non-negative, got {step}")
    path = os.path.join(root, f"step_{step:09d}")
    distributed = dist.is_available() and dist.is_initialized()
    dcp.save(state, checkpoint_id=path)
    if distributed:
        dist.barrier()  # every rank's files are written
    if not distributed or dist.get_rank() == 0:
        tmp = os.path.join(path, f".{MARKER}.tmp")
        with open(tmp, "w") as f:
            f.write(f"{step}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, MARKER))  # atomic: the marker exists whole or not at all
        _prune(root, keep)
    if distributed:
        dist.barrier()  # nobody reads a checkpoint rank 0 is removing
    return path


def _prune(root: str, keep: int) -> None:
    complete = _complete(root)
    if not complete:
        return
    oldest_kept = complete[-keep:][0][0]
    for name in os.listdir(root):
        m = _NAME.match(name)
        if m and int(m.group(1)) < oldest_kept:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)
