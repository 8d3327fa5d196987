"""Supervised fine-tuning of a Hugging Face Llama on tpu: a small
LlamaForCausalLM (random init) learns two-number addition from generated
instructions ("12+7=" -> "19"), then answers held-out sums with greedy
model.generate().

    python examples/llama/train.py [--steps N] [--device tpu|cpu] [--mode eager|fused|compile]
    python examples/llama/train.py --model-path DIR   # fine-tune a local HF checkpoint instead
"""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from _shared import harness, lm  # noqa: E402


def make_config(tokenizer):
    from transformers import LlamaConfig

    # Small enough for a minute on two CPU cores, big enough to learn to carry.
    return LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=192, intermediate_size=512, num_hidden_layers=2,
        num_attention_heads=6, num_key_value_heads=2, max_position_embeddings=64,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id, attn_implementation="sdpa")


def parse(argv=None):
    return harness.parse_args(__doc__, steps=500, batch_size=128, extra=lm.add_args, argv=argv)


def bench_setup(device, batch_size, capturable=False):
    """(step, tokens per step, "tokens") for python -m torch_tpu.bench: step()
    trains this example's model on one fixed batch of its sums."""
    from transformers import LlamaForCausalLM

    args = parse(harness.bench_argv(device, batch_size))
    return lm.bench_setup(args, device, make_config, LlamaForCausalLM, capturable)


def main():
    args = parse()
    device = harness.setup(args)
    from transformers import LlamaForCausalLM

    train_pairs, held_out = lm.sums(args.digits, args.eval_size, args.seed)
    model, tokenizer = lm.model_and_tokenizer(args, device, make_config, LlamaForCausalLM, train_pairs)
    print(f"{type(model).__name__}: {lm.count_params(model) / 1e6:.2f}M parameters, vocabulary {len(tokenizer)}; "
          f"{len(train_pairs)} training sums, {len(held_out)} held out")

    progress = lm.train(model, tokenizer, train_pairs, args, device)
    path = harness.save_curve(progress, harness.curve_path(args, __file__, "llama"), "Llama SFT on sums")
    acc, rows = lm.evaluate(model, tokenizer, held_out, device)
    lm.report(acc, rows, args.steps, progress)
    if path:
        print(f"loss curve: {path}")
    if args.save:
        lm.save(model, tokenizer, args.save)
    if not args.smoke and acc < 0.5:
        raise SystemExit(f"held-out accuracy {acc:.0%} is below 50%: the model did not learn to add")


if __name__ == "__main__":
    main()
