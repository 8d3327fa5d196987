"""Eager execution modes, named as TorchTPU names them.

``torch.tpu.eager_mode`` selects one, globally:

* ``DEFER_NEVER`` (default): strict eager. Every op runs as its own cached
  program, asynchronously.
* ``DEFER_NEVER_AND_LAUNCH_BLOCKING``: the same, but every op waits for its
  result, so errors surface on the line that caused them
  (``TORCH_TPU_LAUNCH_BLOCKING=1``).
* ``DEFER_AND_FUSE``: fused eager. Ops are recorded into a pending graph and
  run as one program when a value is needed (``TORCH_TPU_DEFER_AND_FUSE=1``).
  See docs/execution_modes.md.
"""
from __future__ import annotations

import enum
import os
import weakref

import torch

from torch_tpu import _C


class EagerMode(enum.IntEnum):
    DEFER_NEVER = 0
    DEFER_NEVER_AND_LAUNCH_BLOCKING = 1
    DEFER_AND_FUSE = 2

    def __str__(self) -> str:
        return f"EagerMode.{self.name}"


def get_eager_mode() -> EagerMode:
    return EagerMode(_C._eager_mode())


def _set(mode) -> None:
    if isinstance(mode, str):
        try:
            mode = EagerMode[mode]
        except KeyError:
            raise ValueError(f"unknown eager mode {mode!r}; expected one of {[m.name for m in EagerMode]}") from None
    if not isinstance(mode, (EagerMode, int)) or int(mode) not in {int(m) for m in EagerMode}:
        raise ValueError(f"unknown eager mode {mode!r}; expected a torch.tpu.EagerMode")
    _C._set_eager_mode(int(mode))


class set_eager_mode:
    """Sets the eager mode; as a context manager, restores the previous one on exit.

    ``with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE): ...``
    """

    def __init__(self, mode) -> None:
        self.prev = get_eager_mode()
        _set(mode)

    def __enter__(self) -> "set_eager_mode":
        return self

    def __exit__(self, *exc) -> bool:
        _set(self.prev)
        return False


def mark_step() -> None:
    """Runs the pending fused-eager graph now (a no-op in strict eager).

    torch_xla's name for the step boundary, kept as a compatibility alias.
    """
    _C._mark_step()


# optimizer.step() runs as one program in every mode but debug eager: in
# strict eager the step is recorded by the fused driver and flushed at its
# end (AdamW over N parameters is one program, not one per tensor per op);
# in fused eager the step's end is a flush, so every training step is the
# same graph (one cache hit per step) instead of graphs cut wherever the
# size limit falls. TORCH_TPU_FUSE_OPTIMIZER=0 leaves strict eager per-op.
_fuse_optimizer = os.environ.get("TORCH_TPU_FUSE_OPTIMIZER", "1") != "0"
_step_modes: list = []  # the mode to restore, per optimizer.step() in progress


def _on_tpu(optimizer) -> bool:
    for group in optimizer.param_groups:
        for p in group["params"]:
            return p.device.type == "tpu"
    return False


def _split_min_bytes_from_env() -> float:
    v = os.environ.get("TORCH_TPU_SPLIT_OPTIMIZER_STEP", "auto").strip().lower()
    if v in ("", "auto"):
        return 512 * 1024
    if v in ("1", "true"):
        return 0
    if v in ("0", "false"):
        return float("inf")
    raise ValueError(f"TORCH_TPU_SPLIT_OPTIMIZER_STEP must be auto, 1 or 0, got {v!r}")


# Fused eager and graph capture end one program before optimizer.step() and
# start the next (why: _optimizer_step_begin) only when the parameters hold
# at least this many bytes. Below it the second program's launch costs more
# than it saves: on XLA:CPU the demo MLP (22K parameters, AdamW) replayed
# 19% faster unsplit, while from about 285K parameters up (MLP 784-512-512
# 3-20%, ResNet-18 2.3x) the split wins (docs/benchmarks.md).
_split_min_bytes = _split_min_bytes_from_env()
_split_memo: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def _split_before_step(optimizer) -> bool:
    if _split_min_bytes <= 0:
        return True
    # The byte count is kept per optimizer and redone when the number of
    # parameters changes (add_param_group()).
    count = sum(len(g["params"]) for g in optimizer.param_groups)
    memo = _split_memo.get(optimizer)
    if memo is None or memo[0] != count:
        memo = (count, sum(p.numel() * p.element_size() for g in optimizer.param_groups for p in g["params"]))
        _split_memo[optimizer] = memo
    return memo[1] >= _split_min_bytes


def _optimizer_step_begin(optimizer, args, kwargs) -> None:
    # A compiled step is one program already. A graph capture ends one
    # program of the region here and starts the next, for the reason below.
    if torch.compiler.is_compiling():
        return
    if _C._graph_capturing():
        if _on_tpu(optimizer) and _split_before_step(optimizer):
            _C._cut_graph_capture()
        return
    if _step_modes:
        # A step raised before its post-hook ran (optimizers do not nest):
        # go back to the mode the user had.
        _C._set_eager_mode(int(_step_modes[0]))
        _step_modes.clear()
        _C._set_optimizer_step(False)
    mode = _C._eager_mode()
    _step_modes.append(mode)
    if mode == EagerMode.DEFER_AND_FUSE:
        # The forward and backward run as one program, the step as another.
        # In one program XLA:CPU fuses the layout change of each weight
        # gradient (a convolution's [I, kh, kw, O] result transposed to
        # [O, I, kh, kw]) into every optimizer update that reads it: strided
        # reads, once per consumer. ResNet-18's fused step ran 2.5x faster
        # split here, the MLP's 1.2x; the GPT step was unchanged. Small
        # models are not split (_split_min_bytes).
        if _split_before_step(optimizer):
            _C._mark_step("before optimizer step")
        _C._set_optimizer_step(True)
    elif mode == EagerMode.DEFER_NEVER and _fuse_optimizer and _on_tpu(optimizer):
        _C._set_eager_mode(int(EagerMode.DEFER_AND_FUSE))
        _C._set_optimizer_step(True)


def _optimizer_step_done(optimizer, args, kwargs) -> None:
    if torch.compiler.is_compiling() or _C._graph_capturing():
        return
    _C._set_optimizer_step(False)
    prev = _step_modes.pop() if _step_modes else _C._eager_mode()
    if _C._eager_mode() == EagerMode.DEFER_AND_FUSE:
        _C._mark_step("optimizer step")
    if prev != _C._eager_mode():
        _C._set_eager_mode(int(prev))


_hooked = False


def _install() -> None:
    global _hooked
    if not _hooked:
        from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

        register_optimizer_step_pre_hook(_optimizer_step_begin)
        register_optimizer_step_post_hook(_optimizer_step_done)
        _hooked = True

    def on(name: str) -> bool:
        return os.environ.get(name, "0") not in ("", "0")

    # Launch blocking is a debugging switch: it wins when both are set.
    blocking = on("TORCH_TPU_LAUNCH_BLOCKING") or on("TPU_LAUNCH_BLOCKING")
    if on("TORCH_TPU_DEFER_AND_FUSE") and not blocking:
        _set(EagerMode.DEFER_AND_FUSE)
    # Backward on the calling thread. For an accelerator the autograd engine
    # hands every backward to a per-device worker thread and the caller waits
    # on it: two thread switches and a GIL hand-off per backward, which cost
    # more than a small model's whole backward here (demo MLP step under
    # torch.compile 899 -> 719 us, strict 1432 -> 1282 us). tpu ops are
    # already asynchronous, so the worker thread buys no overlap. The switch
    # is PyTorch's own, thread-local: threads started later keep the default.
    if os.environ.get("TORCH_TPU_BACKWARD_THREAD", "0") in ("", "0"):
        torch.autograd.set_multithreading_enabled(False)


def _drain_autograd_device_threads() -> None:
    """Lets the autograd engine's tpu thread finish its last graph task.

    That thread drops its reference to a finished (or failed) backward
    shortly after the caller resumes. torch.autograd stashes a Python object
    in every backward's thread-local state, so dropping the last reference
    takes the GIL; once the interpreter is finalizing, that ends the thread
    inside a noexcept destructor and the process aborts ("terminate called
    without an active exception"). At exit, while the GIL can still be
    taken, one more backward goes through the same queue: its node runs only
    after everything queued before it has been released. It calls the engine
    directly (no stashed Python object) through a C++ view node and returns
    no tensors, so its own release never needs the GIL.
    """
    from torch_tpu import _C

    if not _C._is_initialized():
        return
    try:
        x = torch.empty((), device="tpu", requires_grad=True)
        y = x.view(())
        # Through the device thread's queue, even where this thread runs its
        # own backwards on itself (other threads may have used the queue).
        torch.autograd.set_multithreading_enabled(True)
        # backward(), not grad(): a graph task holding result tensors would
        # drop Python objects again when released.
        torch.autograd.Variable._execution_engine.run_backward(
            (y,), (torch.empty((), device="tpu"),), False, False, (), True, True)
    except Exception:  # exit must not fail because of this
        pass
