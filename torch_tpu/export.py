"""torch_tpu.export: a ``torch.export`` program as a StableHLO module.

    ep = torch.export.export(model, (x,))
    m = torch_tpu.export.to_stablehlo(ep)
    m.text                  # the module: func.func public @main(weights..., inputs...)
    m.weights               # the weights @main takes first, by name (CPU tensors)
    m.bytecode()            # StableHLO portable artifact (needs JAX's MLIR)
    m(x)                    # runs on tpu (strict, fused or compiled, like any op)
    m.jax_exported()        # a jax.export.Exported: serve it with JAX

    seq = torch.export.Dim("seq", max=512)            # a dynamic dimension needs a bound
    m = torch_tpu.export.to_stablehlo(torch.export.export(model, (ids,), dynamic_shapes=({1: seq},)))
    m(ids[:, :37])          # any length up to 512: one module
    m.dynamic               # how @main pads: DynamicDim per dynamic size
    m.pad(ids[:, :37])      # @main's padded inputs and real sizes, for a server

The program's ATen graph runs once on placeholder tpu tensors while the
region driver records it (torch_tpu/_control_flow.py has the same
mechanism for loop bodies), so the module holds exactly the lowerings the
device runs: whatever runs on tpu exports.

Dynamic dimensions are bounded: @main takes each dynamic dimension at its
bound (``Dim(max=...)``), padded, followed by one 0-d int64 input per
dynamic size holding its real value, and returns its results at the bound.
The graph is made exact at the padded size by the masks that
``torch.compile``'s buckets use (torch_tpu/_masked.py): every reduction,
softmax, contraction and attention over a padded dimension ignores the
padding, so the first ``real`` entries of each result are the unpadded
graph's. ``m(...)`` pads, passes the sizes and slices for you; a server
calling the module directly does the same (docs/control_flow.md).
"""
from __future__ import annotations

import dataclasses
import hashlib

import torch

from torch_tpu import _C, _masked

__all__ = ["DynamicDim", "StableHLOModule", "to_stablehlo"]


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One argument or result of @main."""

    kind: str  # "parameter", "buffer", "constant", "input"; for results "output" or "buffer_mutation"
    name: str  # the weight's name, the input's name in the exported signature, or the result's
    shape: tuple
    dtype: torch.dtype


@dataclasses.dataclass(frozen=True)
class DynamicDim:
    """A dynamic size of the exported program, as @main carries it."""

    name: str  # the size's symbol in the exported program ("s0")
    bound: int  # @main's inputs hold it padded to this (its Dim's max)
    length_input: int  # the index among @main's arguments of the 0-d int64 that holds its real value
    inputs: tuple  # (argument index, dim, c): that dimension of the argument is `size + c`
    outputs: tuple  # (result index, dim, c): the result's real extent along dim is `size + c`


@dataclasses.dataclass(frozen=True)
class StableHLOModule:
    text: str
    weights: dict  # name -> CPU tensor, in @main's argument order
    inputs: tuple  # TensorSpec per argument of @main: the weights, the user inputs, then one length per DynamicDim
    outputs: tuple  # TensorSpec per result
    dynamic: tuple = ()  # DynamicDim per dynamic size; shapes in `inputs`/`outputs` are at the bounds

    def bytecode(self) -> bytes:
        """The module as a StableHLO portable artifact (MLIR bytecode in
        StableHLO's versioned form), loadable by any StableHLO consumer
        within its compatibility window."""
        from jax._src.interpreters import mlir
        from jax._src.lib import _jax
        from jax._src.lib.mlir import ir
        from jax._src.lib.mlir.dialects import hlo

        with mlir.make_ir_context():
            module = ir.Module.parse(self.text)
            target = hlo.get_version_from_compatibility_requirement(hlo.StablehloCompatibilityRequirement.WEEK_4)
            return _jax.mlir.serialize_portable_artifact(module, target, False)

    def jax_exported(self):
        """A ``jax.export.Exported`` of @main for one CPU device: ``.call(*weights, *inputs)``
        runs it, ``.serialize()`` gives bytes for ``jax.export.deserialize``
        (which needs the ``flatbuffers`` package). Its arguments carry no
        sharding (None: unspecified)."""
        import jax
        import jax.numpy as jnp
        from jax import export

        def aval(spec: TensorSpec):
            return jax.core.ShapedArray(spec.shape, jnp.dtype(str(spec.dtype).removeprefix("torch.")))

        n_in, n_out = len(self.inputs), len(self.outputs)
        return export.Exported(
            fun_name="main", in_tree=jax.tree_util.tree_structure(((0,) * n_in, {})),
            in_avals=tuple(aval(s) for s in self.inputs), out_tree=jax.tree_util.tree_structure((0,) * n_out),
            out_avals=tuple(aval(s) for s in self.outputs), _has_named_shardings=True,
            _in_named_shardings=(None,) * n_in, _out_named_shardings=(None,) * n_out,
            in_shardings_hlo=(None,) * n_in, out_shardings_hlo=(None,) * n_out, nr_devices=1,
            platforms=("cpu",), ordered_effects=(), unordered_effects=(), disabled_safety_checks=(),
            mlir_module_serialized=self.bytecode(), calling_convention_version=9,
            module_kept_var_idx=tuple(range(n_in)), uses_global_constants=False, _get_vjp=None)

    def __call__(self, *inputs: torch.Tensor):
        """Runs the module on tpu with its own weights: the results, one
        tensor per output (a tuple when there are several)."""
        from torch_tpu.pallas import _inlinable

        n_w = len(self.weights)
        user = self.inputs[n_w:len(self.inputs) - len(self.dynamic)]
        if len(inputs) != len(user):
            raise TypeError(f"the exported module takes {len(user)} inputs, got {len(inputs)}")
        device = next((t.device for t in inputs if t.device.type == "tpu"), torch.device("tpu"))
        inputs, real = self.pad(*inputs)
        lengths = [torch.tensor(n, dtype=torch.int64, device=device) for n in real]
        for i, (t, spec) in enumerate(zip(inputs, user)):
            if tuple(t.shape) != spec.shape or t.dtype != spec.dtype:
                raise ValueError(f"input {i} ({spec.name}): expected {spec.shape} {spec.dtype}, got "
                                 f"{tuple(t.shape)} {t.dtype}")
        if self._state.get("device") != device:
            self._state["device"] = device
            self._state["weights"] = [w.to(device) for w in self.weights.values()]
        if "symbol" not in self._state:
            digest = hashlib.sha1(self.text.encode()).hexdigest()[:16]
            symbol, body = _inlinable(self.text, f"export_{digest}")
            _C._jax_register(symbol, body)
            self._state["symbol"] = symbol
        outs = _C._jax_call(self._state["symbol"],
                            [*self._state["weights"], *(t.to(device) for t in inputs), *lengths],
                            [list(s.shape) for s in self.outputs], [s.dtype for s in self.outputs])
        for dim, n in zip(self.dynamic, real):
            for k, d, c in dim.outputs:
                outs[k] = outs[k].narrow(d, 0, n + c)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def pad(self, *inputs: torch.Tensor) -> tuple:
        """@main's user inputs for `inputs` (each dynamic dimension padded to
        its bound with zeros) and the real value of each dynamic size, in
        `dynamic`'s order: what a server passes after the weights. A size is
        read from the first input that has it."""
        inputs = list(inputs)
        n_w, real = len(self.weights), []
        for dim in self.dynamic:
            i, d, c = dim.inputs[0]
            t = inputs[i - n_w]
            if t.dim() <= d:
                raise ValueError(f"input {i - n_w}: expected a dimension {d}, got shape {tuple(t.shape)}")
            if not c <= t.shape[d] <= dim.bound + c:
                raise ValueError(f"input {i - n_w}: dimension {d} has size {t.shape[d]}, outside the exported "
                                 f"range up to {dim.bound + c} (torch.export.Dim(max=...))")
            real.append(t.shape[d] - c)
        for dim, n in zip(self.dynamic, real):
            for i, d, c in dim.inputs:
                t = inputs[i - n_w]
                if t.dim() <= d or t.shape[d] != n + c:
                    raise ValueError(f"input {i - n_w}: shape {tuple(t.shape)}, but the exported program ties "
                                     f"dimension {d} to size {n + c} of another input")
                pad = [0] * (2 * t.dim())
                pad[2 * (t.dim() - 1 - d) + 1] = dim.bound - n
                inputs[i - n_w] = _masked._pad(t, pad)  # small tpu tensors through the host: no program per size
        return inputs, real

    @property
    def _state(self) -> dict:  # per-object cache of the tpu weights and the registered symbol
        st = self.__dict__.get("_cache")
        if st is None:
            st = {}
            object.__setattr__(self, "_cache", st)
        return st


_KINDS = {"PARAMETER": "parameter", "BUFFER": "buffer", "CONSTANT_TENSOR": "constant", "USER_INPUT": "input"}


def _bounded_shape(val, bounds: dict) -> tuple:
    """The shape of `val` with each dynamic size at its bound."""
    from torch_tpu._masked_layout import _affine, _size

    shape = []
    for d in val.shape:
        e = _size(d)
        if e.is_Integer:
            shape.append(int(e))
            continue
        sym, c = _affine(e)
        shape.append(bounds[sym] + c)
    return tuple(shape)


def _bounds(ep, gm) -> dict:
    """symbol -> the bound of the size, for every dynamic size of the user
    inputs (from the exported program's range constraints)."""
    from torch_tpu._masked_layout import _affine, _size

    found = {}
    for n in gm.graph.nodes:
        v = n.meta.get("val") if n.op == "placeholder" else None
        if not isinstance(v, torch.Tensor):
            continue
        for d in v.shape:
            e = _size(d)
            if e.is_Integer:
                continue
            try:
                sym, _ = _affine(e)
            except Exception:  # noqa: BLE001 - a size that is not `symbol + c`
                raise NotImplementedError(f"torch_tpu.export: input {n.name} has a dynamic size {e} that is not "
                                          "one size plus a constant") from None
            upper = next((r.upper for k, r in ep.range_constraints.items() if str(k) == str(sym)), None)
            try:
                found[sym] = int(upper)
            except Exception:  # noqa: BLE001 - sympy's infinity raises OverflowError or AttributeError
                raise ValueError(f"torch_tpu.export: the dynamic size {sym} of input {n.name} has no upper bound; "
                                 "give its torch.export.Dim a max (Dim('seq', max=512)): @main takes it padded to "
                                 "that bound") from None
    return found


def to_stablehlo(exported_program) -> StableHLOModule:
    """The StableHLO module of ``torch.export.export(...)``'s result, with its
    weights and signature. @main takes the weights (parameters, buffers,
    constant tensors, in the exported signature's order), then the user
    inputs, and returns the user outputs after any buffer mutations."""
    import torch_tpu  # noqa: F401 - the tpu device

    # Dynamic sizes need the graph in core ATen (linear as a matmul), which
    # the masks' analysis knows; static graphs keep the composite ops whose
    # lowerings are faster (linear, attention).
    dynamic = any(isinstance(d, torch.SymInt) for n in exported_program.graph.nodes if n.op == "placeholder"
                  and isinstance(n.meta.get("val"), torch.Tensor) for d in n.meta["val"].shape)
    ep = exported_program.run_decompositions() if dynamic else exported_program.run_decompositions({})
    gm = ep.graph_module
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    specs = ep.graph_signature.input_specs
    if len(specs) != len(placeholders):
        raise RuntimeError("torch_tpu.export: the exported graph's inputs do not match its signature")
    bounds = _bounds(ep, gm)
    weights, arg_specs = {}, []
    for spec, node in zip(specs, placeholders):
        kind = _KINDS.get(spec.kind.name)
        if kind is None:
            raise NotImplementedError(f"torch_tpu.export: inputs of kind {spec.kind.name} are not supported")
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise NotImplementedError(f"torch_tpu.export: input {node.name} is not a tensor ({type(val).__name__})")
        if kind == "input":
            arg_specs.append(TensorSpec(kind, node.name, _bounded_shape(val, bounds), val.dtype))
            continue
        if arg_specs and arg_specs[-1].kind == "input":  # torch.export lifts weights ahead of the inputs
            raise NotImplementedError("torch_tpu.export: the program takes a weight after a user input")
        # Non-persistent buffers (a rotary embedding's inv_freq) are among the constants.
        src = ep.state_dict.get(spec.target)
        w = (src if src is not None else ep.constants[spec.target]).detach().cpu()
        weights[spec.target] = w
        arg_specs.append(TensorSpec(kind, spec.target, tuple(w.shape), w.dtype))
    _retarget_devices(gm)
    from torch_tpu._control_flow import _record

    dynamic, graph = (), gm
    if bounds:
        graph, dynamic = _masked_at_bounds(gm, bounds, len(arg_specs))
        arg_specs += [TensorSpec("length", f"real_{d.name}", (), torch.int64) for d in dynamic]

    def run(*params):
        with torch.no_grad():
            return graph(*params)

    region, out_meta = _record(run, [(s.shape, s.dtype, "tpu") for s in arg_specs])
    text = region.text()
    out_specs = ep.graph_signature.output_specs
    outputs = tuple(TensorSpec("buffer_mutation" if s.kind.name == "BUFFER_MUTATION" else "output",
                               str(s.target if s.kind.name == "BUFFER_MUTATION" else s.arg.name),
                               shape, dtype) for s, (shape, dtype) in zip(out_specs, out_meta))
    return StableHLOModule(text=text, weights=weights, inputs=tuple(arg_specs), outputs=outputs, dynamic=dynamic)


def _masked_at_bounds(gm, bounds: dict, n_args: int) -> tuple:
    """The graph made exact at padded sizes (its masks read the real sizes
    from inputs after the program's own), and a DynamicDim per size."""
    # torch.export's runtime checks of sizes and metadata compute nothing,
    # and a padded size would fail them.
    asserts = {torch.ops.aten._assert_tensor_metadata.default, torch.ops.aten._assert_scalar.default,
               torch.ops.aten.sym_constrain_range_for_size.default, torch.ops.aten._assert_async.msg}
    for n in list(gm.graph.nodes):
        if n.op == "call_function" and n.target in asserts and not n.users:
            gm.graph.erase_node(n)
    gm.recompile()
    why: list = []
    plan = _masked.plan(gm, why)
    if plan is None:
        raise NotImplementedError(f"torch_tpu.export: the program's dynamic dimensions cannot be padded exactly "
                                  f"({why[0]}); export it with static shapes")
    if set(plan.symbols) != set(bounds):
        raise NotImplementedError(f"torch_tpu.export: dynamic sizes {sorted(map(str, plan.symbols))} are not all "
                                  f"sizes of the inputs {sorted(map(str, bounds))}")
    dynamic = []
    for j, sym in enumerate(plan.symbols):
        ins = tuple((i, d, c) for i, dims in sorted(plan.pads.items()) for d, s, c in dims if s == sym)
        outs = []
        for k, what in sorted(plan.outs.items()):
            if not isinstance(what, list):
                raise NotImplementedError("torch_tpu.export: the program returns a dynamic size as a number")
            outs += [(k, d, c) for d, s, c in what if s == sym]
        dynamic.append(DynamicDim(str(sym), bounds[sym], n_args + j, ins, tuple(outs)))
    return plan.gm, tuple(dynamic)



def _retarget_devices(gm) -> None:
    """Ops of the (decomposed, so our own) graph that make tensors on the
    device it was exported on (arange(..., device="cpu")) make them on tpu."""
    for node in gm.graph.nodes:
        dev = node.kwargs.get("device") if node.op == "call_function" else None
        if dev is not None and torch.device(dev).type != "tpu":
            node.update_kwarg("device", torch.device("tpu"))
    gm.recompile()
