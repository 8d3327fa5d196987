"""``torch.compile(model, backend="tpu")``.

Dynamo captures the Python. A captured graph that needs no autograd at run
time (a traced training step, an optimizer step, inference) runs as dynamo
captured it; the others go through AOTAutograd, which turns each into
functional ATen graphs (forward, and backward when gradients are needed).
A graph's first run goes through the same ATen kernels as eager, recorded
by the fused-eager driver into one XLA program, which is captured; later
calls with matching inputs replay that program without dispatching a single
op (docs/execution_modes.md). Programs are keyed by their ops and data flow,
so a fresh process with a warm disk cache compiles nothing.

Options (``torch.compile(..., options={...})``): ``debug_callback``, called
with each ATen graph (an ``fx.GraphModule``) before it first runs;
``name``, a label for the graphs in logs and metrics; ``trace_backward``
(default True, or ``TORCH_TPU_COMPILE_TRACE_BACKWARD``), which traces
``loss.backward()`` into the graph (dynamo's ``trace_autograd_ops``, for this
compiled function only) where no gradient hook would be skipped.
"""
from __future__ import annotations

import logging
import os
from typing import Any

from torch_tpu import _C, _buckets, _masked

logger = logging.getLogger("torch_tpu")
_FUSED = 2
_KNOWN_OPTIONS = {"buckets", "debug_callback", "name", "trace_backward"}
_NO_OP = "the graph recorded no op"  # _end_capture's reason for a graph of views
# For the metrics report: ATen graphs handed to the backend, how many were
# captured for replay, and why the others run their ops on every call.
stats = {"graphs": 0, "captured": 0, "bucketed": 0, "masked": 0, "without_aot": 0, "not_captured": {}}


def _node_val(node):
    """A node's example value: AOTAutograd's graphs keep it in meta["val"],
    dynamo's in meta["example_value"]."""
    meta = node.meta
    return meta["val"] if "val" in meta else meta.get("example_value")


def _is_copy_to_tpu(node) -> bool:
    """Whether `node` copies its first argument to tpu (``x.to("tpu")``
    in a dynamo graph, ``aten._to_copy`` in an ATen one), changing nothing
    but the device."""
    import torch

    if node.op == "call_method":
        is_copy = node.target == "to"
    elif node.op == "call_function":
        is_copy = node.target in (torch.ops.aten._to_copy.default, torch.Tensor.to)
    else:
        is_copy = False
    if not is_copy or not node.args:
        return False
    out, src = _node_val(node), _node_val(node.args[0])
    return (isinstance(out, torch.Tensor) and isinstance(src, torch.Tensor) and out.device.type == "tpu"
            and out.dtype == src.dtype and out.shape == src.shape)


def _host_inputs(gm) -> tuple:
    """The positions of the inputs that are CPU tensors the graph only copies
    to tpu. Hugging Face's static cache keeps its write position as a 0-d
    CPU tensor until the first compiled forward moves it: the runner moves
    such an input before the graph runs, so the copy inside is tpu to tpu
    and the graph can be captured (else the prefill of every generate()
    call would run op by op)."""
    import torch

    out = []
    for i, node in enumerate(n for n in gm.graph.nodes if n.op == "placeholder"):
        v = _node_val(node)
        if (isinstance(v, torch.Tensor) and v.device.type == "cpu" and node.users
                and all(_is_copy_to_tpu(u) for u in node.users)):
            out.append(i)
    return tuple(out)


def _replayable(gm, host_inputs: tuple = ()) -> bool:
    """Whether every tensor the graph takes or computes lives on tpu, apart
    from the `host_inputs` the runner moves there first. A CPU op (a CPU
    step counter updated in place) happens outside our recording, and a
    kernel may read a CPU scalar tensor on the host and bake its value into
    the program (ATen's foreach fallbacks do), which a replay would reuse
    stale; such graphs run their ops on every call."""
    import torch

    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    moved = {placeholders[i] for i in host_inputs}
    for node in gm.graph.nodes:
        if node in moved:
            continue
        if node.op == "get_attr":
            attr = getattr(gm, node.target, None)
            if isinstance(attr, torch.Tensor) and attr.device.type != "tpu":
                return False
        vals = _node_val(node)
        for v in vals if isinstance(vals, (list, tuple)) else (vals,):
            if isinstance(v, torch.Tensor) and v.device.type != "tpu":
                return False
    return True


class _Capture:
    __slots__ = ("handle", "template", "scalars", "all_tensors")

    def __init__(self, handle, template, scalars):
        self.handle = handle
        self.template = template  # per output: (is a tensor, else its value)
        self.scalars = scalars  # the non-tensor arguments (sizes under dynamic=True)
        self.all_tensors = all(is_t for is_t, _ in template)


class _GraphRunner:
    """Runs one AOTAutograd graph. The first call with a given input
    signature runs the graph's ATen ops under the fused driver and captures
    the one program they make; later calls whose inputs match a capture's
    metadata execute it directly (guards, then one execute). A graph keeps up
    to _MAX_CAPTURES captures (one per shape under dynamic=True); other calls,
    and graphs that cannot be captured, run the ops (through the fused-eager
    cache)."""

    _MAX_CAPTURES = 8

    def __init__(self, gm, label: str, kind: str, attrs: tuple = ()):
        self.gm = gm
        # Tensors the graph reads from its module (a dynamo graph's get_attr
        # nodes: optimizer state, parameters): captured and replayed as
        # inputs after the call's own.
        self.attrs = list(attrs)
        self.label = label
        self.why = f"compiled {kind}"
        self.last = None  # the capture that ran last: tried first
        self.captures = []
        self.failures = 0
        self.views_only = False
        stats["graphs"] += 1
        # Every input a tensor: each Python number the ops see is a constant
        # of dynamo's graph (a changed one is a new graph), so the program
        # bakes them in rather than taking ~100 scalar parameters (an AdamW
        # step's lr, betas, eps per parameter) on every execute. A graph
        # with a number or size among its inputs keeps them as parameters.
        import torch

        self.constant_numbers = all(isinstance(_node_val(n), torch.Tensor)
                                    for n in gm.graph.nodes if n.op == "placeholder")
        self.host_inputs = _host_inputs(gm)
        self.capturable = _replayable(gm, self.host_inputs)
        if not self.capturable:
            why = "the graph holds CPU tensors"
            stats["not_captured"][why] = stats["not_captured"].get(why, 0) + 1

    def __call__(self, *args):
        import torch

        if self.host_inputs:
            args = self._move_host_inputs(args)
        if self.views_only or _C._graph_capturing():
            # Nothing to replay (a graph of views, as `loss.detach()` after a
            # step makes), or the ops go into the tpu graph being captured.
            return self.gm(*args)
        last = self.last
        if last is not None and self.constant_numbers and last.all_tensors:
            # The common case, kept short: tensors in, tensors out.
            outs = _C._replay(last.handle, [*args, *self.attrs])
            if outs is not None:
                return outs
        if last is not None:
            tensors = [a for a in args if isinstance(a, torch.Tensor)] + self.attrs
            scalars = [a for a in args if not isinstance(a, torch.Tensor)]
            for cap in (self.last, *(c for c in self.captures if c is not self.last)):
                if cap.scalars == scalars:
                    outs = _C._replay(cap.handle, tensors)
                    if outs is not None:
                        self.last = cap
                        it = iter(outs)
                        return [next(it) if is_t else v for is_t, v in cap.template]
        # Not captured yet, or the inputs match no capture: run the ops.
        return self._run_ops(args)

    def _move_host_inputs(self, args):
        args = list(args)
        for i in self.host_inputs:
            a = args[i]
            if a.device.type != "tpu":
                args[i] = a.to("tpu", non_blocking=True)
        return args

    def _run_ops(self, args):
        import torch

        prev = _C._eager_mode()
        capture = self.capturable and self.failures < 2 and len(self.captures) < self._MAX_CAPTURES
        if prev != _FUSED:
            _C._set_eager_mode(_FUSED)
        prev_graph_run = _C._set_compiled_graph_run(True)
        try:
            if capture:
                _C._begin_capture()
            else:
                _C._mark_step("before a compiled graph")  # the graph gets a program of its own
            if self.constant_numbers:
                _C._set_bake_numbers(True)  # until the graph's flush (or a host read inside it)
            out = self.gm(*args)
            if capture:
                tensors = [o for o in out if isinstance(o, torch.Tensor)]
                inputs = [a for a in args if isinstance(a, torch.Tensor)] + self.attrs
                handle, why = _C._end_capture(inputs, tensors)
                if handle is not None:
                    stats["captured"] += 1
                    template = [(isinstance(o, torch.Tensor), None if isinstance(o, torch.Tensor) else o) for o in out]
                    self.last = _Capture(handle, template, [a for a in args if not isinstance(a, torch.Tensor)])
                    self.captures.append(self.last)
                elif why == _NO_OP:
                    self.views_only = True  # metadata only: later calls skip the capture machinery
                    stats["not_captured"][why] = stats["not_captured"].get(why, 0) + 1
                else:
                    self.failures += 1
                    if self.failures == 2:
                        stats["not_captured"][why] = stats["not_captured"].get(why, 0) + 1
                        logger.debug("tpu backend: %s runs its ops on every call: %s", self.label, why)
            else:
                _C._mark_step(self.why)  # the graph's live results, as one program
            return out
        finally:
            _C._set_compiled_graph_run(prev_graph_run)  # a graph run inside another keeps the outer's
            if self.constant_numbers:
                _C._set_bake_numbers(False)
            if prev != _FUSED:
                _C._set_eager_mode(prev)


# In-place ops that change a tensor's metadata (sizes, strides, storage,
# autograd flags) rather than its values: a capture replays values only, so
# a graph with one goes through AOTAutograd, which re-applies them.
_METADATA_MUTATIONS = frozenset({
    "resize_", "resize_as_", "set_", "as_strided_", "t_", "transpose_", "squeeze_", "unsqueeze_", "swapdims_",
    "swapaxes_", "detach_", "requires_grad_", "share_memory_", "_set_data", "set_data"})


def _bucket_boundaries(value) -> tuple:
    """options={"buckets": (64, 96, 128)}: the padded sizes of dynamic
    dimensions, before the powers of two that cover larger sizes."""
    try:
        out = tuple(sorted(int(b) for b in value))
    except (TypeError, ValueError):
        out = None
    if out is None or any(b <= 0 for b in out) or any(int(b) != b for b in value):
        raise ValueError(f"torch.compile backend 'tpu': options['buckets'] must be positive ints, got {value!r}")
    return out


def _masked_buckets() -> bool:
    return os.environ.get("TORCH_TPU_MASKED_BUCKETS", "1") != "0"


def _force_aot() -> bool:
    return os.environ.get("TORCH_TPU_COMPILE_AOT", "0") == "1"


def _aot_free_attrs(gm) -> tuple | None:
    """The tensors a dynamo graph reads through get_attr, when the graph can
    skip AOTAutograd, else None. It can when no result needs autograd (no
    output requires grad: a traced training step's forward+backward, an
    optimizer step, inference), every input is a plain tensor of static
    shape, and no op mutates a tensor's metadata. The graph then runs as
    dynamo captured it, through the same kernels as eager, under the fused
    driver, and that run is captured as one program like an ATen graph's:
    in-place updates of inputs and outputs that alias inputs are tracked by
    storage. AOTAutograd's tracing with fake tensors and functionalisation
    costs about a third of a compiled step's first call."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    attrs = []
    for node in gm.graph.nodes:
        if node.op == "placeholder":
            v = _node_val(node)
            if type(v) is not FakeTensor or not all(isinstance(d, int) for d in v.shape):
                return None  # a SymInt, a tensor subclass, a dynamic size: AOTAutograd's job
        elif node.op == "get_attr":
            t = gm
            for part in node.target.split("."):
                t = getattr(t, part, None)
            if isinstance(t, torch.Tensor):
                if type(t) not in (torch.Tensor, torch.nn.Parameter):
                    return None
                attrs.append(t)
        elif node.op in ("call_method", "call_function"):
            name = node.target if isinstance(node.target, str) else getattr(node.target, "__name__", "")
            if name in _METADATA_MUTATIONS:
                return None
        elif node.op == "call_module":
            return None
        elif node.op == "output":
            for v in torch.utils._pytree.tree_leaves([_node_val(a) if isinstance(a, torch.fx.Node) else a
                                                      for a in torch.utils._pytree.tree_leaves(node.args)]):
                if isinstance(v, torch.Tensor):
                    if type(v) is not FakeTensor or v.requires_grad:
                        return None
                elif v is not None and not isinstance(v, (bool, int, float)):
                    return None  # a SymInt among others
    # One tensor read by two get_attr nodes is one input.
    return tuple({id(t): t for t in attrs}.values())


def _views_as_reshapes(gm) -> None:
    """AOTAutograd emits ``view`` where its fake tensors' strides allow one,
    and those strides are the CPU kernels' (an elementwise op keeps a
    permuted input's layout). tpu kernels write contiguous results, so such
    a view can be impossible on the real tensor ("view size is not
    compatible", seen in Hugging Face attention under dynamic shapes). An
    AOT graph is functional, so a view that no op writes through becomes a
    reshape: a view where the real strides allow it, else a copy, with the
    same values."""
    import torch

    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default

    def writes(user) -> bool:
        schema = getattr(user.target, "_schema", None)
        return schema is None or any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments)

    changed = False
    for node in gm.graph.nodes:
        if node.op == "call_function" and node.target is view and not any(writes(u) for u in node.users
                                                                             if u.op == "call_function"):
            node.target = reshape
            changed = True
    if changed:
        gm.recompile()


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
    boundaries = _bucket_boundaries(opts.get("buckets", ()))
    name = opts.get("name") or "graph"
    counter = [0]
    # debug_callback is documented to see ATen graphs: those come from AOTAutograd.
    attrs = None if callback is not None or _force_aot() else _aot_free_attrs(gm)
    if attrs is not None and _replayable(gm, _host_inputs(gm)):
        stats["without_aot"] += 1
        runner = _GraphRunner(gm, f"{name}_graph_{stats['without_aot']}", "graph", attrs)
        logger.debug("tpu backend: %s runs without AOTAutograd", runner.label)
        return runner

    def compiler(kind: str):
        def compile_graph(aten_gm, inputs):
            counter[0] += 1
            _views_as_reshapes(aten_gm)
            label = f"{name}_{kind}_{counter[0]}"
            logger.debug("tpu backend: %s has %d nodes", label, len(aten_gm.graph.nodes))
            if callback is not None:
                callback(aten_gm)
            runner = _GraphRunner(aten_gm, label, kind)
            bucket_plan = _buckets.plan(aten_gm) if runner.capturable else None
            if bucket_plan is not None:
                stats["bucketed"] += 1
                logger.debug("tpu backend: %s pads its dynamic sizes to powers of two", label)
                return make_boxed_func(_buckets.Bucketed(runner, bucket_plan, boundaries))
            masked = _masked.plan(aten_gm) if runner.capturable and _masked_buckets() else None
            if masked is not None:
                stats["masked"] += 1
                logger.debug("tpu backend: %s runs at bucket sizes with masks", label)
                return make_boxed_func(_masked.Masked(_GraphRunner(masked.gm, label, kind), masked, runner,
                                                         boundaries))
            return make_boxed_func(runner)

        return compile_graph

    # keep_inference_input_mutations: a no-grad graph (an optimizer step)
    # writes its mutated inputs inside the graph, so the updates are part of
    # the one program instead of copies run afterwards.
    backend = aot_autograd(fw_compiler=compiler("forward"), bw_compiler=compiler("backward"),
                           keep_inference_input_mutations=True)
    return backend(gm, example_inputs)
