"""Counters and readable reports: torch_tpu.debug.metrics(), metrics_report()."""
from __future__ import annotations

from torch_tpu import _C
from torch_tpu._profiler import device_spans  # noqa: F401  (public: torch_tpu.debug.device_spans)


def metrics() -> dict:
    """Counters since start (or the last reset_metrics()).

    Keys: ops_dispatched, compiles, compile_ms, cache_hits, cache_misses,
    executions, h2d_transfers, h2d_bytes, d2h_transfers, d2h_bytes,
    sync_points (kernels that read device values on the host), key_checks
    (cache hits re-verified under TORCH_TPU_CHECK_KEYS=1), host_fills
    (whole-storage fills done on the host, no program), fallbacks (dict
    op -> count), cached_executables; fused eager: flushes (graphs run),
    fused_ops (ops they held), fused_cache_hits, fused_max_ops (the largest
    graph), flush_reasons (dict reason -> count); torch.compile: replays
    (captured graphs executed without running their ops); donated_buffers
    (storages a fused or compiled graph overwrote in place, its old buffer
    donated to the new value instead of copied); compiles_by_op
    (dict op -> (programs compiled, milliseconds)).
    """
    return _C._metrics()


def reset_metrics() -> None:
    """Zeroes every counter metrics() and metrics_report() show, the
    torch.compile graph counts included (compiled programs stay cached)."""
    from torch_tpu import _compile, _recompiles

    _C._reset_metrics()
    _C._clear_compile_records()
    _compile.stats.update(graphs=0, captured=0, bucketed=0, without_aot=0, not_captured={})
    _recompiles.causes.clear()


def metrics_report() -> str:
    m = metrics()
    lines = ["torch_tpu metrics", "-" * 40]
    rows = [
        ("ops dispatched", m["ops_dispatched"]),
        ("executions", m["executions"]),
        ("compiles", f'{m["compiles"]} ({m["compile_ms"]:.1f} ms total)'),
        ("compile cache hits", m["cache_hits"]),
        ("compile cache misses", m["cache_misses"]),
        ("cached executables", m["cached_executables"]),
        ("host->device", f'{m["h2d_transfers"]} transfers, {m["h2d_bytes"]} bytes'),
        ("device->host", f'{m["d2h_transfers"]} transfers, {m["d2h_bytes"]} bytes'),
        ("host sync points", m["sync_points"]),
    ]
    by_op = sorted(m["compiles_by_op"].items(), key=lambda kv: -kv[1][1])
    if by_op:
        rows.append(("compiles by op", ", ".join(f"{op} {n} ({ms:.0f} ms)" for op, (n, ms) in by_op[:8])
                     + (f", ... {len(by_op) - 8} more ops" if len(by_op) > 8 else "")))
    if m["background_compiles"] or m["background_pending"]:
        rows.append(("background compiles", f'{m["background_compiles"]} ({m["background_compile_ms"]:.1f} ms), '
                     f'{m["background_pending"]} pending (full programs replacing quick ones)'))
    if m["compiles_ahead"]:
        rows.append(("compiled ahead", f'{m["compiles_ahead"]} misses compiled on {_C._compile_threads()} threads '
                     "while ops went on recording"))
    if m["host_fills"]:
        rows.append(("fills on the host", f'{m["host_fills"]} (no program compiled or run)'))
    if m["key_checks"]:
        rows.append(("cache keys verified", m["key_checks"]))
    width = max(len(k) for k, _ in rows)
    lines += [f"{k:<{width}}  {v}" for k, v in rows]
    if m["flushes"]:
        lines.append(f"{'fused eager flushes':<{width}}  {m['flushes']} "
                     f"({m['fused_ops']} ops, {m['fused_ops'] / m['flushes']:.1f} per flush, "
                     f"largest {m['fused_max_ops']}; {m['fused_cache_hits']} cache hits)")
        for why, n in sorted(m["flush_reasons"].items(), key=lambda kv: -kv[1]):
            lines.append(f"  {why}: {n}")
    if m["donated_buffers"]:
        lines.append(f"{'buffers donated':<{width}}  {m['donated_buffers']} (updated in place by a graph)")
    from torch_tpu import _compile

    cs = _compile.stats
    if cs["graphs"]:
        lines.append(f"{'torch.compile graphs':<{width}}  {cs['graphs']} ({cs['captured']} captured, "
                     f"{m['replays']} replays)")
        if cs["without_aot"]:
            lines.append(f"  run as dynamo captured them, without AOTAutograd: {cs['without_aot']} graphs")
        if cs["bucketed"]:
            lines.append(f"  dynamic sizes padded to power-of-two buckets: {cs['bucketed']} graphs")
        for why, n in sorted(cs["not_captured"].items(), key=lambda kv: -kv[1]):
            lines.append(f"  runs its ops: {why}: {n}")
        lines.append("  (TORCH_LOGS=recompiles shows why dynamo compiled a graph again)")
    fb = m["fallbacks"]
    lines.append(f"{'cpu fallbacks':<{width}}  {sum(fb.values())}")
    for op, n in sorted(fb.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {op}: {n}")
    from torch_tpu import cache

    st = cache.stats()
    lines.append("compilation cache tiers")
    mem = st["memory"]
    lines.append(f"  memory: {mem['hits']} hits / {mem['requests']} requests, {mem['entries']} entries")
    for tier in ("disk", "shared"):
        if tier in st:
            t = st[tier]
            lines.append(f"  {tier}: {t['hits']} hits / {t['requests']} requests, {t['writes']} writes, "
                         f"{t['entries']} entries, {t['bytes']} bytes ({t['dir']})")
    lines.append(f"  compile time spent {st['compile_ms']:.1f} ms, saved {st['compile_ms_saved']:.1f} ms")
    return "\n".join(lines)


# --- numerics against CPU ----------------------------------------------------------


class CompareReport:
    """What compare_with_cpu found: `ok`, and per module (in the order the
    forward ran them) the largest absolute error of its output, then of each
    parameter's gradient. `first_mismatch` names the first beyond tolerance."""

    def __init__(self, outputs, grads, atol, rtol):
        self.outputs = outputs  # [(module name, max abs err, within tolerance)]
        self.grads = grads  # [(parameter name, max abs err, within tolerance)]
        self.atol, self.rtol = atol, rtol
        bad = [("output", n, e) for n, e, ok in outputs if not ok] + [("grad", n, e) for n, e, ok in grads if not ok]
        self.first_mismatch = bad[0] if bad else None
        self.ok = not bad

    def __str__(self):
        if self.ok:
            worst = max([e for _, e, _ in self.outputs + self.grads] or [0.0])
            return (f"tpu matches CPU: {len(self.outputs)} module outputs and {len(self.grads)} gradients within "
                    f"atol={self.atol}, rtol={self.rtol} (largest abs error {worst:.3g})")
        kind, name, err = self.first_mismatch
        return (f"first mismatch: the {kind} of {name or '<root>'} differs from CPU by up to {err:.3g} "
                f"(atol={self.atol}, rtol={self.rtol})")

    __repr__ = __str__


def _leaves(x):
    import torch
    from torch.utils._pytree import tree_leaves
    return [t for t in tree_leaves(x) if isinstance(t, torch.Tensor)]


def _err(a, b, atol, rtol):
    """(max abs error, within tolerance) of a against the CPU value b."""
    import torch
    a = a.detach().cpu()
    b = b.detach()
    if a.shape != b.shape:
        return float("inf"), False
    if not (a.is_floating_point() or a.is_complex()):
        return float((a != b).sum()), bool(torch.equal(a, b))
    a, b = a.double(), b.double()
    finite = torch.isfinite(b)
    same_nonfinite = bool(torch.equal(torch.isfinite(a), finite)) and bool(
        torch.equal(a[~finite].nan_to_num(0.0), b[~finite].nan_to_num(0.0)))
    err = float((a[finite] - b[finite]).abs().max()) if finite.any() else 0.0
    ok = same_nonfinite and bool(torch.all((a[finite] - b[finite]).abs() <= atol + rtol * b[finite].abs()))
    return err, ok


def compare_with_cpu(model, *inputs, backward=True, atol=1e-4, rtol=1e-4):
    """Runs `model` (on tpu) and a CPU copy of it on the same inputs, forward
    and (with backward=True) backward of the sum of the first output, and
    reports the first module whose output, or the first parameter whose
    gradient, differs beyond atol + rtol * |cpu| (float32 defaults; pass
    looser ones for bfloat16). Returns a CompareReport (print it). The model's
    own gradients are left as they were."""
    import copy

    import torch

    cpu_model = copy.deepcopy(model).to("cpu")
    saved = {n: (p.grad.clone() if p.grad is not None else None) for n, p in model.named_parameters()}
    records = {"tpu": {}, "cpu": {}}
    order = []
    hooks = []
    for which, m in (("tpu", model), ("cpu", cpu_model)):
        for name, mod in m.named_modules():
            def hook(mod, args, out, name=name, which=which):
                records[which][name] = _leaves(out)
                if which == "tpu":
                    order.append(name)
            hooks.append(mod.register_forward_hook(hook))
    try:
        tpu_in = [x.to(next(model.parameters()).device) if isinstance(x, torch.Tensor) else x for x in inputs]
        cpu_in = [x.detach().to("cpu") if isinstance(x, torch.Tensor) else x for x in inputs]
        out_t, out_c = model(*tpu_in), cpu_model(*cpu_in)
        if backward:
            model.zero_grad(set_to_none=True)
            _leaves(out_t)[0].float().sum().backward()
            _leaves(out_c)[0].float().sum().backward()
    finally:
        for h in hooks:
            h.remove()
    outputs = []
    for name in dict.fromkeys(order):  # first call order, each module once
        pairs = list(zip(records["tpu"].get(name, []), records["cpu"].get(name, [])))
        if not pairs:
            continue
        errs = [_err(a, b, atol, rtol) for a, b in pairs]
        outputs.append((name, max(e for e, _ in errs), all(ok for _, ok in errs)))
    grads = []
    if backward:
        cpu_params = dict(cpu_model.named_parameters())
        for n, p in model.named_parameters():
            q = cpu_params.get(n)
            if p.grad is None or q is None or q.grad is None:
                continue
            e, ok = _err(p.grad, q.grad, atol, rtol)
            grads.append((n, e, ok))
        for n, p in model.named_parameters():
            p.grad = saved[n]
    return CompareReport(outputs, grads, atol, rtol)


# --- recompilation explainer ---------------------------------------------------------


def _split_types(sig: str) -> list[str]:
    import re

    return re.findall(r"tensor<[^>]*>", sig)


def _explain(first: str, other: str) -> str:
    a, b = _split_types(first), _split_types(other)
    if a == b:
        return ("same argument and result types: a compile-time value differs (a dim, a constant, an "
                "attribute of the op). Values that change every call compile every call; pass them as tensors")
    shapes = [x.split("x")[:-1] for x in a], [x.split("x")[:-1] for x in b]
    dtypes = [x.rsplit("x", 1)[-1] for x in a], [x.rsplit("x", 1)[-1] for x in b]
    if len(a) == len(b) and dtypes[0] == dtypes[1] and shapes[0] != shapes[1]:
        diff = next(i for i in range(len(a)) if a[i] != b[i])
        return (f"a new shape: {a[diff]} became {b[diff]}. Keep shapes fixed (drop_last=True on DataLoaders, "
                "pad sequences to a few lengths)")
    if len(a) == len(b) and dtypes[0] != dtypes[1]:
        diff = next(i for i in range(len(a)) if dtypes[0][i] != dtypes[1][i])
        return f"a new dtype: {a[diff]} became {b[diff]}. Cast to one dtype before the op"
    return f"a new signature: ({', '.join(a)}) became ({', '.join(b)})"


def compile_report(top: int = 20) -> str:
    """The ops (or fused graphs) that needed more than one program since
    start or the last reset_metrics(), most programs first, each with what
    changed between its first program and each later one (a new shape, a new
    dtype, or a compile-time value) and how to avoid it. Programs loaded from
    the disk cache count (each was a compile once, and is one again on a cold
    cache); the report says how many were compiled in this process. Then
    why functions compiled with backend="tpu" compiled again (a size, an
    optimizer's hyperparameter, a Python number), each with its fix."""
    groups: dict[str, list] = {}
    for name, sig, _digest, ms, _key, tier in _C._compile_records():
        groups.setdefault(name, []).append((sig, ms, tier))
    multi = sorted(((n, r) for n, r in groups.items() if len(r) > 1), key=lambda kv: -len(kv[1]))
    total = sum(len(r) for r in groups.values())
    compiled = sum(1 for r in groups.values() for x in r if x[2] == "compiled")
    lines = [f"torch_tpu compile report: {total} programs ({compiled} compiled here, {total - compiled} loaded from "
             f"the cache), {len(groups)} distinct ops or graphs; {len(multi)} needed more than one"]
    for name, recs in multi[:top]:
        ms = sum(r[1] for r in recs)
        lines.append(f"  {name}: {len(recs)} programs, {ms:.1f} ms of compiling")
        seen = set()
        for sig, _ms, _tier in recs[1:]:
            why = _explain(recs[0][0], sig)
            if why not in seen:
                seen.add(why)
                lines.append(f"    - {why}")
            if len(seen) >= 3:
                break
    if len(multi) > top:
        lines.append(f"  ... and {len(multi) - top} more")
    from torch_tpu import _recompiles

    if _recompiles.causes:
        lines.append('torch.compile(backend="tpu") recompiles, by cause:')
        lines += _recompiles.report()
    return "\n".join(lines)


# --- NaN/Inf detection ---------------------------------------------------------------


def _user_frame():
    import os
    import traceback

    import torch

    here = os.path.dirname(os.path.abspath(__file__))
    torch_dir = os.path.dirname(os.path.abspath(torch.__file__))
    line = None
    for fr in reversed(traceback.extract_stack()[:-1]):  # frames in torch and torch_tpu are skipped below
        f = os.path.abspath(fr.filename)
        if not f.startswith(here) and not f.startswith(torch_dir):
            line = f"{fr.filename}:{fr.lineno} ({fr.line})"
            break
    # Inside backward: name the autograd node, and the forward line that made
    # it when anomaly mode recorded one. (The user's backward() call is on the
    # stack only where backward runs on the calling thread, tpu's default.)
    node = torch._C._current_autograd_node()
    if node is None:
        return line or "<unknown>"
    where = f"the backward of {node.name()}"
    tb = node.metadata.get("traceback_") if hasattr(node, "metadata") else None
    if tb:
        user = [ln for ln in "".join(tb).splitlines() if ln.strip().startswith("File") and
                here not in ln and torch_dir not in ln]
        if user:
            where += f" (forward: {user[-1].strip()})"
    else:
        where += " (torch.autograd.set_detect_anomaly(True) also names the forward line)"
    return where + (f", in the backward called at {line}" if line else "")


def _nan_mode_class():
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    class DetectNaN(TorchDispatchMode):
        """Checks every tpu op's floating outputs; raises at the first NaN or
        Inf, naming the op and the user's line. Each check reads a value back
        (a host sync per op): for debugging, not for speed."""

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in _leaves(out):
                if t.device.type == "tpu" and (t.is_floating_point() or t.is_complex()) and t.numel():
                    if not bool(torch.isfinite(t).all()):
                        bad = "NaN" if bool(torch.isnan(t).any()) else "Inf"
                        raise RuntimeError(f"torch_tpu: {func} produced {bad} (output shape {list(t.shape)}, "
                                           f"{t.dtype}) at {_user_frame()}. TORCH_TPU_DETECT_NAN / "
                                           "torch_tpu.debug.detect_nan() raised at the first such op.")
            return out

    return DetectNaN


def detect_nan():
    """A context manager: inside it, the first tpu op whose output holds NaN
    or Inf raises RuntimeError naming the op and the Python line. Autograd's
    backward ops are checked too. TORCH_TPU_DETECT_NAN=1 turns it on for the
    whole process."""
    return _nan_mode_class()()


_global_nan_mode = None


def _install():
    import os
    global _global_nan_mode
    if os.environ.get("TORCH_TPU_DETECT_NAN", "0") not in ("", "0") and _global_nan_mode is None:
        _global_nan_mode = detect_nan()
        _global_nan_mode.__enter__()
