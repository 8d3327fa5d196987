"""Counters and readable reports: torch_tpu.debug.metrics(), metrics_report()."""
from __future__ import annotations

from torch_tpu import _C


def metrics() -> dict:
    """Counters since start (or the last reset_metrics()).

    Keys: ops_dispatched, compiles, compile_ms, cache_hits, cache_misses,
    executions, h2d_transfers, h2d_bytes, d2h_transfers, d2h_bytes,
    sync_points (kernels that read device values on the host), key_checks
    (cache hits re-verified under TORCH_TPU_CHECK_KEYS=1), fallbacks (dict
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
    _C._reset_metrics()


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
