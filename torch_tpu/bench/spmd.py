"""python -m torch_tpu.bench spmd: the bench's GPT training step under
torch_tpu.spmd, over 1, 2, 4 and 8 XLA:CPU devices of one process, against
JAX ``jit`` with the same mesh and NamedShardings on the same PJRT plugin.

Patterns (the global batch is the same for every mesh):

  dp    batch split on "data", parameters replicated
  fsdp  batch and every parameter (dim 0) split on "data"; the optimizer
        state follows its parameter
  tp    a (1, n) mesh: qkv and fc1 column-split, proj and fc2 row-split on
        "model"
  2d    a (n/2, 2) mesh: dp on "data" x tp on "model"

Each (framework, pattern, devices) runs in a fresh process with an empty
compilation cache: "first step" includes every compile. The collectives
are counted in the module XLA's partitioner produced. The devices share
the machine's cores, so the figures measure overhead against JAX, not
scaling.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

from torch_tpu.bench.train import (
    GPT,
    build,
    jax_model,
    jax_step,
    plugin_path,
    run_child,
    time_compiled_step,
    time_jax,
)

PATTERNS = ["dp", "fsdp", "tp", "2d"]
SMALL = dict(vocab=64, d=32, layers=2, heads=2, seq=16, batch=8)
COLLECTIVES = ("all-reduce", "all-gather", "reduce-scatter", "all-to-all", "collective-permute")


def mesh_of(pattern: str, n: int) -> tuple[tuple, tuple]:
    """(mesh shape, axis names)."""
    if pattern in ("dp", "fsdp"):
        return (n,), ("data",)
    if pattern == "tp" or n < 4:
        return (1, n), ("data", "model")
    return (n // 2, 2), ("data", "model")


def spec_of(pattern: str, name: str, shape: tuple, n: int) -> tuple:
    """The partition spec of parameter `name` ("blocks.0.fc1.weight")."""
    none = (None,) * len(shape)
    if pattern == "fsdp":
        return ("data",) + none[1:] if shape[0] % n == 0 else none
    if pattern in ("tp", "2d"):
        layer, kind = name.split(".")[-2:]
        if layer in ("qkv", "fc1"):
            return ("model",) + none[1:]
        if layer in ("proj", "fc2") and kind == "weight":
            return (None, "model")
    return none


def count_collectives(text: str) -> dict:
    """Collective ops in an HLO module's text (async pairs counted once)."""
    counts = {}
    for op in COLLECTIVES:
        k = len(re.findall(rf"\s{op}(?:-start)?\(", text))
        if k:
            counts[op] = k
    return counts


def count_collectives_proto(proto: bytes) -> dict:
    """The same, in a serialised HloModuleProto: each instruction's opcode is
    its field 2, a length-prefixed string."""
    counts = {}
    for op in COLLECTIVES:
        k = sum(proto.count(b"\x12" + bytes([len(o)]) + o.encode()) for o in (op, op + "-start"))
        if k:
            counts[op] = k
    return counts


def torch_child(pattern: str, n: int, steps: int, warmup: int, windows: int, small: bool) -> dict:
    import numpy as np

    import torch_tpu
    import torch_tpu.spmd as xs

    model, opt, x, y, loss_fn = build("gpt", "tpu", gpt=SMALL if small else None)
    if n > 1:
        shape, names = mesh_of(pattern, n)
        mesh = xs.Mesh(np.arange(n), shape, names)
        for name, p in model.named_parameters():
            spec = spec_of(pattern, name, tuple(p.shape), n)
            if any(spec):
                xs.mark_sharding(p, mesh, spec)
        x, y = xs.shard(x, mesh, ("data", None)), xs.shard(y, mesh, ("data", None))

    res = time_compiled_step(model, opt, loss_fn, x, y, steps, warmup, windows)
    res["collectives"] = count_collectives_proto(torch_tpu._C._spmd_last_program()) if n > 1 else {}
    return res


def jax_child(pattern: str, n: int, steps: int, warmup: int, windows: int, small: bool) -> dict:
    import time

    import jax
    import numpy as np
    from jax._src import xla_bridge
    from jax.sharding import Mesh, NamedSharding
    from jax.sharding import PartitionSpec as P

    xla_bridge.register_plugin("torch_tpu_xla_cpu", priority=500, library_path=plugin_path(),
                               options={"cpu_device_count": n})
    jax.config.update("jax_platforms", "torch_tpu_xla_cpu")
    assert len(jax.devices()) == n, jax.devices()
    params, bufs, loss_fn, x, y = jax_model("gpt", gpt=SMALL if small else None)
    if n == 1:
        step, state = jax_step("gpt", params, loss_fn)
    else:
        shape, names = mesh_of(pattern, n)
        mesh = Mesh(np.array(jax.devices()).reshape(shape), names)

        def sharding(path, leaf):
            keys = [getattr(k, "key", getattr(k, "idx", None)) for k in path]
            # {"blocks": [{"fc1": {"w", "b"}}]} -> "blocks.0.fc1.weight", as torch names it.
            name = ".".join(str(k) for k in keys[:-1]) + "." + {"w": "weight", "b": "bias"}.get(keys[-1], "x")
            return NamedSharding(mesh, P(*spec_of(pattern, name, leaf.shape, n)))

        p_sh = jax.tree_util.tree_map_with_path(sharding, params)
        rep = NamedSharding(mesh, P())
        s_sh = (p_sh, p_sh, rep)
        step, state = jax_step("gpt", params, loss_fn, out_shardings=(p_sh, {}, s_sh, rep))
        params = jax.device_put(params, p_sh)
        state = jax.device_put(state, s_sh)
        x = jax.device_put(x, NamedSharding(mesh, P("data", None)))
        y = jax.device_put(y, NamedSharding(mesh, P("data", None)))
    t0 = time.perf_counter()  # the first step's time includes the compile, as torch_tpu's does
    collectives = count_collectives(step.lower(params, bufs, state, x, y).compile().as_text()) if n > 1 else {}
    # One step in flight at a time over several devices: with more queued,
    # XLA:CPU's partitions of different launches took every worker thread
    # and its collective rendezvous aborted the process (torch_tpu's runtime
    # keeps one SPMD launch in flight for the same reason).
    return dict(collectives=collectives, **time_jax(step, params, bufs, state, x, y, steps, warmup, windows, t0,
                                                    sync=n > 1))


def measure(framework: str, pattern: str, n: int, a) -> dict | None:
    args = [framework, pattern, n, a.steps, a.warmup, a.windows, int(a.small)]
    return run_child("torch_tpu.bench.spmd", args, f"{framework}/{pattern}/{n}", TORCH_TPU_NUM_CPU_DEVICES=str(n))


def table(results: list) -> str:
    lines = ["| pattern | devices | torch_tpu steps/s | JAX steps/s | ratio | first step torch / JAX (s) | "
             "collectives torch_tpu | collectives JAX |", "|---|---|---|---|---|---|---|---|"]
    for r in results:
        t, j = r["torch"], r["jax"]

        def rate(x):
            return f"{x['steps_per_s']:.2f}" if x else "failed"

        def first(x):
            return f"{x['first_step_s']:.2f}" if x else "-"

        def fmt(x):
            return (", ".join(f"{k} {v}" for k, v in sorted(x["collectives"].items())) or "none") if x else "-"
        ratio = f"{t['steps_per_s'] / j['steps_per_s']:.2f}x" if t and j else "-"
        lines.append(f"| {r['pattern']} | {r['devices']} | {rate(t)} | {rate(j)} | {ratio} | {first(t)} / {first(j)}"
                     f" | {fmt(t)} | {fmt(j)} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", default="1,2,4,8")
    ap.add_argument("--patterns", default=",".join(PATTERNS))
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--small", action="store_true", help=f"a tiny GPT ({SMALL}) instead of the bench's ({GPT})")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        fw, pattern, n, steps, warmup, windows, small = a.child
        fn = torch_child if fw == "torch" else jax_child
        res = fn(pattern, int(n), int(steps), int(warmup), int(windows), bool(int(small)))
        print("RESULT " + json.dumps(res))
        return
    from tqdm import tqdm

    jobs = []
    for n in (int(d) for d in a.devices.split(",")):
        # One device has no layout to choose: one row.
        for pattern in (["-"] if n == 1 else a.patterns.split(",")):
            jobs.append((pattern, n))
    results = []
    for pattern, n in tqdm(jobs, desc="spmd bench", unit="config"):
        results.append(dict(pattern=pattern, devices=n, torch=measure("torch", pattern, n, a),
                            jax=measure("jax", pattern, n, a)))
    print(f"GPT {'(small) ' if a.small else ''}training step, {os.cpu_count()} CPU cores, XLA:CPU plugin "
          f"{os.path.basename(plugin_path())}")
    print(table(results))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(small=a.small, cpus=os.cpu_count(), results=results), f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
