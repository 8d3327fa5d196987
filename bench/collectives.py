"""Collective latency and bus bandwidth across 2 ranks: the "tpu" process
group on tpu tensors against PyTorch's Gloo on CPU tensors, side by side in
one run.

    python bench/collectives.py [--nproc 2] [--max-mb 64] [--rounds 5] [--out bench/results]

It re-launches itself under torchrun. For all_reduce and all_gather from
1 KB to --max-mb it reports the time per call (the median of --rounds
rounds that alternate tpu and Gloo) and the bus bandwidth
(NCCL-tests' definition: all_reduce moves 2(n-1)/n of the buffer per rank,
all_gather (n-1)/n of the output), and the tpu/Gloo time ratio. Writes
collectives.json and collectives.png to --out.

Then, in one process with two devices, the same two collectives as single
StableHLO programs (torch.tpu.comm, one replica per device) against JAX's
shard_map psum / all_gather on the same XLA:CPU plugin (JAX is optional:
requirements-bench.txt), each in its own fresh process.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _time(fn, sync, iters):
    # A fixed count, the same on every rank (a time budget would let the ranks
    # disagree on how many collectives to call, and hang).
    fn()
    sync()  # warm-up (and, for tpu, the first compile of the copy programs)
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    sync()
    return (time.perf_counter() - t0) / iters


def rank_main(args):
    import torch
    import torch.distributed as dist

    import torch_tpu  # noqa: F401
    import torch_tpu.distributed as tpu_dist

    check = tpu_dist._CHECK
    dist.init_process_group("tpu")
    gloo = dist.new_group(backend="gloo")
    world = dist.get_world_size()
    rows = []
    sizes = _sizes(args.max_mb)
    for op in ("all_reduce", "all_gather"):
        for nbytes in sizes:
            n = nbytes // 4
            row = {"op": op, "bytes": nbytes}
            cases = []
            for name, device, group in (("tpu", "tpu", None), ("tpu_nocheck", "tpu", None), ("gloo_cpu", "cpu", gloo)):
                x = torch.ones(n, device=device)
                if op == "all_reduce":
                    def fn(x=x, group=group):
                        dist.all_reduce(x, group=group)
                    moved = 2 * (world - 1) / world * nbytes
                else:
                    out = torch.empty(n * world, device=device)

                    def fn(x=x, out=out, group=group):
                        dist.all_gather_into_tensor(out, x, group=group)
                    moved = (world - 1) / world * nbytes * world

                def sync(device=device, group=group):
                    if device == "tpu":
                        torch.tpu.synchronize()
                    dist.barrier(group=gloo)
                cases.append((name, fn, sync, moved))
            # Rounds alternate tpu and Gloo, and each side reports its median
            # round: this VM's speed drifts by tens of percent over seconds,
            # and a single back-to-back pair turns that drift into the ratio.
            times = {name: [] for name, *_ in cases}
            for _ in range(args.rounds):
                for name, fn, sync, moved in cases:
                    # tpu_nocheck: without the cross-rank shape check that the
                    # tpu group runs before each collective by default (one
                    # small Gloo all-reduce; TORCH_TPU_DIST_CHECK=0).
                    tpu_dist._CHECK = check and name != "tpu_nocheck"
                    t = _time(fn, sync, iters=max(3, min(100, 2**25 // nbytes)))
                    tpu_dist._CHECK = check
                    # Ranks agree on the slowest rank's time.
                    tt = torch.tensor([t])
                    dist.all_reduce(tt, op=dist.ReduceOp.MAX, group=gloo)
                    times[name].append(float(tt))
            for name, fn, sync, moved in cases:
                t = statistics.median(times[name])
                row[f"{name}_us"] = t * 1e6
                row[f"{name}_busbw_gbs"] = moved / t / 1e9
                row[f"{name}_us_rounds"] = [v * 1e6 for v in times[name]]
            row["ratio"] = row["tpu_us"] / row["gloo_cpu_us"]
            row["ratio_nocheck"] = row["tpu_nocheck_us"] / row["gloo_cpu_us"]
            rows.append(row)
            if dist.get_rank() == 0:
                print(f"{op:10s} {nbytes / 1024:10.0f} KiB  tpu {row['tpu_us']:9.1f} us  "
                      f"gloo {row['gloo_cpu_us']:9.1f} us  ratio {row['ratio']:.2f}", flush=True)
    if dist.get_rank() == 0:
        with open(os.path.join(args.out, "collectives.json"), "w") as f:
            json.dump({"world": world, "rounds": args.rounds, "rows": rows}, f, indent=1)
    dist.destroy_process_group()


def _sizes(max_mb):
    sizes, s = [], 1024
    while s <= max_mb * 2**20:
        sizes.append(s)
        s *= 4
    return sizes


def in_process_main(args):
    """One process, two devices: torch.tpu.comm or JAX; prints one JSON line."""
    world = 2
    if args.in_process == "tpu":
        import torch

        import torch_tpu  # noqa: F401
        assert torch.tpu.device_count() >= world, "needs TORCH_TPU_NUM_CPU_DEVICES=2"

        def setup(op, n):
            xs = [torch.ones(n, device=f"tpu:{i}") for i in range(world)]
            if op == "all_reduce":
                return lambda: torch.tpu.comm.all_reduce(xs), torch.tpu.synchronize
            return lambda: torch.tpu.comm.all_gather(xs), torch.tpu.synchronize
    else:
        import jax
        import numpy as np
        from jax import lax
        from jax._src import xla_bridge
        from jax.sharding import Mesh, NamedSharding
        from jax.sharding import PartitionSpec as P

        from torch_tpu.bench.train import plugin_path
        xla_bridge.register_plugin("torch_tpu_xla_cpu", priority=500, library_path=plugin_path(),
                                   options={"cpu_device_count": world})
        jax.config.update("jax_platforms", "torch_tpu_xla_cpu")
        mesh = Mesh(np.array(jax.devices()[:world]), ("i",))

        def setup(op, n):
            body = (lambda v: lax.psum(v, "i")) if op == "all_reduce" else (
                lambda v: lax.all_gather(v, "i", tiled=True))
            f = jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P("i"), out_specs=P("i")))
            x = jax.device_put(np.ones(n * world, np.float32), NamedSharding(mesh, P("i")))
            last = []

            def fn():
                # One launch in flight, as torch.tpu.comm does: with more,
                # this plugin's replicas starve each other and XLA aborts.
                if last:
                    last[0].block_until_ready()
                last[:] = [f(x)]
            return fn, lambda: last[0].block_until_ready()
    rows = []
    for op in ("all_reduce", "all_gather"):
        for nbytes in _sizes(args.max_mb):
            fn, sync = setup(op, nbytes // 4)
            t = _time(fn, sync, iters=max(3, min(100, 2**25 // nbytes)))
            rows.append({"op": op, "bytes": nbytes, "us": t * 1e6})
    print("ROWS " + json.dumps(rows), flush=True)


def run_in_process(args, who):
    env = dict(os.environ, TORCH_TPU_NUM_CPU_DEVICES="2", OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--in-process", who, "--max-mb", str(args.max_mb)],
                       env=env, capture_output=True, text=True)
    for line in p.stdout.splitlines():
        if line.startswith("ROWS "):
            return json.loads(line[5:])
    print(f"{who}: no result ({p.stderr.strip().splitlines()[-1:] or p.returncode})")
    return None


def report(args):
    with open(os.path.join(args.out, "collectives.json")) as f:
        data = json.load(f)
    rows = data["rows"]
    print(f"\n{data['world']} ranks; time per call (us, median of {data.get('rounds', 1)} alternating rounds), "
          "bus bandwidth (GB/s), tpu / Gloo-on-CPU time ratio\n")
    print("| op | size | tpu us | tpu us, no shape check | Gloo CPU us | tpu GB/s | Gloo GB/s | tpu / Gloo "
          "| no check / Gloo |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        size = f"{r['bytes'] // 1024} KiB" if r["bytes"] < 2**20 else f"{r['bytes'] // 2**20} MiB"
        nc = f"{r['tpu_nocheck_us']:.0f}" if "tpu_nocheck_us" in r else "-"
        print(f"| {r['op']} | {size} | {r['tpu_us']:.0f} | {nc} | "
              f"{r['gloo_cpu_us']:.0f} | {r['tpu_busbw_gbs']:.2f} | {r['gloo_cpu_busbw_gbs']:.2f} | "
              f"{r['ratio']:.2f} | {r.get('ratio_nocheck', float('nan')):.2f} |")
    inp = data.get("in_process")
    if inp:
        has_jax = any("jax_us" in r for r in inp)
        print("\nOne process, 2 devices: torch.tpu.comm (one StableHLO program per call)"
              + (" against JAX shard_map on the same plugin" if has_jax else "") + "\n")
        print("| op | size | tpu.comm us | tpu.comm GB/s |" + (" JAX us | tpu.comm / JAX |" if has_jax else ""))
        print("|---|---|---|---|" + ("---|---|" if has_jax else ""))
        for r in inp:
            size = f"{r['bytes'] // 1024} KiB" if r["bytes"] < 2**20 else f"{r['bytes'] // 2**20} MiB"
            line = f"| {r['op']} | {size} | {r['tpu_us']:.0f} | {r['tpu_busbw_gbs']:.2f} |"
            if has_jax:
                line += f" {r['jax_us']:.0f} | {r['tpu_us'] / r['jax_us']:.2f} |" if "jax_us" in r else " - | - |"
            print(line)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, op in zip(axes, ("all_reduce", "all_gather")):
        rs = [r for r in rows if r["op"] == op]
        xs = [r["bytes"] for r in rs]
        ax.loglog(xs, [r["tpu_busbw_gbs"] for r in rs], "o-", label="tpu (staged through Gloo)")
        if rs and "tpu_nocheck_busbw_gbs" in rs[0]:
            ax.loglog(xs, [r["tpu_nocheck_busbw_gbs"] for r in rs], "d-.", label="tpu, no shape check")
        ax.loglog(xs, [r["gloo_cpu_busbw_gbs"] for r in rs], "s--", label="Gloo, CPU tensors")
        ip = [r for r in (inp or []) if r["op"] == op]
        if ip:
            ax.loglog([r["bytes"] for r in ip], [r["tpu_busbw_gbs"] for r in ip], "^-",
                      label="torch.tpu.comm, 1 process, 2 devices")
        if ip and "jax_busbw_gbs" in ip[0]:
            ax.loglog([r["bytes"] for r in ip], [r["jax_busbw_gbs"] for r in ip], "v:",
                      label="JAX shard_map, 1 process, 2 devices")
        ax.set_title(f"{op}, {data['world']} ranks")
        ax.set_xlabel("bytes per rank")
        ax.set_ylabel("bus bandwidth (GB/s)")
        ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(args.out, "collectives.png"), dpi=100)
    print(f"\nwrote {os.path.join(args.out, 'collectives.png')}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--max-mb", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5, help="alternating tpu/Gloo rounds per size (median reported)")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--in-process", choices=("tpu", "jax"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.rank:
        rank_main(args)
        return
    if args.in_process:
        in_process_main(args)
        return
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={args.nproc}",
           os.path.abspath(__file__), "--rank", "--max-mb", str(args.max_mb), "--rounds", str(args.rounds),
           "--out", args.out]
    subprocess.run(cmd, check=True, env=dict(os.environ, OMP_NUM_THREADS="1"))
    # The in-process comparison, each side in a fresh process.
    tpu_rows = run_in_process(args, "tpu")
    try:
        import jax  # noqa: F401
        jax_rows = run_in_process(args, "jax")
    except ImportError:
        jax_rows = None
    if tpu_rows:
        path = os.path.join(args.out, "collectives.json")
        with open(path) as f:
            data = json.load(f)
        for i, r in enumerate(tpu_rows):
            moved = (2 * (2 - 1) / 2 if r["op"] == "all_reduce" else 1.0) * r["bytes"]
            r["tpu_us"] = r.pop("us")
            r["tpu_busbw_gbs"] = moved / (r["tpu_us"] / 1e6) / 1e9
            if jax_rows:
                r["jax_us"] = jax_rows[i]["us"]
                r["jax_busbw_gbs"] = moved / (r["jax_us"] / 1e6) / 1e9
        data["in_process"] = tpu_rows
        with open(path, "w") as f:
            json.dump(data, f, indent=1)
    report(args)


if __name__ == "__main__":
    main()
