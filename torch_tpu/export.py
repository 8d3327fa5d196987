"""torch_tpu.export: a ``torch.export`` program as a StableHLO module.

    ep = torch.export.export(model, (x,))
    m = torch_tpu.export.to_stablehlo(ep)
    m.text                  # the module: func.func public @main(weights..., inputs...)
    m.weights               # the weights @main takes first, by name (CPU tensors)
    m.bytecode()            # StableHLO portable artifact (needs JAX's MLIR)
    m(x)                    # runs on tpu (strict, fused or compiled, like any op)
    m.jax_exported()        # a jax.export.Exported: serve it with JAX

The program's ATen graph runs once on placeholder tpu tensors while the
region driver records it (torch_tpu/_control_flow.py has the same
mechanism for loop bodies), so the module holds exactly the lowerings the
device runs: whatever runs on tpu exports.
"""
from __future__ import annotations

import dataclasses
import hashlib

import torch

from torch_tpu import _C

__all__ = ["StableHLOModule", "to_stablehlo"]


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One argument or result of @main."""

    kind: str  # "parameter", "buffer", "constant", "input"; for results "output" or "buffer_mutation"
    name: str  # the weight's name, the input's name in the exported signature, or the result's
    shape: tuple
    dtype: torch.dtype


@dataclasses.dataclass(frozen=True)
class StableHLOModule:
    text: str
    weights: dict  # name -> CPU tensor, in @main's argument order
    inputs: tuple  # TensorSpec per argument of @main: the weights, then the user inputs
    outputs: tuple  # TensorSpec per result

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

        user = self.inputs[len(self.weights):]
        if len(inputs) != len(user):
            raise TypeError(f"the exported module takes {len(user)} inputs, got {len(inputs)}")
        for i, (t, spec) in enumerate(zip(inputs, user)):
            if tuple(t.shape) != spec.shape or t.dtype != spec.dtype:
                raise ValueError(f"input {i} ({spec.name}): expected {spec.shape} {spec.dtype}, got "
                                 f"{tuple(t.shape)} {t.dtype}")
        device = next((t.device for t in inputs if t.device.type == "tpu"), torch.device("tpu"))
        if self._state.get("device") != device:
            self._state["device"] = device
            self._state["weights"] = [w.to(device) for w in self.weights.values()]
        if "symbol" not in self._state:
            digest = hashlib.sha1(self.text.encode()).hexdigest()[:16]
            symbol, body = _inlinable(self.text, f"export_{digest}")
            _C._jax_register(symbol, body)
            self._state["symbol"] = symbol
        outs = _C._jax_call(self._state["symbol"], [*self._state["weights"], *(t.to(device) for t in inputs)],
                            [list(s.shape) for s in self.outputs], [s.dtype for s in self.outputs])
        return outs[0] if len(outs) == 1 else tuple(outs)

    @property
    def _state(self) -> dict:  # per-object cache of the tpu weights and the registered symbol
        st = self.__dict__.get("_cache")
        if st is None:
            st = {}
            object.__setattr__(self, "_cache", st)
        return st


_KINDS = {"PARAMETER": "parameter", "BUFFER": "buffer", "CONSTANT_TENSOR": "constant", "USER_INPUT": "input"}


def _static_shape(val, what: str) -> tuple:
    shape = tuple(val.shape)
    if not all(isinstance(d, int) for d in shape):
        raise NotImplementedError(f"torch_tpu.export: {what} has dynamic dimensions {shape}; export with static "
                                  "shapes (dynamic dimensions are not exported yet)")
    return shape


def to_stablehlo(exported_program) -> StableHLOModule:
    """The StableHLO module of ``torch.export.export(...)``'s result, with its
    weights and signature. @main takes the weights (parameters, buffers,
    constant tensors, in the exported signature's order), then the user
    inputs, and returns the user outputs after any buffer mutations."""
    import torch_tpu  # noqa: F401 - the tpu device

    ep = exported_program.run_decompositions({})
    gm = ep.graph_module
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    specs = ep.graph_signature.input_specs
    if len(specs) != len(placeholders):
        raise RuntimeError("torch_tpu.export: the exported graph's inputs do not match its signature")
    weights, arg_specs = {}, []
    for spec, node in zip(specs, placeholders):
        kind = _KINDS.get(spec.kind.name)
        if kind is None:
            raise NotImplementedError(f"torch_tpu.export: inputs of kind {spec.kind.name} are not supported")
        val = node.meta.get("val")
        if not isinstance(val, torch.Tensor):
            raise NotImplementedError(f"torch_tpu.export: input {node.name} is not a tensor ({type(val).__name__})")
        if kind == "input":
            arg_specs.append(TensorSpec(kind, node.name, _static_shape(val, f"input {node.name}"), val.dtype))
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

    def run(*params):
        with torch.no_grad():
            return gm(*params)

    region, out_meta = _record(run, [(s.shape, s.dtype, "tpu") for s in arg_specs])
    text = region.text()
    out_specs = ep.graph_signature.output_specs
    outputs = tuple(TensorSpec("buffer_mutation" if s.kind.name == "BUFFER_MUTATION" else "output",
                               str(s.target if s.kind.name == "BUFFER_MUTATION" else s.arg.name),
                               shape, dtype) for s, (shape, dtype) in zip(out_specs, out_meta))
    return StableHLOModule(text=text, weights=weights, inputs=tuple(arg_specs), outputs=outputs)



def _retarget_devices(gm) -> None:
    """Ops of the (decomposed, so our own) graph that make tensors on the
    device it was exported on (arange(..., device="cpu")) make them on tpu."""
    for node in gm.graph.nodes:
        dev = node.kwargs.get("device") if node.op == "call_function" else None
        if dev is not None and torch.device(dev).type != "tpu":
            node.update_kwarg("device", torch.device("tpu"))
    gm.recompile()
