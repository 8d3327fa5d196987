"""The analysis behind masked buckets (torch_tpu/_masked.py): the layout of
every tensor of an ATen graph with dynamic sizes, and the edits that make
the graph exact at a padded size.

A layout is a tuple of dims; a dim is a tuple of factors (sympy
expressions), each static or affine in one dynamic size (``s + c``). A dim
of one affine factor holds its real entries first; a flattened dim holds
them per factor, in row-major order. Handlers, one per op family, give an
op's result layout from its inputs' and record the edits (masks, real
sizes) the rewrite applies; an op without a handler raises _Unsupported,
which keeps the graph on the exact per-size path.
"""
from __future__ import annotations

import math
import operator

import torch

aten = torch.ops.aten
_BIG = 2**62


class _Unsupported(Exception):
    pass


def _fail(why: str):
    raise _Unsupported(why)


def _sympy():
    import sympy

    return sympy


def _val(n):
    return n.meta.get("val") if isinstance(n, torch.fx.Node) else None


def _size(d):
    sympy = _sympy()
    return d.node.expr if isinstance(d, torch.SymInt) else sympy.Integer(int(d))


def _affine(e):
    """(symbol, c) when e is symbol + c, else None."""
    syms = e.free_symbols
    if len(syms) != 1:
        return None
    (s,) = syms
    c = _sympy().expand(e - s)
    return (s, int(c)) if c.is_Integer else None


def _static(dim) -> bool:
    return all(f.is_Integer for f in dim)


def _eq(a, b) -> bool:
    return _sympy().expand(a - b) == 0


def _norm(dim):
    """Adjacent static factors merged, ones dropped: (4, 8, s) -> (32, s)."""
    out = []
    for f in dim:
        if f == 1:
            continue
        if out and f.is_Integer and out[-1].is_Integer:
            out[-1] = out[-1] * f
        else:
            out.append(f)
    return tuple(out) or (_sympy().Integer(1),)


def _same_dim(a, b) -> bool:
    a, b = _norm(a), _norm(b)
    return len(a) == len(b) and all(_eq(x, y) for x, y in zip(a, b))


def _shape_layout(shape):
    """The layout of a tensor made at `shape` (a factory, an input): each
    dynamic dimension must be affine in one size."""
    out = []
    for d in shape:
        e = _size(d)
        if not e.is_Integer and _affine(e) is None:
            _fail(f"a dimension of size {e} made directly")
        out.append((e,))
    return tuple(out)


def _regroup(layout, shape):
    """The layout of reshape(tensor of `layout`, `shape`): the factors in
    row-major order, regrouped into the new dimensions."""
    sympy = _sympy()
    flat = [f for dim in layout for f in dim if f != 1]
    out, i = [], 0
    for d in shape:
        e = _size(d)
        if e == 1:
            out.append((sympy.Integer(1),))
            continue
        group, need = [], e
        for _ in range(64):
            if need == 1:
                break
            if i >= len(flat):
                _fail("a reshape that does not regroup the factors")
            f = flat[i]
            if f.is_Integer and need.is_Integer:
                if int(need) % int(f) == 0:
                    group.append(f)
                    need, i = need / f, i + 1
                elif int(f) % int(need) == 0:
                    group.append(need)
                    flat[i] = f / need
                    need = sympy.Integer(1)
                else:
                    _fail("a reshape across factors")
            else:
                q = sympy.simplify(need / f)
                if q.is_Rational and not q.is_Integer:
                    _fail("a reshape splitting a dynamic factor")
                group.append(f)
                need, i = q, i + 1
        else:
            _fail("a reshape too deep")
        out.append(_norm(group))
    if any(f != 1 for f in flat[i:]):
        _fail("a reshape that does not regroup the factors")
    return tuple(out)


def _dims_arg(dims, rank):
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    dims = dims if isinstance(dims, (list, tuple)) else [dims]
    return sorted(d % max(rank, 1) for d in dims)


class _Analysis:
    """Walks an ATen graph once: the layout of every tensor, and the edits
    (masks, real sizes) that make the padded graph exact."""

    def __init__(self, gm):
        self.gm = gm
        self.layout = {}
        self.sym = {}  # a SymInt node -> its sympy expression
        self.edits = []  # (kind, node, extra)
        self.symbols = set()
        self.outs = {}

    # -- helpers -------------------------------------------------------
    def lay(self, a):
        if not isinstance(a, torch.fx.Node):
            return None
        if a not in self.layout:
            _fail(f"no layout for {a.name}")
        return self.layout[a]

    def dynamic(self, layout) -> bool:
        return layout is not None and not isinstance(layout, list) and not all(_static(d) for d in layout)

    def out_shape(self, n):
        v = _val(n)
        if not isinstance(v, torch.Tensor):
            _fail(f"{n.target} without a tensor result")
        return v.shape

    # -- the walk --------------------------------------------------------
    def run(self):
        for n in self.gm.graph.nodes:
            if n.op == "placeholder":
                self.placeholder(n)
            elif n.op == "get_attr":
                v = getattr(self.gm, n.target, None)
                self.layout[n] = _shape_layout(v.shape) if isinstance(v, torch.Tensor) else None
            elif n.op == "output":
                self.output(n)
            elif n.op == "call_function":
                self.call(n)
            else:
                _fail(f"a {n.op} node")
        if not self.symbols:
            _fail("no dynamic size")
        return self

    def placeholder(self, n):
        v = _val(n)
        if isinstance(v, torch.SymInt):
            e = _size(v)
            if _affine(e) is None:
                _fail("a size input that is an expression")
            self.sym[n] = e
            self.symbols.add(_affine(e)[0])
            self.layout[n] = None
        elif isinstance(v, torch.Tensor):
            for d in v.shape:
                e = _size(d)
                if not e.is_Integer and _affine(e) is None:
                    _fail("an input dimension that is an expression")
                if not e.is_Integer:
                    self.symbols.add(_affine(e)[0])
            self.layout[n] = _shape_layout(v.shape)
        elif v is None or isinstance(v, (int, float, bool)):
            self.layout[n] = None
        else:
            _fail(f"an input of type {type(v).__name__}")

    def output(self, n):
        for k, a in enumerate(torch.utils._pytree.tree_leaves(n.args[0])):
            if not isinstance(a, torch.fx.Node):
                continue
            if a in self.sym:
                self.outs[k] = self.sym[a]
                continue
            lay = self.lay(a)
            if isinstance(lay, list):
                _fail("an output that is a list")
            if self.dynamic(lay):
                if any(len(d) != 1 for d in lay):
                    _fail("an output with a flattened dynamic dimension")
                self.outs[k] = [d[0] for d in lay]

    def call(self, n):
        t = n.target
        v = _val(n)
        if t in (operator.mul, operator.add, operator.sub, operator.floordiv, aten.sym_size.int):
            if not isinstance(v, torch.SymInt):
                _fail(f"size arithmetic {t}")
            self.sym[n] = _size(v)
            self.layout[n] = None
            return
        if t is operator.getitem:
            src = self.lay(n.args[0])
            self.layout[n] = src[n.args[1]] if isinstance(src, list) else None
            return
        if not isinstance(t, torch._ops.OpOverload):
            _fail(f"a call of {t}")
        ins = [a for a in torch.utils._pytree.tree_leaves((n.args, n.kwargs)) if isinstance(a, torch.fx.Node)]
        syms = [a for a in ins if a in self.sym]
        tensors = [a for a in ins if a not in self.sym]
        if not syms and not any(self.dynamic(self.lay(a)) for a in tensors) and \
                all(not isinstance(x, list) for x in map(self.lay, tensors)):
            # Nothing dynamic reaches the op: its result is static.
            self.layout[n] = self.static_result(n, v)
            return
        handler = _HANDLERS.get(t) or _HANDLERS.get(t.overloadpacket)
        if handler is None:
            if torch.Tag.pointwise in t.tags or t in _LAYOUT_KEEPING:
                handler = _pointwise
            else:
                _fail(f"{t} on a dynamic size")
        try:
            self.layout[n] = handler(self, n)
        except _Unsupported as e:
            raise _Unsupported(f"{e} (at {n.format_node()})") from None

    def static_result(self, n, v):
        outs = v if isinstance(v, (list, tuple)) else [v]
        lays = []
        for o in outs:
            if isinstance(o, torch.Tensor):
                lay = _shape_layout(o.shape)
                if self.dynamic(lay):
                    _fail(f"{n.target} makes a dynamic size from nothing dynamic")
                lays.append(lay)
            else:
                lays.append(None)
        return lays if isinstance(v, (list, tuple)) else lays[0]

    def value_syms(self, n, allowed=()):
        """Sizes the op reads as numbers: replaced with the real size."""
        for i, a in enumerate(n.args):
            if isinstance(a, torch.fx.Node) and a in self.sym and i not in allowed:
                self.edits.append(("real_arg", n, (i, self.sym[a])))
            elif isinstance(a, (list, tuple)) and any(isinstance(x, torch.fx.Node) and x in self.sym for x in a) \
                    and i not in allowed:
                _fail(f"{n.target} reads a list of sizes as values")
        if any(isinstance(a, torch.fx.Node) and a in self.sym for a in n.kwargs.values()):
            _fail(f"{n.target} reads a size keyword as a value")

    def mask_arg(self, n, index, dims, fill):
        """Before n runs, entries of input `index` that are padding along
        `dims` become `fill`."""
        a = n.args[index]
        lay = self.lay(a)
        dims = [d for d in dims if not _static(lay[d])]
        if dims:
            self.edits.append(("mask_arg", n, (index, lay, tuple(dims), fill)))


_LAYOUT_KEEPING = {
    aten.clone.default, aten._to_copy.default, aten.alias.default, aten.detach.default,
    aten.lift_fresh_copy.default, aten.copy.default, aten.where.self, aten.tril.default, aten.triu.default,
    aten.native_dropout_backward.default, aten.gelu_backward.default, aten.silu_backward.default,
    aten.tanh_backward.default, aten.sigmoid_backward.default, aten.threshold_backward.default,
}


def _broadcast(an: _Analysis, n, tensors):
    shape = an.out_shape(n)
    rank = len(shape)
    out = []
    for i, d in enumerate(shape):
        e = _size(d)
        pick = None
        for a in tensors:
            lay = an.lay(a)
            if lay is None:
                continue
            j = i - (rank - len(lay))
            if j < 0:
                continue
            dim = lay[j]
            if len(dim) == 1 and dim[0] == 1 and e != 1:
                continue
            if pick is None:
                pick = dim
            elif not _same_dim(pick, dim):
                _fail(f"{n.target} over inputs of different layouts")
        if pick is None:
            if not e.is_Integer and _affine(e) is None:
                _fail("a broadcast to an expression")
            pick = (e,)
        out.append(pick)
    return tuple(out)


def _pointwise(an: _Analysis, n):
    an.value_syms(n)
    tensors = [a for a in torch.utils._pytree.tree_leaves((n.args, n.kwargs))
               if isinstance(a, torch.fx.Node) and a not in an.sym and isinstance(_val(a), torch.Tensor)]
    v = _val(n)
    if isinstance(v, (list, tuple)):  # native_dropout: (out, mask)
        return [an.lay(n.args[0]) for _ in v]
    if n.target is aten.copy_.default or (n.target._schema.arguments and n.target._schema.arguments[0].alias_info
                                          and n.target._schema.arguments[0].alias_info.is_write):
        if an.dynamic(an.lay(n.args[0])):
            _fail("an in-place write to a padded tensor")
    return _broadcast(an, n, tensors)


def _factory(an: _Analysis, n):
    t = n.target
    if t is aten.arange.start or t is aten.arange.start_step:
        start = n.args[0]
        if isinstance(start, torch.fx.Node):
            an.edits.append(("arange_start", n, an.sym[start]))
        if t is aten.arange.start_step and _arg(n, 2, n.kwargs.get("step", 1)) != 1:
            _fail("arange with a step")
    elif t in (aten.full.default, aten.new_full.default, aten.scalar_tensor.default):
        an.value_syms(n, allowed=(0,) if t is aten.full.default else (0, 1))
    if t in (aten.empty_like.default, aten.zeros_like.default, aten.ones_like.default, aten.full_like.default,
             aten.rand_like.default, aten.randn_like.default):
        an.value_syms(n, allowed=(0,))
        return an.lay(n.args[0])
    return _shape_layout(an.out_shape(n))


def _reshape(an: _Analysis, n):
    return _regroup(an.lay(n.args[0]), an.out_shape(n))


def _expand(an: _Analysis, n):
    return _broadcast(an, n, [n.args[0]])


def _permute(an: _Analysis, n):
    lay = an.lay(n.args[0])
    t = n.target
    if t is aten.t.default:
        return tuple(reversed(lay))
    if t is aten.transpose.int:
        a, b = (d % len(lay) for d in n.args[1:3])
        lay = list(lay)
        lay[a], lay[b] = lay[b], lay[a]
        return tuple(lay)
    return tuple(lay[d % len(lay)] for d in n.args[1])


def _squeeze_unsqueeze(an: _Analysis, n):
    lay = list(an.lay(n.args[0]))
    one = (_sympy().Integer(1),)
    if n.target is aten.unsqueeze.default:
        d = n.args[1] % (len(lay) + 1)
        return tuple(lay[:d] + [one] + lay[d:])
    shape = an.out_shape(n)
    if len(shape) == len(lay):
        return tuple(lay)
    dims = _dims_arg(n.args[1] if len(n.args) > 1 else None, len(lay))
    return tuple(dim for i, dim in enumerate(lay) if not (i in dims and _static(dim) and _size_of(dim) == 1))


def _size_of(dim):
    p = _sympy().Integer(1)
    for f in dim:
        p = p * f
    return p


def _slice(an: _Analysis, n):
    lay = list(an.lay(n.args[0]))
    dim = (n.args[1] if len(n.args) > 1 else 0) % len(lay)
    start = n.args[2] if len(n.args) > 2 else None
    end = n.args[3] if len(n.args) > 3 else None
    step = n.args[4] if len(n.args) > 4 else 1
    out = _size(an.out_shape(n)[dim])
    if _static(lay[dim]):
        lay[dim] = (out,)
        if not out.is_Integer and _affine(out) is None:
            _fail("a slice to an expression")
        return tuple(lay)
    if len(lay[dim]) != 1 or step != 1:
        _fail("a slice of a flattened dynamic dimension")
    if isinstance(start, torch.fx.Node):
        _fail("a slice from a dynamic start")
    if isinstance(end, torch.fx.Node) and _affine(an.sym[end]) is None:
        _fail("a slice to a dynamic expression")
    start = start or 0
    if start < 0:
        if not out.is_Integer:
            _fail("a slice from the end to a dynamic size")
        # x[..., -k:] reads the last k real entries.
        an.edits.append(("slice_from_end", n, (dim, lay[dim][0], int(out))))
    elif isinstance(end, int) and 0 <= end < _BIG and not out.is_Integer:
        _fail("a slice to a fixed end of a dynamic size")
    lay[dim] = (out,)
    return tuple(lay)


def _select(an: _Analysis, n):
    lay = list(an.lay(n.args[0]))
    dim = n.args[1] % len(lay)
    idx = n.args[2]
    if not _static(lay[dim]):
        if len(lay[dim]) != 1:
            _fail("a select on a flattened dynamic dimension")
        if isinstance(idx, torch.fx.Node):
            an.edits.append(("select_real", n, (dim, an.sym[idx])))
        elif idx < 0:
            an.edits.append(("select_real", n, (dim, lay[dim][0] + idx)))
    del lay[dim]
    return tuple(lay)


def _cat(an: _Analysis, n):
    pieces = n.args[0]
    lays = [an.lay(p) for p in pieces]
    rank = max(len(x) for x in lays)
    dim = (n.args[1] if len(n.args) > 1 else 0) % rank
    lays = [x for x in lays if len(x) == rank]  # cat skips legacy empty 1-d pieces
    out = list(lays[-1])
    dynamic = [i for i, x in enumerate(lays) if not _static(x[dim])]
    if dynamic and dynamic != [len(lays) - 1]:
        # A padded piece followed by fixed ones (a KV cache grown by the new
        # keys): the fixed entries are moved to just after the real ones.
        if dynamic != [0] or len(lays[0][dim]) != 1 or len(lays) != len(pieces):
            _fail("a cat after a dynamic piece")
        fixed = sum(math.prod(int(f) for f in x[dim]) for x in lays[1:])
        an.edits.append(("cat_after_real", n, (dim, lays[0][dim][0], fixed)))
    elif dynamic and len(lays[-1][dim]) != 1:
        _fail("a cat of a flattened dynamic dimension")
    out[dim] = (_size(an.out_shape(n)[dim]),)
    for x in lays:
        for i in range(rank):
            if i != dim and not _same_dim(x[i], out[i]):
                _fail("a cat of different layouts")
    return tuple(out)


def _split(an: _Analysis, n):
    lay = list(an.lay(n.args[0]))
    at = 1 if n.target is aten.unbind.int else 2
    dim = (n.args[at] if len(n.args) > at else n.kwargs.get("dim", 0)) % len(lay)
    if not _static(lay[dim]):
        _fail("a split of a dynamic dimension")
    if n.target is aten.unbind.int:
        return [tuple(lay[:dim] + lay[dim + 1:]) for _ in _val(n)]
    outs = []
    for o in _val(n):
        x = list(lay)
        x[dim] = (_size(o.shape[dim]),)
        outs.append(tuple(x))
    return outs


def _reduce(an: _Analysis, n):
    t = n.target
    lay = an.lay(n.args[0])
    rank = len(lay)
    dims = n.args[1] if len(n.args) > 1 else n.kwargs.get("dim")
    if t in (aten.sum.default, aten.mean.default, aten.amax.default, aten.amin.default) and len(n.args) < 2:
        dims = None
    if t in (aten.argmax.default, aten.argmin.default) and dims is None:
        _fail("an argmax over everything")
    dl = _dims_arg(dims, rank)
    padded = [d for d in dl if not _static(lay[d])]
    if padded:
        fill = _FILLS[t.overloadpacket]
        if fill is None:
            _fail(f"{t} over a dynamic dimension")
        if t.overloadpacket is aten.mean:
            an.edits.append(("mean", n, (lay, tuple(dl))))
        else:
            an.mask_arg(n, 0, dl, fill)
    keep = (n.args[2] if len(n.args) > 2 else n.kwargs.get("keepdim", False)) if dims is not None else False
    one = (_sympy().Integer(1),)
    out = [one if i in dl else d for i, d in enumerate(lay)] if keep else [d for i, d in enumerate(lay) if i not in dl]
    if isinstance(_val(n), (list, tuple)):
        return [tuple(out)] * len(_val(n))
    return tuple(out)


_FILLS = {
    aten.sum: 0, aten.mean: 0, aten.amax: float("-inf"), aten.amin: float("inf"), aten.max: float("-inf"),
    aten.min: float("inf"), aten.argmax: float("-inf"), aten.argmin: float("inf"), aten.any: False,
    aten.all: True, aten.prod: 1, aten.logsumexp: float("-inf"), aten.var: None, aten.std: None,
}


def _softmax(an: _Analysis, n):
    lay = an.lay(n.args[0])
    dim = n.args[1] % len(lay)
    if not _static(lay[dim]):
        an.mask_arg(n, 0, [dim], float("-inf"))
    return lay


def _softmax_backward(an: _Analysis, n):
    lay = an.lay(n.args[0])
    dim = n.args[2] % len(lay)
    if not _static(lay[dim]):
        an.mask_arg(n, 0, [dim], 0)
    return lay


def _mm(an: _Analysis, n):
    t = n.target
    off = 1 if t in (aten.addmm.default, aten.baddbmm.default) else 0
    a, b = an.lay(n.args[off]), an.lay(n.args[off + 1])
    k = len(a) - 1
    if not _same_dim(a[k], b[len(b) - 2]):
        _fail("a matmul over different layouts")
    if not _static(a[k]):
        an.mask_arg(n, off, [k], 0)
    out = tuple(a[:-1]) + (b[-1],)
    if len(a) == 3 and not _same_dim(a[0], b[0]):
        _fail("a bmm over different batch layouts")
    if off:
        an.value_syms(n, allowed=(0, 1, 2))
        bias = an.lay(n.args[0])
        for i in range(1, len(bias) + 1):
            if not (len(bias[-i]) == 1 and bias[-i][0] == 1) and not _same_dim(bias[-i], out[-i]):
                _fail("an addmm bias of another layout")
    return out


_SDPA_FWD = {aten._scaled_dot_product_fused_attention_overrideable.default: (3, 5),
             aten._scaled_dot_product_flash_attention_for_cpu.default: ("attn_mask", 4)}
_SDPA_BWD = {aten._scaled_dot_product_fused_attention_overrideable_backward.default: (4, 13),
             aten._scaled_dot_product_flash_attention_for_cpu_backward.default: ("attn_mask", 6)}


def _arg(n, where, default=None):
    if isinstance(where, str):
        return n.kwargs.get(where, default)
    return n.args[where] if len(n.args) > where else default


def _sdpa(an: _Analysis, n):
    fwd = n.target in _SDPA_FWD
    mask_at, causal_at = (_SDPA_FWD if fwd else _SDPA_BWD)[n.target]
    off = 0 if fwd else 1
    q, k, v = (an.lay(n.args[off + i]) for i in range(3))
    causal = bool(_arg(n, causal_at, False))
    if not _same_dim(k[2], v[2]):
        _fail("attention over keys and values of different layouts")
    if not _static(k[2]):
        if len(k[2]) != 1:
            _fail("attention over flattened keys")
        if causal and not _same_dim(q[2], k[2]):
            _fail("causal attention over padded keys of another length")
        if not causal:
            an.edits.append(("key_mask", n, (mask_at, k[2], len(q))))
    if not fwd and not _static(q[2]):
        an.mask_arg(n, 0, [2], 0)  # padded queries' gradient must not reach real keys
    if fwd:
        out = tuple(q[:3]) + (v[3],)
        lse = tuple(q[:3])
        return [out, lse] + [None] * (len(_val(n)) - 2)
    return [q, k, v] + [None] * (len(_val(n)) - 3)


def _layer_norm(an: _Analysis, n):
    lay = an.lay(n.args[0])
    norm = len(n.args[1])
    if not all(_static(d) for d in lay[-norm:]):
        _fail("a layer norm over a dynamic dimension")
    stats = tuple(lay[:-norm]) + ((_sympy().Integer(1),),) * norm
    return [lay, stats, stats]


def _layer_norm_backward(an: _Analysis, n):
    lay = an.lay(n.args[1])
    norm = len(n.args[2])
    if not all(_static(d) for d in lay[-norm:]):
        _fail("a layer norm over a dynamic dimension")
    an.mask_arg(n, 0, range(len(lay) - norm), 0)  # the weight and bias gradients sum over rows
    w = an.lay(n.args[5]) if n.args[5] is not None else None
    return [lay, w, w]


def _embedding(an: _Analysis, n):
    w, idx = an.lay(n.args[0]), an.lay(n.args[1])
    return tuple(idx) + (w[-1],)


def _embedding_backward(an: _Analysis, n):
    idx = an.lay(n.args[1])
    an.mask_arg(n, 0, range(len(idx)), 0)
    return _shape_layout(an.out_shape(n))


def _nll(an: _Analysis, n):
    fwd = n.target is aten.nll_loss_forward.default
    target = 1 if fwd else 2
    lay = an.lay(n.args[target])
    if an.dynamic(lay):
        ignore = n.args[4 if fwd else 5]
        an.edits.append(("nll_target", n, (target, lay, ignore)))
    if fwd:
        reduction = n.args[3]
        out = lay if reduction == 0 else ()
        return [out, ()]
    return an.lay(n.args[1])


def _index_select(an: _Analysis, n):
    lay = list(an.lay(n.args[0]))
    dim = n.args[1] % len(lay)
    idx = an.lay(n.args[2])
    lay[dim] = idx[0] if idx else (_sympy().Integer(1),)
    return tuple(lay)


def _gather(an: _Analysis, n):
    return an.lay(n.args[2])


def _index(an: _Analysis, n):
    src = an.lay(n.args[0])
    idx = n.args[1]
    if any(i is None for i in idx):
        _fail("indexing with None")
    tensors = list(idx)
    shape = an.out_shape(n)
    lead = len(shape) - (len(src) - len(idx))
    # The broadcast of the index tensors, then the dims left unindexed.
    tmp = _broadcast_shape(an, tensors, shape[:lead])
    return tmp + tuple(src[len(idx):])


def _broadcast_shape(an, tensors, shape):
    rank = len(shape)
    out = []
    for i, d in enumerate(shape):
        e, pick = _size(d), None
        for a in tensors:
            lay = an.lay(a)
            j = i - (rank - len(lay))
            if j < 0 or (len(lay[j]) == 1 and lay[j][0] == 1 and e != 1):
                continue
            if pick is None:
                pick = lay[j]
            elif not _same_dim(pick, lay[j]):
                _fail("index tensors of different layouts")
        out.append(pick if pick is not None else (e,))
    return tuple(out)


def _pad(an: _Analysis, n):
    lay = list(an.lay(n.args[0]))
    pad = n.args[1]
    for k in range(0, len(pad), 2):
        dim = len(lay) - 1 - k // 2
        left, right = pad[k], pad[k + 1]
        if any(isinstance(p, torch.fx.Node) for p in (left, right)):
            _fail("a pad by a dynamic amount")
        if _static(lay[dim]):
            continue
        if len(lay[dim]) != 1 or left < 0 or right < 0:
            _fail("a pad of a flattened dynamic dimension")
        if right:
            value = n.args[2] if len(n.args) > 2 else 0
            an.edits.append(("right_pad", n, (dim, lay[dim][0] + left, value)))
        lay[dim] = (_size(an.out_shape(n)[dim]),)
    return tuple(lay)


def _scatter_back(an: _Analysis, n):
    """slice_backward / select_backward: zeros with the gradient placed in.
    The gradient's padding must not land on real entries."""
    an.mask_arg(n, 0, range(len(an.lay(n.args[0]))), 0)
    out = _shape_layout(an.out_shape(n))
    dim = n.args[2] % len(out)
    if n.target is aten.slice_backward.default:
        start, step = n.args[3], n.args[5]
        if isinstance(start, torch.fx.Node) or step != 1:
            _fail("a slice_backward from a dynamic start")
        if start < 0 and not _static(out[dim]):
            # The gradient of x[..., -k:] lands on the last k real entries.
            an.edits.append(("place_real", n, (dim, out[dim][0] + start, -start)))
    else:
        idx = n.args[3]
        if isinstance(idx, torch.fx.Node):
            an.edits.append(("place_real", n, (dim, an.sym[idx], None)))
        elif idx < 0 and not _static(out[dim]):
            an.edits.append(("place_real", n, (dim, out[dim][0] + idx, None)))
    return out


def _scatter_into(an: _Analysis, n):
    """select_scatter / slice_scatter into a padded tensor at a fixed place."""
    lay = an.lay(n.args[0])
    dim = (n.args[2] if len(n.args) > 2 else 0) % len(lay)
    if not _static(lay[dim]):
        where = n.args[3] if len(n.args) > 3 else 0
        if n.target is aten.slice_scatter.default:
            step = n.args[5] if len(n.args) > 5 else 1
            end = n.args[4] if len(n.args) > 4 else None
            if isinstance(where, torch.fx.Node) or (where or 0) < 0 or step != 1 or \
                    (isinstance(end, int) and end < 0):
                _fail("a slice_scatter at a dynamic place")
        elif isinstance(where, torch.fx.Node) or where < 0:
            _fail("a select_scatter at a dynamic place")
    return lay


def _cumsum(an: _Analysis, n):
    lay = an.lay(n.args[0])
    dim = n.args[1] % len(lay)
    if len(lay[dim]) != 1:
        _fail("a cumsum over a flattened dynamic dimension")
    return lay


_HANDLERS = {
    aten.view.default: _reshape, aten._unsafe_view.default: _reshape, aten.reshape.default: _reshape,
    aten.expand.default: _expand, aten.permute.default: _permute, aten.transpose.int: _permute,
    aten.t.default: _permute, aten.unsqueeze.default: _squeeze_unsqueeze, aten.squeeze.dim: _squeeze_unsqueeze,
    aten.squeeze.dims: _squeeze_unsqueeze, aten.squeeze.default: _squeeze_unsqueeze, aten.slice.Tensor: _slice,
    aten.select.int: _select, aten.cat.default: _cat, aten.split.Tensor: _split,
    aten.split_with_sizes.default: _split, aten.unbind.int: _split,
    aten._softmax.default: _softmax, aten._log_softmax.default: _softmax, aten._safe_softmax.default: _softmax,
    aten._softmax_backward_data.default: _softmax_backward,
    aten._log_softmax_backward_data.default: _softmax_backward,
    aten.mm.default: _mm, aten.addmm.default: _mm, aten.bmm.default: _mm, aten.baddbmm.default: _mm,
    aten.native_layer_norm.default: _layer_norm, aten.native_layer_norm_backward.default: _layer_norm_backward,
    aten.embedding.default: _embedding, aten.embedding_dense_backward.default: _embedding_backward,
    aten.nll_loss_forward.default: _nll, aten.nll_loss_backward.default: _nll,
    aten.index_select.default: _index_select, aten.gather.default: _gather, aten.index.Tensor: _index,
    aten.constant_pad_nd.default: _pad, aten.slice_backward.default: _scatter_back,
    aten.select_backward.default: _scatter_back, aten.cumsum.default: _cumsum,
    aten.select_scatter.default: _scatter_into, aten.slice_scatter.default: _scatter_into,
    aten.native_dropout.default: _pointwise,
}
for _op in (aten.sum.dim_IntList, aten.sum.default, aten.mean.dim, aten.mean.default, aten.amax.default,
            aten.amin.default, aten.max.dim, aten.min.dim, aten.argmax.default, aten.argmin.default,
            aten.any.dim, aten.all.dim, aten.prod.dim_int, aten.logsumexp.default, aten.var.correction,
            aten.std.correction):
    _HANDLERS[_op] = _reduce
for _op in (*_SDPA_FWD, *_SDPA_BWD):
    _HANDLERS[_op] = _sdpa
for _op in (aten.arange.default, aten.arange.start, aten.arange.start_step, aten.empty.memory_format,
            aten.zeros.default, aten.ones.default, aten.full.default, aten.new_empty.default,
            aten.new_zeros.default, aten.new_ones.default, aten.new_full.default, aten.scalar_tensor.default,
            aten.empty_like.default, aten.zeros_like.default, aten.ones_like.default, aten.full_like.default,
            aten.rand_like.default, aten.randn_like.default, aten.empty_strided.default):
    _HANDLERS[_op] = _factory
