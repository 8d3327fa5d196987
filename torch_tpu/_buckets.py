"""Power-of-two buckets for ``torch.compile(..., backend="tpu", dynamic=True)``.

An XLA program has static shapes, so every distinct size of a dynamic
dimension would compile a program of its own. For graphs where padding is
safe, a call of size n runs the program of the bucket b = the next power of
two >= n instead: tensor inputs are zero-padded from n to b along their
dynamic dimensions, the size arguments say b, and the outputs are sliced
back to n. Sizes 5, 6, 7 and 8 then share one program.

Padding is safe when every output row depends only on the input rows with
the same index: the dynamic dimensions are "row" dimensions that no op
reduces, contracts, sorts or mixes. This module proves that from the ATen
graph, op by op, and leaves any graph it cannot prove to the per-size path.
Safe: pointwise ops, matmuls whose rows are dynamic (a Linear on a dynamic
batch or sequence), reductions, softmax and normalisation over static
dimensions, embedding lookups, convolution and eval-mode batch norm over a
dynamic batch, attention with a dynamic batch, views that flatten or split
the leading dynamic dimensions, factory ops sized by them. Not safe (kept
per size): a reduction over a dynamic dimension (a loss's mean over the
batch, so training graphs), attention over a dynamic sequence, a size used
as a value (``x.shape[0] * 2`` in arithmetic), and anything not listed.
docs/execution_modes.md has the user-facing summary.
"""
from __future__ import annotations

import operator

import torch

aten = torch.ops.aten

# Ops whose output rows follow their first input's rows, with the dynamic
# dimensions leading in input and output (checked generically below).
_ROW_WISE = {
    aten.clone.default, aten._to_copy.default, aten.alias.default, aten.detach.default,
    aten.contiguous.default, aten.lift_fresh_copy.default,
}
# Reductions and normalisations: safe when their dims are all static.
_DIM_OPS = {
    aten.sum.dim_IntList: 1, aten.mean.dim: 1, aten.amax.default: 1, aten.amin.default: 1,
    aten.var.correction: 1, aten.std.correction: 1, aten.prod.dim_int: 1, aten.any.dim: 1, aten.all.dim: 1,
    aten.max.dim: 1, aten.min.dim: 1, aten.argmax.default: 1, aten.argmin.default: 1,
    aten._softmax.default: 1, aten._log_softmax.default: 1, aten.softmax.int: 1, aten.log_softmax.int: 1,
    aten.cumsum.default: 1, aten.cat.default: 1, aten.split.Tensor: 2, aten.split_with_sizes.default: 2,
    aten.slice.Tensor: 1, aten.select.int: 1, aten.narrow.default: 1, aten.unsqueeze.default: 1,
    aten.squeeze.dim: 1, aten.index_select.default: 1, aten.gather.default: 1, aten.unbind.int: 1,
    aten.chunk.default: 2, aten.transpose.int: 1, aten.flip.default: 1, aten.roll.default: 2,
}
# Ops that take sizes (where a dynamic size may appear) and make a tensor.
_SIZED = {
    aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.expand.default,
    aten.empty.memory_format, aten.zeros.default, aten.ones.default, aten.full.default,
    aten.new_empty.default, aten.new_zeros.default, aten.new_ones.default, aten.new_full.default,
    aten.arange.default, aten.arange.start, aten.scalar_tensor.default,
}


def _is_sym(d) -> bool:
    return isinstance(d, torch.SymInt)


def _expr(d):
    return d.node.expr


def _prefix(shape):
    """The leading dynamic dims of `shape` as sympy expressions, or None when a
    dynamic dim follows a static one."""
    rows = []
    for i, d in enumerate(shape):
        if _is_sym(d):
            if len(rows) != i:
                return None
            rows.append(_expr(d))
    return rows


def _val(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _tensors(v):
    if isinstance(v, torch.Tensor):
        return [v]
    if isinstance(v, (list, tuple)):
        return [t for t in v if isinstance(t, torch.Tensor)]
    return []


def _same(a, b) -> bool:
    import sympy

    return len(a) == len(b) and all(sympy.expand(x - y) == 0 for x, y in zip(a, b))


def _product(rows):
    import sympy

    return sympy.expand(sympy.Mul(*rows)) if rows else sympy.Integer(1)


class Plan:
    """What a bucketed call does: which placeholders are dynamic sizes, which
    tensor inputs to pad along which leading dims, which outputs to slice."""

    def __init__(self, symbols, size_args, pads, outs):
        self.symbols = symbols  # sympy symbols, in placeholder order
        self.size_args = size_args  # placeholder index -> symbol
        self.pads = pads  # placeholder index -> [symbol per leading dim]
        self.outs = outs  # output index -> [symbol per leading dim], or a symbol for a size output


def plan(gm) -> Plan | None:
    """A bucketing plan for an ATen graph, or None when padding is not proven safe."""
    try:
        return _plan(gm)
    except Exception:  # noqa: BLE001 - an unexpected graph shape: keep the per-size path
        return None


def _plan(gm) -> Plan | None:
    import sympy

    size_args, pads, symbols = {}, {}, []
    rows = {}  # node -> its leading dynamic dims (list of sympy exprs)
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for i, n in enumerate(placeholders):
        v = _val(n)
        if _is_sym(v):
            e = _expr(v)
            if not isinstance(e, sympy.Symbol):
                return None
            size_args[i] = e
            symbols.append(e)
        elif isinstance(v, torch.Tensor):
            r = _prefix(v.shape)
            if r is None or any(not isinstance(e, sympy.Symbol) for e in r):
                return None
            rows[n] = r
            if r:
                pads[i] = r
        elif v is not None and not isinstance(v, (int, float, bool)):
            return None
    if not pads:
        return None
    sym_nodes = {n for n in placeholders if _is_sym(_val(n))}
    for n in gm.graph.nodes:
        if n.op in ("placeholder", "get_attr"):
            if n.op == "get_attr":
                rows[n] = []
            continue
        if n.op == "output":
            break
        v = _val(n)
        if n.target in (operator.mul, operator.add, torch.ops.aten.sym_size.int):
            # Size arithmetic: its result may only be a size argument (checked at the use).
            if not _is_sym(v):
                return None
            sym_nodes.add(n)
            continue
        if n.target is operator.getitem:
            src = n.args[0]
            if src not in rows:
                return None
            t = _tensors(v)
            if not t:
                return None
            r = _prefix(t[0].shape)
            if r is None or not (_same(r, rows[src]) or not r):
                return None
            rows[n] = r
            continue
        if not isinstance(n.target, torch._ops.OpOverload):
            return None
        # A dynamic size may only be a size argument of a sized op.
        flat = _flatten(n.args) + _flatten(list(n.kwargs.values()))
        if any(isinstance(a, torch.fx.Node) and a in sym_nodes for a in flat) and n.target not in _SIZED:
            return None
        if n.target in (aten.full.default, aten.new_full.default, aten.scalar_tensor.default):
            fill = n.args[1] if n.target is not aten.scalar_tensor.default else n.args[0]
            if isinstance(fill, torch.fx.Node) and fill in sym_nodes:
                return None
        out = _tensors(v)
        if not out:
            return None
        r_out = _prefix(out[0].shape)
        if r_out is None:
            return None
        ins = [a for a in flat if isinstance(a, torch.fx.Node) and a not in sym_nodes]
        if any(a not in rows for a in ins):
            return None
        if not _safe(n, r_out, ins, rows, out):
            return None
        rows[n] = r_out
    outs = {}
    out_node = next(n for n in gm.graph.nodes if n.op == "output")
    for k, a in enumerate(_flatten(out_node.args[0])):
        if not isinstance(a, torch.fx.Node):
            continue
        if a in sym_nodes:
            # A size handed on (AOTAutograd saves sizes for the backward): the real one.
            e = _expr(_val(a))
            if not isinstance(e, sympy.Symbol) or e not in symbols:
                return None
            outs[k] = e
            continue
        if a not in rows:
            return None
        r = rows[a]
        if r:
            if any(not isinstance(e, sympy.Symbol) for e in r):
                return None
            outs[k] = r
    return Plan(symbols, size_args, pads, outs)


def _flatten(args):
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(_flatten(a))
        else:
            out.append(a)
    return out


def _safe(n, r_out, ins, rows, out) -> bool:
    t = n.target
    nrow = len(r_out)
    in_rows = [rows[a] for a in ins]
    if t in _SIZED:
        # A factory op, or a broadcast of a static tensor, makes rows freely; a
        # view keeps them when the dynamic row count is unchanged (a flatten or
        # split of the leading dims).
        if not ins or not in_rows[0]:
            return all(not r for r in in_rows)
        return _product(in_rows[0]) == _product(r_out) and all(not r for r in in_rows[1:])
    if torch.Tag.pointwise in t.tags or t in _ROW_WISE:
        # Every input either has the output's leading dims or none (broadcast
        # over the rows from the right, so its rank must fit the static part).
        for a, r in zip(ins, in_rows):
            va = _val(a)
            if r:
                if not _same(r, r_out):
                    return False
            elif isinstance(va, torch.Tensor) and va.dim() > out[0].dim() - nrow and nrow:
                if any(d != 1 for d in va.shape[:va.dim() - (out[0].dim() - nrow)]):
                    return False
        return True
    if t in _DIM_OPS:
        src = ins[0]
        r_in = rows[src]
        if t is not aten.cat.default and any(rows[a] for a in ins[1:]):
            return False  # an index tensor with dynamic rows
        dims = n.args[_DIM_OPS[t]] if len(n.args) > _DIM_OPS[t] else n.kwargs.get("dim", None)
        if t in (aten.cat.default,):
            if any(not _same(r, r_out) for r in in_rows):
                return False
            dims = n.args[1] if len(n.args) > 1 else 0
        if dims is None:
            return not r_in  # a reduction over everything
        rank = _val(src).dim() if t is not aten.cat.default else out[0].dim()
        dl = dims if isinstance(dims, (list, tuple)) else [dims]
        if t is aten.transpose.int:
            dl = [n.args[1], n.args[2]]
        if any(not isinstance(d, int) for d in dl):
            return False
        if any((d % max(rank, 1)) < len(r_in) for d in dl):
            return False
        if t is aten.unsqueeze.default:
            return _same(r_in, r_out)
        return _same(r_in, r_out) or (not r_out and not r_in)
    if t in (aten.mm.default, aten.addmm.default, aten.bmm.default, aten.baddbmm.default):
        a, b = (ins[1], ins[2]) if t in (aten.addmm.default, aten.baddbmm.default) else (ins[0], ins[1])
        if t in (aten.mm.default, aten.addmm.default):
            if rows[b]:
                return False
            if t is aten.addmm.default and rows[ins[0]]:
                return False
            return len(rows[a]) <= 1 and _same(rows[a], r_out)
        # bmm: the batch dim may be dynamic in both, nothing else.
        return _same(rows[a], r_out) and _same(rows[b], r_out) and len(r_out) <= 1
    if t is aten.native_layer_norm.default:
        return all(not rows[a] for a in ins[1:]) and _same(rows[ins[0]], r_out)
    if t is aten.embedding.default:
        return not rows[ins[0]] and _same(rows[ins[1]], r_out)
    if t in (aten.convolution.default, aten._native_batch_norm_legit_no_training.default):
        return len(rows[ins[0]]) <= 1 and all(not rows[a] for a in ins[1:]) and _same(rows[ins[0]], r_out)
    if t in (aten._scaled_dot_product_flash_attention_for_cpu.default,
             aten._scaled_dot_product_efficient_attention.default,
             aten._scaled_dot_product_flash_attention.default):
        return len(r_out) <= 1 and all(_same(r, r_out) or not r for r in in_rows)
    if t in (aten.permute.default,):
        perm = n.args[1]
        return all(perm[i] == i for i in range(len(r_out))) and _same(rows[ins[0]], r_out)
    if t is aten.t.default:
        return not rows[ins[0]]
    return False


def bucket_size(n: int, boundaries: tuple = (), floor: int = 2) -> int:
    """The padded size for a real size n: the smallest of the user's
    `boundaries` that holds n, else the next power of two, at least `floor`."""
    for b in boundaries:
        if b >= n:
            return b
    b = floor
    while b < n:
        b *= 2
    return b


class Bucketed:
    """Calls `runner` (a _GraphRunner) at the bucket size and slices back."""

    def __init__(self, runner, p: Plan, boundaries: tuple = ()):
        self.runner = runner
        self.plan = p
        self.boundaries = boundaries
        self.calls = 0

    def __call__(self, *args):
        p = self.plan
        vals = {s: args[i] for i, s in p.size_args.items()}
        if any(not isinstance(v, int) for v in vals.values()):
            return self.runner(*args)
        # Sizes not passed as arguments come from the inputs' shapes.
        for i, syms in p.pads.items():
            for d, s in enumerate(syms):
                vals.setdefault(s, args[i].shape[d])
        buckets = {s: bucket_size(v, self.boundaries) for s, v in vals.items()}
        if all(buckets[s] == v for s, v in vals.items()):
            return self.runner(*args)
        new = list(args)
        for i, s in p.size_args.items():
            new[i] = buckets[s]
        for i, syms in p.pads.items():
            x = args[i]
            pad = []
            for d in reversed(range(x.dim())):
                extra = buckets[syms[d]] - x.shape[d] if d < len(syms) else 0
                pad += [0, extra]
            new[i] = torch.nn.functional.pad(x, pad)
        self.calls += 1
        outs = self.runner(*new)
        res = list(outs)
        for k, syms in p.outs.items():
            o = res[k]
            if not isinstance(syms, list):
                res[k] = vals[syms]
                continue
            for d, s in enumerate(syms):
                o = o.narrow(d, 0, vals[s])
            res[k] = o
        return res
