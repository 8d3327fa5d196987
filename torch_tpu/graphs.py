"""Graph capture and replay on tpu, mirroring ``torch.cuda.graphs``.

``torch.tpu.graph(g)`` (or ``torch.accelerator.Graph``) records everything
run on tpu inside the block, forward, backward on the autograd thread and the
optimizer step alike, as one XLA program bound to the tensors it touched.
``g.replay()`` then runs that program on those tensors' current values and
writes its results back into them without dispatching a single op: a whole
training step becomes one execute call. As with CUDA graphs:

- capturing runs nothing: the tensors keep their old values until a replay;
- new inputs go into the captured input tensors (``static_x.copy_(batch)``)
  before ``replay()``, and results are read from the tensors the capture made;
- warm up a few steps before capturing, so optimizer state exists and is
  not created (zeroed) inside the graph;
- Adam/AdamW need ``capturable=True`` (their step counters on the device);
- reading a value on the host inside the block (``.item()``, ``print``,
  ``.cpu()``) makes the capture fail, and the recorded work runs eagerly.

Random ops draw new numbers on every replay, reproducibly from the seed.
See docs/execution_modes.md.
"""
from __future__ import annotations

import gc
import itertools
import weakref
from typing import Any

import torch

from torch_tpu import _C

__all__ = ["TPUGraph", "graph", "graph_pool_handle", "is_current_stream_capturing"]

_pools = itertools.count(1 << 32)


def is_current_stream_capturing() -> bool:
    """Whether a tpu graph capture is underway (it covers every thread)."""
    return _C._graph_capturing()


def graph_pool_handle() -> tuple[int, int]:
    """An opaque token to pass as ``pool=`` (accepted for compatibility:
    captured graphs keep the storages they name, they own no memory pool)."""
    return (next(_pools), 0)


class TPUGraph(torch.accelerator.Graph):
    """A captured tpu graph (``torch.cuda.CUDAGraph``'s counterpart).

    ``capture_begin()``/``capture_end()`` bracket the work; ``replay()`` runs
    it; ``reset()`` drops it; ``enable_debug_mode()`` before capturing lets
    ``debug_dump(path)`` write the program's StableHLO.
    """

    def __new__(cls, keep_graph: bool = False, **kwargs):
        return super().__new__(cls, keep_graph)

    def __init__(self, keep_graph: bool = False, **kwargs):
        super().__init__(keep_graph, **kwargs)
        self._steps = []  # the optimizer steps captured: (optimizer ref, numbers baked per group)

    def capture_begin(self, pool: tuple[int, int] | None = None, capture_error_mode: str = "global") -> None:
        if torch.accelerator.current_accelerator().type != "tpu":
            raise RuntimeError("TPUGraph needs tpu to be the current accelerator")
        self.graph_pool = pool if pool is not None else self.graph_pool
        self.capture_error_mode = capture_error_mode
        _captured.clear()
        self._steps = []
        super().capture_begin()

    def capture_end(self) -> None:
        super().capture_end()
        self._steps, _captured[:] = list(_captured), []

    def replay(self) -> None:
        if self._steps:
            _check_numbers(self._steps)
        super().replay()

    def reset(self) -> None:
        self._steps = []
        super().reset()

    def __enter__(self) -> None:
        self._block = graph(self, pool=self.graph_pool, capture_error_mode=self.capture_error_mode)
        self._block.__enter__()

    def __exit__(self, *exc) -> None:
        self._block.__exit__(*exc)


class graph:
    """Context manager that captures the tpu work in its block into
    ``tpu_graph`` (``torch.cuda.graph``'s counterpart). ``stream`` is accepted
    for compatibility: a capture records every stream and thread."""

    def __init__(self, tpu_graph: TPUGraph, pool: tuple[int, int] | None = None, stream: Any = None,
                 capture_error_mode: str = "global"):
        if not isinstance(tpu_graph, torch.accelerator.Graph):
            raise TypeError(f"torch.tpu.graph expects a torch.tpu.TPUGraph, got {type(tpu_graph).__name__}")
        self.tpu_graph = tpu_graph
        self.pool = pool
        self.capture_error_mode = capture_error_mode

    @staticmethod
    def _prepare() -> None:
        # Work enqueued before the block is not part of the graph.
        torch.tpu.synchronize()
        gc.collect()

    def __enter__(self) -> None:
        self._prepare()
        if isinstance(self.tpu_graph, TPUGraph):
            self.tpu_graph.capture_begin(pool=self.pool, capture_error_mode=self.capture_error_mode)
        else:
            self.tpu_graph.capture_begin()

    def __exit__(self, exc_type, *rest) -> None:
        if exc_type is not None:
            _C._abort_graph_capture()
            self.tpu_graph.reset()
            _captured.clear()
            return
        self.tpu_graph.capture_end()
        _captured.clear()  # a TPUGraph took its copy; torch.accelerator.Graph keeps none


def _capturable_check(optimizer, args, kwargs) -> None:
    """A global optimizer pre-step hook: PyTorch's own check only covers CUDA
    and XPU. A non-capturable Adam keeps its step counters on the host, so a
    captured step would repeat the first step's bias correction forever.
    Inside a capture it also notes the group's numbers (lr, betas, ...),
    which the captured program holds as constants."""
    if torch.compiler.is_compiling():  # traced by dynamo: no tpu graph capture inside a compiled region
        return
    if not _C._graph_capturing():
        return
    if not all(g.get("capturable", True) or g.get("fused") for g in optimizer.param_groups):
        raise RuntimeError(f"Attempting TPU graph capture of step() for an instance of {type(optimizer).__name__} "
                           "but param_groups' capturable is False.")
    _captured.append((weakref.ref(optimizer), [{k: v for k, v in g.items() if _plain(v)}
                                               for g in optimizer.param_groups]))


def _plain(v) -> bool:
    return isinstance(v, (bool, int, float, str)) or (type(v) is tuple and all(isinstance(x, (int, float)) for x in v))


_captured: list = []  # (optimizer ref, per group {key: number}) of the capture underway


def _check_numbers(steps) -> None:
    """Before a replay: a number the capture holds that changed since (an LR
    scheduler's new lr) raises rather than run the old value in silence."""
    for ref, baked in steps:
        opt = ref()
        if opt is None:
            continue
        for i, (group, then) in enumerate(zip(opt.param_groups, baked)):
            for k, v in then.items():
                now = group.get(k, v)
                if now != v:
                    raise RuntimeError(
                        f"param_groups[{i}]['{k}'] of {type(opt).__name__} changed from {v!r} to {now!r} after the "
                        "tpu graph was captured, and the captured step holds the old value. For a scheduled lr, "
                        "pass it as a tpu tensor, as with CUDA graphs (lr=torch.tensor(0.01, device=\"tpu\"), "
                        "capturable=True): the scheduler then updates it in place and every replay reads it. "
                        "Otherwise capture the graph again after the change.")


def _install() -> None:
    _C._register_graph_impl()
    from torch.optim.optimizer import register_optimizer_step_pre_hook

    register_optimizer_step_pre_hook(_capturable_check)
