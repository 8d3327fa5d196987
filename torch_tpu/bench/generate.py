"""Hugging Face ``generate()`` on a Llama of about 56M parameters.

    python -m torch_tpu.bench --generate [--batches 1,8] [--modes ...] [--prompt 128] [--new 128]

For every (batch, mode) a fresh process with an empty compilation cache
builds the same seeded model (8 layers, hidden 512, 8 heads, 4 KV heads,
vocabulary 32,000) and greedily decodes from random prompts with a static
cache. Batch 8 is left-padded: row i starts with i pad tokens, masked by
its attention mask. Modes:

- cpu-eager: PyTorch on the CPU, the reference;
- cpu-inductor: ``torch.compile`` (Inductor) of the model's forward on the CPU;
- tpu-strict, tpu-fused: eager tpu, each op its own program / ops fused
  into one program per flush;
- tpu-compile: ``torch.compile(model.forward, backend="tpu")``.

``--small`` runs the same architecture at 2 layers, hidden size 64.

Timed after a first, cold call with the same lengths: time to first token
(``max_new_tokens=1``) and decode tokens/s over the remaining tokens
(``batch * (new - 1)`` tokens over the time the full call takes beyond the
first token). Then one call with new lengths (three quarters of the prompt and half
the new tokens) reports its programs compiled and its time. Tokens are
compared with cpu-eager's. Writes generate.json to --out (bench/results in
a source checkout).
"""
from __future__ import annotations

import argparse
import json
import os
import time

from torch_tpu.bench import train

MODES = ["cpu-eager", "cpu-inductor", "tpu-strict", "tpu-fused", "tpu-compile"]
CONFIG = dict(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=8,
              num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=512)
# --small: the same architecture at test size (tests/test_bench.py).
SMALL = dict(CONFIG, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2)


def _model(device: str, config: dict):
    import torch
    import transformers

    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(**config)
    model = transformers.LlamaForCausalLM(cfg).eval()
    # Random weights emit the default end-of-sequence id now and then; every
    # call must decode all its tokens for the timings to compare.
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model.to(device)


def _prompt(batch: int, length: int, seed: int, vocab: int):
    """Random prompt ids and their attention mask; row i left-padded by i."""
    import torch

    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, vocab, (batch, length), generator=g)
    mask = torch.ones(batch, length, dtype=torch.long)
    if batch > 1:
        for i in range(batch):
            ids[i, :i], mask[i, :i] = 0, 0
    return ids, mask


def run(batch: int, mode: str, prompt: int, new: int, small: bool = False) -> dict:
    import torch

    import torch_tpu

    device = "tpu" if mode.startswith("tpu") else "cpu"
    if mode == "tpu-fused":
        torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    config = SMALL if small else CONFIG
    model = _model(device, config)
    if mode == "cpu-inductor":
        model.forward = torch.compile(model.forward)
    elif mode == "tpu-compile":
        model.forward = torch.compile(model.forward, backend="tpu")
    compiles = (lambda: torch_tpu.debug.metrics()["compiles"]) if device == "tpu" else (lambda: 0)

    def generate(length: int, tokens: int, seed: int = 1):
        ids, mask = _prompt(batch, length, seed, config["vocab_size"])
        t0 = time.perf_counter()
        with torch.no_grad():
            # disable_compile: Hugging Face would compile a static-cache
            # forward itself; each mode's forward is what the mode says.
            out = model.generate(ids.to(device), attention_mask=mask.to(device), max_new_tokens=tokens,
                                 do_sample=False, cache_implementation="static", disable_compile=True).cpu()
        return out, time.perf_counter() - t0

    c0 = compiles()
    out, cold = generate(prompt, new)
    cold_compiles = compiles() - c0
    _, ttft = generate(prompt, 1)
    out, full = generate(prompt, new)
    c0 = compiles()
    shorter = max(1, prompt * 3 // 4)
    out2, t_new = generate(shorter, max(1, new // 2), seed=2)
    return dict(cold_s=cold, cold_compiles=cold_compiles, ttft_s=ttft,
                decode_tokens_per_s=batch * (new - 1) / max(full - ttft, 1e-9),
                new_lengths_s=t_new, new_lengths_compiles=compiles() - c0,
                tokens=out[:, prompt:].tolist(), tokens_new=out2[:, shorter:].tolist())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--new", type=int, default=128)
    ap.add_argument("--small", action="store_true", help="a 2-layer model of hidden size 64 (for tests)")
    ap.add_argument("--out", default=train.default_out())
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        c = a.child
        print("RESULT " + json.dumps(run(int(c[0]), c[1], int(c[2]), int(c[3]), c[4] == "1")))
        return
    from tqdm import tqdm

    batches, modes = [int(b) for b in a.batches.split(",")], a.modes.split(",")
    results: dict = {b: {} for b in batches}
    with tqdm(total=len(batches) * len(modes), desc="generate") as bar:
        for b in batches:
            for mode in modes:
                bar.set_postfix_str(f"batch {b}/{mode}")
                results[b][mode] = train.run_child("torch_tpu.bench.generate", [b, mode, a.prompt, a.new, int(a.small)],
                                                   f"batch {b}/{mode}", timeout=3600)
                bar.update()
    print(f"{'batch':<6}{'mode':<14}{'cold s':>8}{'compiles':>9}{'TTFT ms':>9}{'decode tok/s':>13}"
          f"{'vs strict':>10}{'vs inductor':>12}{'new lengths s':>14}{'compiles':>9}{'= cpu':>7}")
    for b in batches:
        ref, strict, ind = (results[b].get(m) or {} for m in ("cpu-eager", "tpu-strict", "cpu-inductor"))
        for mode in modes:
            r = results[b][mode]
            if not r:
                continue
            # None: no cpu-eager run to compare with.
            same = ref and r["tokens"] == ref["tokens"] and r["tokens_new"] == ref["tokens_new"]
            r["tokens_equal_cpu"] = bool(same) if ref else None
            tps = r["decode_tokens_per_s"]
            vs = [f"{tps / o['decode_tokens_per_s']:.2f}" if o else "-" for o in (strict, ind)]
            print(f"{b:<6}{mode:<14}{r['cold_s']:>8.1f}{r['cold_compiles']:>9}{r['ttft_s'] * 1e3:>9.0f}{tps:>13.1f}"
                  f"{vs[0]:>10}{vs[1]:>12}{r['new_lengths_s']:>14.2f}{r['new_lengths_compiles']:>9}"
                  f"{('yes' if r['tokens_equal_cpu'] else 'no') if ref else '-':>7}")
    os.makedirs(a.out, exist_ok=True)
    for b in batches:
        for r in results[b].values():
            if r:
                r.pop("tokens"), r.pop("tokens_new")
    with open(os.path.join(a.out, "generate.json"), "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {a.out}/generate.json")


if __name__ == "__main__":
    main()
