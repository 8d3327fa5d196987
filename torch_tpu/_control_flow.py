"""torch.cond, torch._higher_order_ops.while_loop and scan on tpu tensors,
as loops of the program instead of unrolled ops.

Each higher-order op gets a PrivateUse1 kernel. The body (or branch) is
called once on placeholder tensors while the region driver records it
(csrc/eager/region_driver.cc); the recording becomes the region of one
stablehlo.while (csrc/ops/control/while_loop.cc), recorded like any op. So
the same kernel serves strict eager (one program for the loop), fused
eager and torch.compile graphs (the loop inside the graph's program), and
a trip count or a predicate is read on the device, never on the host.

- while_loop: one stablehlo.while; additional inputs ride along unchanged.
- scan: a while over an int64 counter; each step reads its slice of xs
  with a dynamic slice and writes its outputs into stacked buffers with a
  dynamic update slice.
  Backward (PyTorch's scan autograd) is a scan too, so it is a loop as well.
- map: a scan that carries nothing.
- cond: each branch is a while that runs once or not at all; only the
  branch taken does any work.
- associative_scan keeps PyTorch's own form, a tree of log2(n) combine
  steps, which is already small.

A body the recorder cannot hold (it reads a tensor that is not an input,
draws random numbers, reads a value on the host, returns a non-tensor)
falls back to PyTorch's own implementation, which runs the loop op by op;
the reason is logged at DEBUG on the "torch_tpu" logger and counted in
`stats`. TORCH_TPU_COMPILED_LOOPS=0 turns the loop kernels off.
"""
from __future__ import annotations

import logging
import os

import torch
from torch._C import DispatchKey

from torch_tpu import _C

logger = logging.getLogger("torch_tpu")

# "loops": how many loops were recorded as stablehlo.while (per kind);
# "fallbacks": reasons a body ran op by op instead.
stats: dict = {"loops": {"while_loop": 0, "scan": 0, "map": 0, "cond": 0}, "fallbacks": {}}


class _Unsupported(NotImplementedError):
    pass


def _enabled() -> bool:
    return os.environ.get("TORCH_TPU_COMPILED_LOOPS", "1") != "0"


def _on_tpu(values) -> bool:
    return all(isinstance(v, torch.Tensor) and v.device.type == "tpu" for v in values)


def _record(fn, args):
    """Records fn(*placeholders) as a region, placeholders shaped as `args`
    (tensors, or (shape, dtype, device) triples): returns the region and
    the (shape, dtype) of each tensor fn returned."""
    params = [torch.empty(a.shape, dtype=a.dtype, device=a.device) if isinstance(a, torch.Tensor)
              else torch.empty(a[0], dtype=a[1], device=a[2]) for a in args]
    _C._region_begin(params)
    try:
        out = fn(*params)
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if not all(isinstance(o, torch.Tensor) for o in outs):
            raise _Unsupported("the body returns a value that is not a tensor")
        region = _C._region_end(outs)
    except BaseException:
        _C._region_abort()
        raise
    return region, [(tuple(o.shape), o.dtype) for o in outs]


def _meta(ts) -> list:
    return [(tuple(t.shape), t.dtype) for t in ts]


def _fallback(kind: str, err: Exception) -> None:
    why = f"{kind}: {err}".splitlines()[0][:200]
    stats["fallbacks"][why] = stats["fallbacks"].get(why, 0) + 1
    logger.debug("torch_tpu: %s runs op by op: %s", kind, err)


def _loop(cond_fn, body_fn, carried: list, additional: list) -> list:
    """The final carried values of a stablehlo.while; both functions take
    (*carried, *additional)."""
    n = len(carried)
    args = [*carried, *additional]
    cond_r, cond_meta = _record(cond_fn, args)
    if cond_meta != [((), torch.bool)]:
        raise _Unsupported(f"the condition returns {cond_meta}, not one boolean scalar")

    def body_all(*a):
        out = body_fn(*a)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        return (*out, *a[n:])

    body_r, body_meta = _record(body_all, args)
    if body_meta[:n] != _meta(carried):
        raise _Unsupported("the body returns values of other shapes or dtypes than it carries")
    return _C._while_loop(cond_r, body_r, args)[:n]


# --- while_loop ----------------------------------------------------------------


def _while_loop_tpu(cond_fn, body_fn, carried_inputs, additional_inputs, stack_output=False,
                    mutated_arg_indices=""):
    from torch._higher_order_ops.while_loop import while_loop_dense

    carried, additional = list(carried_inputs), list(additional_inputs)
    if _enabled() and not stack_output and carried and _on_tpu(carried + additional):
        try:
            out = _loop(cond_fn, body_fn, carried, additional)
            stats["loops"]["while_loop"] += 1
            return tuple(out)
        except Exception as e:  # noqa: BLE001 - any body the recorder cannot hold runs op by op
            _fallback("while_loop", e)
    return while_loop_dense(cond_fn, body_fn, carried_inputs, additional_inputs, stack_output=stack_output,
                            mutated_arg_indices=mutated_arg_indices)


# --- scan -------------------------------------------------------------------------


def _scan_loop(combine_fn, init: list, xs: list, additional: list) -> tuple:
    n_steps = xs[0].shape[0]
    device = xs[0].device
    k, nx = len(init), len(xs)
    # One recording on the first slices gives the per-step outputs' shapes.
    _, meta = _record(combine_fn, [*init, *[x[0] for x in xs], *additional])
    if meta[:k] != _meta(init):
        raise _Unsupported("the combine function returns a carry of another shape or dtype")
    ys0 = [torch.empty((n_steps, *shape), dtype=dtype, device=device) for shape, dtype in meta[k:]]
    ny = len(ys0)
    counter = torch.zeros((), dtype=torch.int64, device=device)

    def cond(i, *rest):
        return i < n_steps

    def body(i, *rest):
        carry, ys = rest[:k], rest[k:k + ny]
        xs_, add = rest[k + ny:k + ny + nx], rest[k + ny + nx:]
        x_t = [_C._dynamic_index(x, i) for x in xs_]
        out = combine_fn(*carry, *x_t, *add)
        out = list(out) if isinstance(out, (tuple, list)) else [out]
        new_ys = [_C._dynamic_update_index(y, o, i) for y, o in zip(ys, out[k:])]
        return (i + 1, *out[:k], *new_ys)

    out = _loop(cond, body, [counter, *init, *ys0], [*xs, *additional])
    return tuple(out[1:])


def _scan_tpu(combine_fn, init, xs, additional_inputs, mutated_arg_indices=""):
    from torch._higher_order_ops.scan import generic_scan

    init, xs, additional = list(init), list(xs), list(additional_inputs)
    if _enabled() and init and xs and _on_tpu(init + xs + additional) and xs[0].shape[0] > 0:
        try:
            out = _scan_loop(combine_fn, init, xs, additional)
            stats["loops"]["scan"] += 1
            return out
        except Exception as e:  # noqa: BLE001 - any body the recorder cannot hold runs op by op
            _fallback("scan", e)
    return generic_scan(combine_fn, init, xs, additional_inputs=additional)


# --- map ------------------------------------------------------------------------


def _map_tpu(f, xs, pos_args, mutated_arg_indices=""):
    from torch._higher_order_ops.map import map_dense

    xs_l, pos = list(xs), list(pos_args)
    if _enabled() and xs_l and _on_tpu(xs_l + pos) and xs_l[0].shape[0] > 0:
        try:
            out = _scan_loop(f, [], xs_l, pos)  # a scan that carries nothing
            stats["loops"]["map"] += 1
            return out
        except Exception as e:  # noqa: BLE001 - any body the recorder cannot hold runs op by op
            _fallback("map", e)
    return map_dense(f, xs, pos_args, mutated_arg_indices=mutated_arg_indices)


# --- cond -------------------------------------------------------------------------


def _cond_tpu(pred, true_fn, false_fn, operands):
    from torch._higher_order_ops.cond import cond_op_dense

    ops = list(operands)
    if (_enabled() and isinstance(pred, torch.Tensor) and pred.device.type == "tpu" and pred.dim() == 0
            and _on_tpu(ops)):
        try:
            out = _cond_loops(pred, true_fn, false_fn, ops)
            stats["loops"]["cond"] += 1
            return out
        except Exception as e:  # noqa: BLE001 - any branch the recorder cannot hold runs op by op
            _fallback("cond", e)
    return cond_op_dense(pred, true_fn, false_fn, operands)


def _cond_loops(pred, true_fn, false_fn, ops: list) -> tuple:
    _, meta_t = _record(true_fn, ops)
    _, meta_f = _record(false_fn, ops)
    if meta_t != meta_f:
        raise _Unsupported("the branches return values of different shapes or dtypes")
    go = pred.to(torch.bool)
    outs = [torch.zeros(shape, dtype=dtype, device=pred.device) for shape, dtype in meta_t]
    n = len(outs)
    for branch, run in ((true_fn, go), (false_fn, go.logical_not())):

        def cond(flag, *rest):
            return flag

        def body(flag, *rest, branch=branch):
            out = branch(*rest[n:])
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            return (torch.zeros_like(flag), *out)

        outs = list(_loop(cond, body, [run, *outs], ops))[1:]
    return tuple(outs)


def _install() -> None:
    from torch._higher_order_ops.cond import cond_op
    from torch._higher_order_ops.map import map_impl
    from torch._higher_order_ops.scan import scan_op
    from torch._higher_order_ops.while_loop import while_loop_op

    for op, fn in ((while_loop_op, _while_loop_tpu), (scan_op, _scan_tpu), (map_impl, _map_tpu), (cond_op, _cond_tpu)):
        if DispatchKey.PrivateUse1 not in op.py_kernels:
            op.py_impl(DispatchKey.PrivateUse1)(fn)
