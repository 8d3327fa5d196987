"""``torch.compile(model, backend="tpu")``.

Dynamo captures the Python, AOTAutograd turns each captured region into
functional ATen graphs (forward, and backward when gradients are needed),
and each graph runs through the same ATen kernels as eager, recorded by the
fused-eager driver and run as one XLA program per graph. The program is
keyed by its ops and data flow, so the second call and every later one
(and a fresh process with a warm disk cache) compile nothing.

Options (``torch.compile(..., options={...})``): ``debug_callback``, called
with each ATen graph (an ``fx.GraphModule``) before it first runs, and
``name``, a label for the graphs in logs and metrics.
"""
from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
from typing import Any, Callable

from torch_tpu import _C

logger = logging.getLogger("torch_tpu")
_FUSED = 2
_KNOWN_OPTIONS = {"debug_callback", "name"}


def _graph_runner(gm, label: str, kind: str) -> Callable:
    why = f"compiled {kind}"

    def run(*args):
        prev = _C._eager_mode()
        if prev == _FUSED:
            _C._mark_step("before a compiled graph")  # the graph gets a program of its own
        else:
            _C._set_eager_mode(_FUSED)
        try:
            out = gm(*args)
            # The graph's live results are materialised as one program.
            _C._mark_step(why)
            return out
        finally:
            if prev != _FUSED:
                _C._set_eager_mode(prev)

    run.__name__ = f"tpu_graph_{label}"
    return run


def tpu_backend(gm, example_inputs, options: dict[str, Any] | None = None, mode: str | None = None, **kwargs):
    """The dynamo backend registered as ``"tpu"``."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd

    opts = dict(options or {})
    opts.update(kwargs)
    unknown = set(opts) - _KNOWN_OPTIONS
    if unknown:
        raise ValueError(f"torch.compile backend 'tpu': unknown options {sorted(unknown)}; "
                         f"supported: {sorted(_KNOWN_OPTIONS)}")
    callback = opts.get("debug_callback")
    name = opts.get("name") or "graph"
    counter = [0]

    def compiler(kind: str):
        def compile_graph(aten_gm, inputs):
            counter[0] += 1
            label = f"{name}_{kind}_{counter[0]}"
            logger.debug("tpu backend: %s has %d nodes", label, len(aten_gm.graph.nodes))
            if callback is not None:
                callback(aten_gm)
            return make_boxed_func(_graph_runner(aten_gm, label, kind))

        return compile_graph

    # keep_inference_input_mutations: a no-grad graph (an optimizer step)
    # writes its mutated inputs inside the graph, so the updates are part of
    # the one program instead of copies run afterwards.
    backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                           keep_inference_input_mutations=True)
    return backend(gm, example_inputs)


# --- torch.compile's default backend (Inductor) on tpu tensors ------------
# Inductor would generate Pallas (JAX) kernels for a device named "tpu" and
# fail deep inside with "No module named 'jax'". Registering our own entry
# for the device first makes it fail with the fix in the message instead.
_MESSAGE = ('torch.compile\'s default backend (inductor) cannot compile tpu tensors; '
            'use torch.compile(model, backend="tpu")')


class _RefuseMeta(type):
    def __getattr__(cls, name):  # Inductor reads class attributes before it builds one
        raise RuntimeError(_MESSAGE)


class _Refuse(metaclass=_RefuseMeta):
    def __init__(self, *args, **kwargs):
        raise RuntimeError(_MESSAGE)


def _guard_inductor(common) -> None:
    if common.get_scheduling_for_device("tpu") is None:
        common.register_backend_for_device("tpu", _Refuse, _Refuse)


class _InductorHook(importlib.abc.MetaPathFinder):
    """Runs _guard_inductor right after Inductor's codegen registry is imported,
    so that plain ``import torch`` never pays for importing Inductor."""

    target = "torch._inductor.codegen.common"

    def find_spec(self, fullname, path, target=None):
        if fullname != self.target:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_guard(module):
            exec_module(module)
            _guard_inductor(module)

        spec.loader.exec_module = exec_then_guard
        return spec


def _install() -> None:
    mod = sys.modules.get(_InductorHook.target)
    if mod is not None:
        _guard_inductor(mod)
    elif not any(isinstance(f, _InductorHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _InductorHook())
