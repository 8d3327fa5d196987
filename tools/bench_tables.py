"""Writes the benchmark tables of docs/benchmarks.md from bench/results/*.json.

    python -m tools.bench_tables [--check]

Each table sits between ``<!-- BEGIN <name> -->`` and ``<!-- END <name> -->``
in docs/benchmarks.md and is rendered from bench/results/<name>.json, as the
bench last wrote it (with the machine it ran on). ``--check`` exits 1 when
the file is not what the results give.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
RESULTS = os.path.join(ROOT, "bench", "results")
MODELS = {"mlp-demo": "MLP 32-128-128-10, batch 64, AdamW", "mlp": "MLP 784-512-512-10, batch 128, SGD",
          "gpt": "GPT decoder 4 layers, d 256, seq 128, batch 8, AdamW",
          "resnet18": "torchvision ResNet-18, 32x32, batch 16, SGD"}



def _same_as_cpu(equal) -> str:
    """A generate run's tokens against cpu-eager's: '-' when cpu-eager did not run."""
    return "-" if equal is None else ("yes" if equal else "no")

def _ratio(a, b) -> str:
    return f"{a / b:.2f}x" if a and b else "-"


def _rate(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.1f}"


def train_step(data: dict) -> str:
    results = data["results"]
    rounds = max((len((r or {}).get("steps_per_s_runs") or [1]) for m in results.values() for r in m.values()),
                 default=1)
    which = "one round" if rounds == 1 else f"the median of {rounds} interleaved rounds (of an even count, the " \
        "slower middle one), with the range over the rounds beside it"
    lines = [f"Machine: {data.get('machine', 'unknown')}; {which}. Ratios are of steps/s in the same run.", ""]
    for model, modes in results.items():
        lines += [f"**{model}**: {MODELS.get(model, model)}", "",
                  "| mode | steps/s (range) | first step s | vs strict | vs JAX, same plugin | vs jaxlib's JAX "
                  "| vs PyTorch CPU | programs |", "|---|---|---|---|---|---|---|---|"]
        sps = {m: (r or {}).get("steps_per_s") for m, r in modes.items()}
        for mode, r in modes.items():
            if not r:
                lines.append(f"| {mode} | failed | | | | | | |")
                continue
            runs = r.get("steps_per_s_runs")
            spread = f" ({_rate(min(runs))}-{_rate(max(runs))})" if runs else ""
            lines.append(f"| {mode} | {_rate(r['steps_per_s'])}{spread} | {r['first_step_s']:.2f} | "
                         f"{_ratio(r['steps_per_s'], sps.get('tpu-strict'))} | "
                         f"{_ratio(r['steps_per_s'], sps.get('jax-jit'))} | "
                         f"{_ratio(r['steps_per_s'], sps.get('jax-jit-bundled'))} | "
                         f"{_ratio(r['steps_per_s'], sps.get('cpu-eager'))} | {r.get('compiles', '-')} |")
        lines.append("")
    return "\n".join(lines).rstrip()


def generate(data: dict) -> str:
    lines = ["| batch | mode | cold call s | programs | TTFT ms | decode tokens/s | vs strict | vs Inductor "
             "| new lengths: s | programs | tokens = CPU |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for batch, modes in data.items():
        strict = (modes.get("tpu-strict") or {}).get("decode_tokens_per_s")
        ind = (modes.get("cpu-inductor") or {}).get("decode_tokens_per_s")
        for mode, r in modes.items():
            if not r:
                lines.append(f"| {batch} | {mode} | failed | | | | | | | | |")
                continue
            tps = r["decode_tokens_per_s"]
            lines.append(f"| {batch} | {mode} | {r['cold_s']:.1f} | {r['cold_compiles']} | {r['ttft_s'] * 1e3:.0f} | "
                         f"{tps:.1f} | {_ratio(tps, strict)} | {_ratio(tps, ind)} | {r['new_lengths_s']:.1f} | "
                         f"{r['new_lengths_compiles']} | {_same_as_cpu(r.get('tokens_equal_cpu'))} |")
    return "\n".join(lines)


def depth(data: dict) -> str:
    import importlib.util

    # The bench's own table, loaded without importing torch.
    spec = importlib.util.spec_from_file_location("_bench_depth", os.path.join(ROOT, "torch_tpu", "bench", "depth.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    size = "small GPT (d 64, seq 32)" if data.get("small") else "the bench's GPT (d 256, 4 heads, seq 128, batch 8)"
    return f"Machine: {data.get('machine', 'unknown')}; {size}, AdamW.\n\n" + module.table(data["results"])


def soak(data: dict) -> str:
    import importlib.util

    spec = importlib.util.spec_from_file_location("_bench_soak", os.path.join(ROOT, "bench", "soak.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.table(data)


RENDER = {"train_step": train_step, "generate": generate, "depth": depth, "soak": soak}


def render(text: str) -> str:
    for name, fn in RENDER.items():
        path = os.path.join(RESULTS, f"{name}.json")
        block = re.compile(rf"(<!-- BEGIN {name} -->\n)(?:.*?\n)?(<!-- END {name} -->)", re.S)
        if not os.path.exists(path) or not block.search(text):
            continue
        with open(path) as f:
            table = fn(json.load(f))
        text = block.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)
    return text


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args(argv)
    with open(DOC) as f:
        text = f.read()
    new = render(text)
    if a.check:
        if new != text:
            print("docs/benchmarks.md is not what bench/results gives: run python -m tools.bench_tables")
            return 1
        return 0
    with open(DOC, "w") as f:
        f.write(new)
    return 0


if __name__ == "__main__":
    sys.exit(main())
