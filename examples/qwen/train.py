"""Supervised fine-tuning of a Hugging Face Qwen3 on tpu, then a decode-speed
measurement: a small Qwen3ForCausalLM (random init) learns two-number
addition from generated instructions ("12+7=" -> "19"), answers held-out sums
with greedy model.generate(), and times greedy decoding with a static KV cache
(fixed shapes: every decode step reuses one set of compiled programs).

    python examples/qwen/train.py [--steps N] [--device tpu|cpu] [--mode eager|fused|compile]
    python examples/qwen/train.py --model-path DIR   # fine-tune a local HF checkpoint instead
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _shared import harness, lm  # noqa: E402


def make_config(tokenizer):
    from transformers import Qwen3Config

    # Qwen3 differs from Llama by RMSNorm on the queries and keys (q_norm,
    # k_norm) and an explicit head_dim; sized like the Llama example.
    return Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=192, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, head_dim=32, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, attn_implementation="sdpa")


def extra(ap):
    lm.add_args(ap)
    ap.add_argument("--decode-tokens", type=int, default=32, help="tokens per row in the decode-speed measurement")
    ap.add_argument("--decode-batch", type=int, default=8, help="rows in the decode-speed measurement")
    ap.add_argument("--cache", default="static", choices=["static", "dynamic"],
                    help="KV cache for the decode-speed measurement")


def parse(argv=None):
    return harness.parse_args(__doc__, steps=500, batch_size=128, extra=extra, argv=argv)


def bench_setup(device, batch_size, capturable=False):
    """(step, tokens per step, "tokens") for python -m torch_tpu.bench: step()
    trains this example's model on one fixed batch of its sums."""
    from transformers import Qwen3ForCausalLM

    args = parse(harness.bench_argv(device, batch_size))
    return lm.bench_setup(args, device, make_config, Qwen3ForCausalLM, capturable)


def main():
    args = parse()
    device = harness.setup(args)
    from transformers import Qwen3ForCausalLM

    train_pairs, held_out = lm.sums(args.digits, args.eval_size, args.seed)
    model, tokenizer = lm.model_and_tokenizer(args, device, make_config, Qwen3ForCausalLM, train_pairs)
    print(f"{type(model).__name__}: {lm.count_params(model) / 1e6:.2f}M parameters, vocabulary {len(tokenizer)}; "
          f"{len(train_pairs)} training sums, {len(held_out)} held out")

    progress = lm.train(model, tokenizer, train_pairs, args, device)
    path = harness.save_curve(progress, harness.curve_path(args, __file__, "qwen"), "Qwen3 SFT on sums")
    acc, rows = lm.evaluate(model, tokenizer, held_out, device)

    # "static" preallocates the cache at prompt + new tokens and writes each
    # step's keys and values in place: the same shapes at every step.
    cache = {"cache_implementation": "static"} if args.cache == "static" else {}
    rate = lm.decode_speed(model, tokenizer, held_out[:args.decode_batch], device, args.decode_tokens, **cache)

    lm.report(acc, rows, args.steps, progress)
    print(f"greedy decode with a {args.cache} KV cache: {rate:.0f} tokens/s "
          f"({args.decode_batch} rows x {args.decode_tokens} new tokens)")
    if path:
        print(f"loss curve: {path}")
    if args.save:
        lm.save(model, tokenizer, args.save)
    if not args.smoke and acc < 0.5:
        raise SystemExit(f"held-out accuracy {acc:.0%} is below 50%: the model did not learn to add")


if __name__ == "__main__":
    main()
