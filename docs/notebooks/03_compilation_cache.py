import marimo

__generated_with = "0.25.2"
app = marimo.App(width="medium")


@app.cell
def _():
    import marimo as mo

    return (mo,)


@app.cell
def _(mo):
    mo.md(r"""
    # 3. The compilation cache

    Every program torch_tpu runs (one op in strict eager, a fused graph, a
    `torch.compile` graph) is compiled by XLA once and then cached. The cache has
    three tiers, looked up in this order:

    1. **memory**: inside the running process. A hit costs almost nothing.
    2. **disk**: `TORCH_TPU_CACHE_DIR`, by default `~/.cache/torch_tpu`. It
       survives restarts, so a second run of the same script compiles nothing.
    3. **shared**: `TORCH_TPU_SHARED_CACHE_DIR`, an optional directory several
       processes or machines can use (for example on NFS).

    A hit in a slower tier also fills the faster ones. A full miss compiles, and
    the result is written to disk in the background. The on-disk key includes
    the torch_tpu build, the PJRT plugin and the host CPU, so a stale entry is
    never loaded; it just misses.
    """)
    return


@app.cell
def _():
    import json
    import os
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    import matplotlib.pyplot as plt
    import torch

    import torch_tpu

    return json, os, plt, shutil, subprocess, sys, tempfile, time, torch, torch_tpu


@app.cell
def _(mo):
    mo.md(r"""
    ## The memory tier, in this process

    `torch_tpu.cache.settings()` shows where the persistent tiers live and
    `torch_tpu.cache.stats()` counts requests and hits per tier. Running an op
    on a new shape twice: the first call misses memory (and then finds the
    program on disk, or compiles it); the second is a memory hit.
    """)
    return


@app.cell
def _(torch, torch_tpu):
    print("settings:", torch_tpu.cache.settings())
    for _i in range(2):
        _before = torch_tpu.cache.stats()["memory"]
        (torch.ones(3, 11, device="tpu") * 2).cpu()
        _after = torch_tpu.cache.stats()["memory"]
        _hits, _misses = _after["hits"] - _before["hits"], _after["misses"] - _before["misses"]
        print(f"call {_i + 1}: memory hits +{_hits}, misses +{_misses}")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Cold start vs warm start

    To see the disk tier at work we need fresh processes. The script below
    builds a small MLP and runs one AdamW training step, then prints what the
    metrics and cache statistics saw. We run it three times, each in a new Python
    process (`sys.executable -c ...`):

    - **cold**: `TORCH_TPU_CACHE_DIR` points at a new, empty temporary directory;
    - **warm**: the same directory again, now filled by the cold run;
    - **shared only**: a second empty disk directory, with the first one given as
      `TORCH_TPU_SHARED_CACHE_DIR`; programs come from the shared tier;
    - **cold, serial**: cold again, with `TORCH_TPU_COMPILE_THREADS=0`. By default
      a new op's program compiles on a pool of compile threads while the next ops
      go on recording (*compile-ahead*), so a cold step's programs compile on every
      core at once; this run compiles them one after another, as before.
    """)
    return


@app.cell
def _(json, os, subprocess, sys, time):
    CHILD = r"""
    import json, time
    import torch, torch_tpu
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10)).to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 32).to("tpu"), torch.randint(0, 10, (16,)).to("tpu")
    t0 = time.perf_counter()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    loss.item()
    t1 = time.perf_counter()
    torch_tpu.cache.flush()  # wait for the background disk writes
    m, st = torch_tpu.debug.metrics(), torch_tpu.cache.stats()
    print(json.dumps({"first step (s)": t1 - t0, "compiles": m["compiles"], "compile ms": m["compile_ms"],
                      "load ms": st["load_ms"], "disk hits": st["disk"]["hits"],
                      "shared hits": st.get("shared", {}).get("hits", 0), "disk writes": st["disk"]["writes"]}))
    """.replace("\n    ", "\n")

    def run_child(label, **env):
        _t = time.perf_counter()
        _env = {k: v for k, v in os.environ.items() if not k.startswith("TORCH_TPU_")}  # start clean
        _p = subprocess.run(
            [sys.executable, "-c", CHILD], env={**_env, **env}, capture_output=True, text=True, check=True
        )
        _row = json.loads(_p.stdout.strip().splitlines()[-1])
        return {
            "run": label,
            **{k: round(v, 3) for k, v in _row.items()},
            "process (s)": round(time.perf_counter() - _t, 2),
        }

    return (run_child,)


@app.cell
def _(run_child, tempfile):
    cache_a = tempfile.mkdtemp(prefix="tpu_cache_a_")
    cache_b = tempfile.mkdtemp(prefix="tpu_cache_b_")
    cache_c = tempfile.mkdtemp(prefix="tpu_cache_c_")
    runs = [
        run_child("cold", TORCH_TPU_CACHE_DIR=cache_a),
        run_child("warm", TORCH_TPU_CACHE_DIR=cache_a),
        run_child("shared only", TORCH_TPU_CACHE_DIR=cache_b, TORCH_TPU_SHARED_CACHE_DIR=cache_a),
        run_child("cold, serial", TORCH_TPU_CACHE_DIR=cache_c, TORCH_TPU_COMPILE_THREADS="0"),
    ]
    return cache_a, cache_b, runs


@app.cell
def _(mo, runs):
    _speedup = runs[0]["first step (s)"] / max(runs[1]["first step (s)"], 1e-9)
    mo.vstack(
        [
            mo.ui.table(runs, selection=None),
            mo.md(
                f"The warm run compiled **{runs[1]['compiles']}** programs (cold: {runs[0]['compiles']}) "
                f"and loaded {runs[1]['disk hits']} from disk instead; its first step was "
                f"**{_speedup:.1f}×** faster. Most of the rest of a process's time is importing torch. "
                f"Compiling cold misses ahead on the pool took {runs[0]['first step (s)']:.2f} s against "
                f"{runs[3]['first step (s)']:.2f} s one after another, for the same "
                f"{runs[0]['compiles']} programs (on a 2-core machine; more cores gain more)."
            ),
        ]
    )
    return


@app.cell
def _(plt, runs):
    _fig, (_a1, _a2) = plt.subplots(1, 2, figsize=(9, 3.5))
    _labels = [r["run"] for r in runs]
    _b = _a1.bar(_labels, [r["first step (s)"] for r in runs], color=["C3", "C2", "C0", "C1"])
    _a1.bar_label(_b, fmt="%.2f s")
    _a1.set_ylim(0, 1.25 * max(r["first step (s)"] for r in runs))
    _a1.set_title("first training step")
    _a1.set_ylabel("seconds")
    _x = range(len(runs))
    _a2.bar([i - 0.2 for i in _x], [r["compiles"] for r in runs], width=0.4, label="compiled")
    _a2.bar([i + 0.2 for i in _x], [r["disk hits"] + r["shared hits"] for r in runs], width=0.4, label="loaded")
    _a2.set_xticks(list(_x), _labels)
    _a2.set_title("programs compiled vs loaded from cache")
    _a2.set_ylim(0, 1.4 * max(r["compiles"] + r["disk hits"] + r["shared hits"] for r in runs))
    _a2.legend(loc="upper center", ncols=2)
    _fig.tight_layout()
    _fig
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## The command line: `python -m torch_tpu.cache`

    The same module inspects and trims the cache from a shell. It reads
    `TORCH_TPU_CACHE_DIR` like the library, so here we point it at the
    temporary directories. `info` sums up a tier, `list` shows one line per
    program, `prune --max-bytes N` trims the least recently used entries and
    `clear` empties it; `--tier shared` selects the shared tier. (For the
    counters of a running process, use `torch_tpu.cache.stats()` from Python.)
    """)
    return


@app.cell
def _(cache_a, cache_b, mo, os, subprocess, sys):
    def _cli(args, cache_dir):
        return subprocess.Popen(
            [sys.executable, "-m", "torch_tpu.cache", *args],
            env=dict(os.environ, TORCH_TPU_CACHE_DIR=cache_dir),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    # Four independent commands: start them together, then collect the output.
    _cmds = [(["--help"], cache_a), (["info"], cache_a), (["list"], cache_a), (["clear"], cache_b)]
    _procs = [(_args, _cli(_args, _d)) for _args, _d in _cmds]
    cli_out = [f"$ python -m torch_tpu.cache {' '.join(_a)}\n{_p.communicate()[0]}" for _a, _p in _procs]
    mo.plain_text("\n".join(cli_out))
    return (cli_out,)


@app.cell
def _(cache_a, cache_b, cli_out, shutil):
    # Tidy up the temporary directories once the CLI cell has used them.
    for _d in (cache_a, cache_b):
        shutil.rmtree(_d, ignore_errors=True)
    print(f"removed 2 temporary cache directories ({len(cli_out)} CLI calls shown above)")
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Settings and good habits

    | Environment variable | Python | Default |
    |---|---|---|
    | `TORCH_TPU_CACHE_DIR` | `torch_tpu.cache.set_cache_dir(path)` | `~/.cache/torch_tpu`; `disabled` turns it off |
    | `TORCH_TPU_SHARED_CACHE_DIR` | `torch_tpu.cache.set_shared_cache_dir(path)` | unset |
    | `TORCH_TPU_CACHE_MAX_BYTES` | `torch_tpu.cache.set_max_bytes(n)` | 4 GiB per tier, least recently used pruned |

    - Disk writes happen in the background and are flushed when Python exits.
      A notebook kernel may be stopped without running exit handlers, so call
      `torch_tpu.cache.flush()` at the end of a notebook (the next cell does).
    - Broken or truncated files are detected, deleted and recompiled; an
      unwritable directory turns that tier off with a warning.
    - `TORCH_TPU_LOG_LEVEL=DEBUG` prints why each disk lookup missed.
    """)
    return


@app.cell
def _(torch_tpu):
    torch_tpu.cache.flush()
    return


if __name__ == "__main__":
    app.run()
