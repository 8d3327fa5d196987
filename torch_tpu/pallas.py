"""Functions written in JAX or Pallas, as ops on tpu tensors.

    @torch_tpu.pallas.custom_jax_kernel
    def rms_norm(x, w):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w

    y = rms_norm(x, w)          # x, w: tpu tensors; y: a tpu tensor

JAX lowers the function to StableHLO for the inputs' shapes and dtypes
(once per signature); that module is inlined into tpu's programs with
``func.call``, so the kernel runs in strict eager, fuses with the ops
around it in fused eager, and is part of a ``torch.compile(backend="tpu")``
graph's one program (dynamo sees an opaque op, ``torch_tpu::jax_kernel``).
Pallas kernels are JAX functions too: where the plugin compiles them
natively (TPU, GPU) they run as they are; on XLA:CPU, write them with
``interpret=True``.

The gradient is ``jax.vjp`` of the same function, or ``backward``, a JAX
function of the inputs and the output cotangents that returns one gradient
per tensor input (needed for kernels JAX cannot differentiate, such as
``pallas_call``). JAX is optional: without it, calling these raises an
ImportError that says what to install. 64-bit dtypes need JAX's x64 mode
(``jax.config.update("jax_enable_x64", True)``).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import re
import threading
from typing import Any, Callable

import torch

from torch_tpu import _C

_lock = threading.Lock()
_kernels: dict[str, "_Kernel"] = {}  # name -> kernel (the op's first argument)


def _jax():
    try:
        import jax
        import jax.numpy  # noqa: F401
    except ImportError as e:
        raise ImportError("torch_tpu.pallas needs JAX: pip install jax jaxlib (on TPU: pip install 'jax[tpu]')") from e
    return jax


def _jax_dtype(dtype: torch.dtype):
    jax = _jax()
    jnp = jax.numpy
    table = {torch.float32: jnp.float32, torch.bfloat16: jnp.bfloat16, torch.float16: jnp.float16,
             torch.float64: jnp.float64, torch.int64: jnp.int64, torch.int32: jnp.int32, torch.int16: jnp.int16,
             torch.int8: jnp.int8, torch.uint8: jnp.uint8, torch.bool: jnp.bool_, torch.complex64: jnp.complex64}
    if dtype not in table:
        raise TypeError(f"custom_jax_kernel: no JAX dtype for {dtype}")
    if dtype in (torch.float64, torch.int64) and not jax.config.jax_enable_x64:
        raise TypeError(f"custom_jax_kernel: a {dtype} input needs JAX's 64-bit mode "
                        "(jax.config.update('jax_enable_x64', True)), or convert it to a 32-bit dtype first")
    return table[dtype]


def _torch_dtype(dtype) -> torch.dtype:
    import numpy as np

    name = np.dtype(dtype).name
    table = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16,
             "float64": torch.float64, "int64": torch.int64, "int32": torch.int32, "int16": torch.int16,
             "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool, "complex64": torch.complex64}
    if name not in table:
        raise TypeError(f"custom_jax_kernel: the function returns a {name} array, which torch has no dtype for")
    return table[name]


_FUNC = re.compile(r"func\.func\s+(?:public\s+|private\s+)?@([\w$.\-]+)")


def _inlinable(text: str, prefix: str) -> tuple[str, str]:
    """(entry symbol, func.func definitions) of a JAX-lowered module: the
    module's body with every function renamed under `prefix` and made
    private, so that several kernels share one program's module."""
    # The header's attributes are in braces too: the body starts after the
    # first brace that ends a line, and ends at the module's closing brace.
    start, end = text.index("{\n", text.index("module")), text.rindex("}")
    body = text[start + 1:end]
    names = _FUNC.findall(body)
    if "main" not in names:
        raise RuntimeError("custom_jax_kernel: JAX's module has no @main function")
    for name in sorted(names, key=len, reverse=True):
        body = re.sub(r"@" + re.escape(name) + r"(?![\w$.\-])", f"@{prefix}_{name}", body)
    body = re.sub(r"func\.func\s+public\s+@", "func.func private @", body)
    return f"{prefix}_main", body


class _Kernel:
    """One JAX function (with its static arguments bound per call) and its
    lowered forms, one per input signature."""

    def __init__(self, fn: Callable, static_argnums: tuple, backward: Callable | None, name: str):
        self.fn, self.static_argnums, self.backward, self.name = fn, static_argnums, backward, name
        self.lowered: dict = {}  # (statics key, signature) -> (symbol, [(sizes, dtype)])
        self.single = True  # fn returns one array (else a tuple or list of them)

    def bound(self, statics: tuple) -> Callable:
        """fn of the tensor arguments alone, statics in their places."""
        positions = self.static_argnums

        def call(*arrays):
            args, it, st = [], iter(arrays), iter(statics)
            for i in range(len(arrays) + len(statics)):
                args.append(next(st) if i in positions else next(it))
            return self.fn(*args)
        return call

    def lower(self, statics_key: str, inputs) -> tuple:
        sig = tuple((tuple(t.shape), t.dtype) for t in inputs)
        key = (statics_key, sig)
        hit = self.lowered.get(key)
        if hit is not None:
            return hit
        jax = _jax()
        avals = [jax.ShapeDtypeStruct(shape, _jax_dtype(dtype)) for shape, dtype in sig]
        fn = self.bound(ast.literal_eval(statics_key))
        # keep_unused: the module takes every input, as the call passes them.
        lowered = jax.jit(fn, keep_unused=True).lower(*avals)
        text = lowered.as_text()
        digest = hashlib.sha1(text.encode()).hexdigest()[:16]
        symbol, body = _inlinable(text, f"jaxk_{digest}")
        _C._jax_register(symbol, body)
        info = lowered.out_info
        self.single = not isinstance(info, (tuple, list))
        leaves = [info] if self.single else list(info)
        if not all(hasattr(a, "shape") and hasattr(a, "dtype") for a in leaves):
            raise TypeError("custom_jax_kernel: the function must return an array, or a tuple or list of arrays")
        outs = [(tuple(a.shape), _torch_dtype(a.dtype)) for a in leaves]
        hit = self.lowered[key] = (symbol, outs)
        return hit


def _vjp_kernel(k: _Kernel) -> _Kernel:
    """The kernel that maps (*inputs, *output cotangents) to one gradient per
    input: k's backward, or jax.vjp of k's function. Its static arguments
    are k's statics key and the number of outputs."""
    name = k.name + ".vjp"
    with _lock:
        kernel = _kernels.get(name)
        if kernel is not None:
            return kernel

    def vjp(statics_key, n_out, *arrays):
        jax = _jax()
        primals, cts = arrays[:len(arrays) - n_out], arrays[len(arrays) - n_out:]
        if k.backward is not None:
            return tuple(k.backward(*primals, *cts))
        out, pullback = jax.vjp(k.bound(ast.literal_eval(statics_key)), *primals)
        return tuple(pullback(out.__class__(cts) if isinstance(out, (tuple, list)) else cts[0]))

    kernel = _Kernel(vjp, (0, 1), None, name)
    with _lock:
        return _kernels.setdefault(name, kernel)


# --- the op ---------------------------------------------------------------------

@torch.library.custom_op("torch_tpu::jax_kernel", mutates_args=())
def _jax_kernel_op(kernel: str, statics: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    k = _kernels[kernel]
    symbol, outs = k.lower(statics, inputs)
    for t in inputs:
        if t.device.type != "tpu":
            raise RuntimeError(f"custom_jax_kernel: expected every tensor on tpu, got one on {t.device}")
    return _C._jax_call(symbol, list(inputs), [list(s) for s, _ in outs], [d for _, d in outs])


@_jax_kernel_op.register_fake
def _(kernel: str, statics: str, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
    _, outs = _kernels[kernel].lower(statics, inputs)
    device = inputs[0].device if inputs else torch.device("tpu")
    return [torch.empty(s, dtype=d, device=device) for s, d in outs]


def _setup_context(ctx, inputs, output):
    kernel, statics, tensors = inputs
    ctx.kernel, ctx.statics = kernel, statics
    ctx.save_for_backward(*tensors)
    ctx.out_meta = [(o.shape, o.dtype) for o in output]


def _backward(ctx, grads):
    tensors = ctx.saved_tensors
    k = _kernels[ctx.kernel]
    vjp = _vjp_kernel(k)
    # Outputs that took no gradient get zeros, as jax.vjp expects a full tree.
    cts = [g if g is not None else torch.zeros(s, dtype=d, device=tensors[0].device)
           for g, (s, d) in zip(grads, ctx.out_meta)]
    out = _jax_kernel_op(vjp.name, repr((ctx.statics, len(cts))), [*tensors, *cts])
    grads_in = [g if t.is_floating_point() or t.is_complex() else None for g, t in zip(out, tensors)]
    return None, None, grads_in


_jax_kernel_op.register_autograd(_backward, setup_context=_setup_context)


# --- the API ----------------------------------------------------------------------

@torch.compiler.assume_constant_result
def _statics_key(statics: tuple) -> str:
    """The static arguments as the op's string argument: their repr, read
    back with ast.literal_eval (numbers, strings, bools, None, tuples)."""
    key = repr(statics)
    try:
        if ast.literal_eval(key) != statics:
            raise ValueError
    except (ValueError, SyntaxError):
        raise TypeError(f"custom_jax_kernel: static arguments must be Python literals (numbers, strings, bools, "
                        f"None, tuples of them), got {statics!r}") from None
    return key


def custom_jax_kernel(fn: Callable | None = None, *, static_argnums: int | tuple = (),
                      backward: Callable | None = None, name: str | None = None):
    """Makes the JAX (or Pallas) function `fn` an op on tpu tensors.

    Tensor arguments become JAX arrays of the same shape and dtype; the
    arguments at `static_argnums` are passed through as Python values
    (hashable; each distinct value lowers once). Returns what `fn` returns,
    with arrays as tpu tensors. Usable as a decorator, with or without
    arguments."""
    if fn is None:
        return functools.partial(custom_jax_kernel, static_argnums=static_argnums, backward=backward, name=name)
    statics_at = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    with _lock:
        base = name or getattr(fn, "__qualname__", "kernel")
        kname = f"{base}#{len(_kernels)}"
        kernel = _kernels[kname] = _Kernel(fn, statics_at, backward, kname)

    @functools.wraps(fn)
    def call(*args):
        statics = tuple(a for i, a in enumerate(args) if i in statics_at)
        tensors = [a for i, a in enumerate(args) if i not in statics_at]
        for t in tensors:
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"custom_jax_kernel: argument of type {type(t).__name__} is not a tensor; "
                                "pass Python values through static_argnums")
        outs = _jax_kernel_op(kernel.name, _statics_key(statics), tensors)
        return outs[0] if kernel.single else tuple(outs)

    call.kernel = kernel
    return call


def jax_kernel(fn: Callable | None = None, **kwargs: Any):
    """The plain-JAX spelling of :func:`custom_jax_kernel` (the same thing)."""
    return custom_jax_kernel(fn, **kwargs)
