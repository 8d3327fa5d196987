"""python -m torch_tpu.bench depth: the bench's GPT training step compiled
with torch.compile(backend="tpu") at several depths, its blocks unrolled
(a Python loop over nn.Sequential), as one loop over weights stacked at
every call (torch_tpu.scan_layers), and as one loop over weights held
stacked (torch_tpu.ScannedLayers, the optimizer stepping the stacks).

Per (depth, form), in a fresh process with an empty compilation cache: the
first step's time (tracing plus every compile), steps/s (median of timed
windows), the programs compiled and the ops recorded for the first step.
Unrolled, every block is in the program and XLA compiles each; scanned, the
block is one loop body, so compile time should not grow with depth.

  python -m torch_tpu.bench depth [--depths 2,24] [--small] [--steps N]
"""
from __future__ import annotations

import argparse
import json
import os
import sys

SMALL = dict(vocab=64, d=64, layers=2, heads=2, seq=32, batch=8)


def torch_child(depth: int, form: str, steps: int, warmup: int, windows: int, small: bool) -> dict:
    import torch

    import torch_tpu
    from torch_tpu.bench.train import GPT, build, time_compiled_step

    sizes = dict(SMALL if small else GPT, layers=depth)
    model, opt, x, y, loss_fn = build("gpt", "tpu", gpt=sizes)
    if form == "scan":
        blocks = list(model.blocks)
        model.blocks.forward = lambda h: torch_tpu.scan_layers(blocks, h)
    elif form == "stacked":
        model.blocks = torch_tpu.ScannedLayers(model.blocks)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)  # as build() makes it, over the stacks
    return time_compiled_step(model, opt, loss_fn, x, y, steps, warmup, windows)


FORMS = {"unrolled": "unrolled", "scan": "scan_layers", "stacked": "ScannedLayers"}


def table(results: list) -> str:
    """The markdown table of `results` (also rendered into docs/benchmarks.md
    by tools/bench_tables.py, which loads this file without torch)."""
    by = {(r["depth"], r["form"]): r for r in results if r.get("steps_per_s")}
    depths = sorted({r["depth"] for r in results})
    forms = [f for f in FORMS if any(r["form"] == f for r in results)]
    head = ["depth"] + [f"{FORMS[f]}: first step (s)" for f in forms] + [f"{FORMS[f]}: steps/s" for f in forms]
    head += [f"{FORMS[f]} / unrolled speed" for f in forms if f != "unrolled"] + ["ops recorded (first step)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]

    def f(r, k, fmt):
        return format(r[k], fmt) if r else "failed"

    for d in depths:
        rs = {form: by.get((d, form)) for form in forms}
        u = rs.get("unrolled")
        cells = [str(d)] + [f(rs[x], "first_step_s", ".1f") for x in forms]
        cells += [f(rs[x], "steps_per_s", ".2f") for x in forms]
        cells += [f"{rs[x]['steps_per_s'] / u['steps_per_s']:.2f}" if u and rs[x] else "-"
                  for x in forms if x != "unrolled"]
        cells.append(" / ".join(str(rs[x]["ops_first_step"]) if rs[x] else "-" for x in forms))
        lines.append("| " + " | ".join(cells) + " |")
    lo, hi = min(depths), max(depths)
    for form in forms if lo != hi else ():
        a, b = by.get((lo, form)), by.get((hi, form))
        if a and b:
            lines.append(f"\n{FORMS[form]}: first step at depth {hi} is "
                         f"{b['first_step_s'] / a['first_step_s']:.2f}x that at depth {lo}")
    return "\n".join(lines)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m torch_tpu.bench depth", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    ap.add_argument("--depths", default="2,24", help="comma-separated block counts (default 2,24)")
    ap.add_argument("--small", action="store_true", help="a small GPT (d 64, seq 32) for a quick run")
    ap.add_argument("--steps", type=int, default=5, help="steps per timed window (default 5)")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--out", default=None, help="directory for depth.json (default bench/results)")
    a = ap.parse_args(argv)
    from torch_tpu.bench.train import default_out, machine, run_child

    if a.child:
        depth, form, steps, warmup, windows, small = a.child
        res = torch_child(int(depth), form, int(steps), int(warmup), int(windows), small == "1")
        print("RESULT " + json.dumps(res))
        return
    results = []
    for depth in (int(d) for d in a.depths.split(",")):
        for form in FORMS:
            print(f"depth {depth}, {form} ...", file=sys.stderr, flush=True)
            r = run_child("torch_tpu.bench.depth", [depth, form, a.steps, a.warmup, a.windows, int(a.small)],
                          f"depth {depth}/{form}")
            results.append(dict(depth=depth, form=form, **(r or {})))
    text = table(results)
    print(text)
    out = a.out or default_out()
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "depth.json"), "w") as f:
        json.dump(dict(machine=machine(), small=a.small, results=results), f, indent=1)


if __name__ == "__main__":
    main()
