"""Eager per-op latency on compile-cache hits: tpu (XLA:CPU via PJRT) next to
PyTorch CPU eager, in one run. Prints medians and ratios.

    python -m torch_tpu.bench ops [--iters 2000] [--repeats 7]
    (also: python bench/eager_op_latency.py ...)

Each figure is the median over `repeats` of (time for `iters` calls) / iters,
measured after warm-up. tpu calls are asynchronous; the timed loop ends with
torch.tpu.synchronize(), so the figure includes finishing the work. Where JAX
is installed, the same ops in JAX's eager dispatch run beside them, in a
child process on torch_tpu's own plugin (the timed loop ends with
block_until_ready on the last result).
"""
from __future__ import annotations

import argparse
import json
import platform
import statistics
import time

import torch

import torch_tpu


def per_call_us(fn, iters: int, repeats: int, sync) -> float:
    for _ in range(50):
        fn()
    sync()
    if sync is torch.tpu.synchronize:
        torch_tpu.cache.wait_background_compiles()  # time the full programs
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        times.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(times)


def _cases(a1, b1, a3, b3, m1, m2):
    """The timed ops, on arrays of either library."""
    return {
        "add (1 float)": lambda: a1 + b1,
        "add (1,000 floats)": lambda: a3 + b3,
        "add scalar (1,000)": lambda: a3 + 0.5,
        "matmul 64x64": lambda: m1 @ m2,
        "sum (1,000)": lambda: a3.sum(),
    }


def cases(device):
    return _cases(*(torch.randn(*shape, device=device) for shape in ((1,), (1,), (1000,), (1000,), (64, 64),
                                                                     (64, 64))))


def jax_cases():
    import jax

    keys = jax.random.split(jax.random.PRNGKey(0), 6)
    return _cases(*(jax.random.normal(k, shape) for k, shape in zip(keys, ((1,), (1,), (1000,), (1000,), (64, 64),
                                                                              (64, 64)))))


def jax_child(iters: int, repeats: int) -> None:
    from torch_tpu.bench.train import use_plugin_for_jax

    use_plugin_for_jax()
    out = {}
    for name, fn in jax_cases().items():
        last = []

        def call(fn=fn, last=last):
            last[:] = [fn()]

        out[name] = per_call_us(call, iters, repeats, lambda last=last: last[0].block_until_ready())
    print("RESULT " + json.dumps(out))


def jax_column(iters: int, repeats: int) -> dict:
    """JAX eager per-op figures on torch_tpu's plugin (a child process), or {}."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("jax") is None:
        return {}
    r = subprocess.run([sys.executable, "-m", "torch_tpu.bench.ops", "--jax-child", "--iters", str(iters),
                        "--repeats", str(repeats)], capture_output=True, text=True)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    return {}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iters", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--jax-child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.jax_child:
        jax_child(a.iters, a.repeats)
        return
    print(f"machine: {platform.machine()}, {torch.get_num_threads()} torch threads; "
          f"tpu = {torch.tpu.get_device_name()}")
    tpu_cases, cpu_cases = cases("tpu"), cases("cpu")
    rows = []
    for name in tpu_cases:
        t = per_call_us(tpu_cases[name], a.iters, a.repeats, torch.tpu.synchronize)
        c = per_call_us(cpu_cases[name], a.iters, a.repeats, lambda: None)
        rows.append((name, t, c))
    jax = jax_column(a.iters, a.repeats)
    print(f"\n{'op':<22}{'tpu µs':>10}{'cpu µs':>10}{'tpu/cpu':>10}{'JAX µs':>10}{'tpu/JAX':>10}")
    for name, t, c in rows:
        j = jax.get(name)
        jcols = f"{j:>10.1f}{t / j:>9.2f}x" if j else f"{'-':>10}{'-':>10}"
        print(f"{name:<22}{t:>10.1f}{c:>10.1f}{t / c:>9.1f}x{jcols}")
    print("\ntarget: <= 20 µs median per small op on tpu (XLA:CPU) after warm-up")


if __name__ == "__main__":
    main()
