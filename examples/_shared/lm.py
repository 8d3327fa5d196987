"""What the Llama and Qwen examples share: the addition instruction set, a
character-level tokenizer trained locally with `tokenizers`, supervised
fine-tuning with the loss on the answer tokens only, and greedy
`model.generate()` on held-out prompts.

A script builds its own small config (`make_config(tokenizer)`); with
`--model-path DIR` a local Hugging Face checkpoint (model and tokenizer)
replaces the random model and the local tokenizer.
"""
from __future__ import annotations

import math
import os
import random
import time

# Everything is built here or read from a local directory: never reach the hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402

from . import harness  # noqa: E402

PAD, BOS, EOS, UNK = "<pad>", "<s>", "</s>", "<unk>"


def add_args(ap):
    ap.add_argument("--digits", type=int, default=2, help="operands go up to this many digits")
    ap.add_argument("--eval-size", type=int, default=200, help="held-out sums answered with generate()")
    ap.add_argument("--lr", type=float, default=None,
                    help="peak learning rate (default 2e-3 from scratch, 2e-5 with --model-path)")
    ap.add_argument("--model-path", default=None,
                    help="a local Hugging Face checkpoint (model and tokenizer) to fine-tune instead")
    ap.add_argument("--save", default=None, help="write the fine-tuned model and tokenizer here (HF format)")


# --- data -------------------------------------------------------------------

def sums(digits, eval_size, seed=0):
    """Every pair a+b with operands below 10**digits, shuffled; the first
    `eval_size` are held out (never trained on)."""
    top = 10 ** digits
    pairs = [(a, b) for a in range(top) for b in range(top)]
    random.Random(seed).shuffle(pairs)
    return pairs[eval_size:], pairs[:eval_size]


def prompt(a, b):
    return f"{a}+{b}="


def char_tokenizer(texts):
    """A WordLevel tokenizer with one token per character, its vocabulary
    learned from `texts`, wrapped as a transformers tokenizer so that the
    rest of the code is the same as with a checkpoint's own tokenizer."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.WordLevel(unk_token=UNK))
    tok.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    tok.train_from_iterator(texts, trainers.WordLevelTrainer(special_tokens=[PAD, BOS, EOS, UNK]))
    # A prompt starts with <s>, as with Llama's and most checkpoints' tokenizers.
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, tok.token_to_id(BOS))])
    tok.decoder = decoders.Fuse()  # "1","9" -> "19", not "1 9"
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS, pad_token=PAD,
                                   unk_token=UNK, model_input_names=["input_ids", "attention_mask"])


def encode_sft(tokenizer, pairs):
    """input_ids and labels, right-padded to one length (one shape: every
    training step reuses the same compiled programs). Labels are -100 on the
    prompt and the padding, so only the answer and the end token are learned."""
    rows = []
    for a, b in pairs:
        p = tokenizer(prompt(a, b))["input_ids"]
        ans = tokenizer(str(a + b), add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        rows.append((p, ans))
    length = max(len(p) + len(ans) for p, ans in rows)
    ids = torch.full((len(rows), length), tokenizer.pad_token_id, dtype=torch.long)
    labels = torch.full((len(rows), length), -100, dtype=torch.long)
    real = torch.zeros(len(rows), dtype=torch.long)
    for i, (p, ans) in enumerate(rows):
        n = len(p) + len(ans)
        ids[i, :n] = torch.tensor(p + ans)
        labels[i, len(p):n] = torch.tensor(ans)
        real[i] = n
    return ids, labels, real


# --- model ------------------------------------------------------------------

def model_and_tokenizer(args, device, make_config, model_class, train_pairs):
    """(model on the device, tokenizer): a random `model_class(make_config(tok))`
    with a tokenizer trained on the training text, or the checkpoint in
    --model-path."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if args.model_path:
        tokenizer = AutoTokenizer.from_pretrained(args.model_path)
        # float32: AdamW updates are lost in bfloat16 weights.
        model = AutoModelForCausalLM.from_pretrained(args.model_path, dtype=torch.float32)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    else:
        tokenizer = char_tokenizer(prompt(a, b) + str(a + b) for a, b in train_pairs)
        model = model_class(make_config(tokenizer))
    model = model.to(device)
    # Module.to() on a non-CPU device unties shared parameters (a tied
    # embedding and head, as small Qwen checkpoints have); tie them again.
    model.tie_weights()
    return model, tokenizer


def count_params(model):
    return sum(p.numel() for p in model.parameters())


# --- training ---------------------------------------------------------------

def make_optimizer(model, args, capturable=False):
    """AdamW at the peak learning rate (capturable: step counters on the
    device, as torch.tpu.graph capture needs)."""
    lr = args.lr or (2e-5 if args.model_path else 2e-3)
    return torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98), weight_decay=0.01, capturable=capturable)


def sft_loss(model):
    # No attention mask: the padding comes after the answer, so causal
    # attention alone keeps it out of every position that has a label.
    def loss_of(x, y):
        return model(input_ids=x, labels=y).loss
    return loss_of


def bench_setup(args, device, make_config, model_class, capturable=False):
    """(step, tokens per step, "tokens") for python -m torch_tpu.bench: step()
    is one AdamW step of the script's model on a fixed batch of the training
    sums (without the learning-rate schedule and gradient clipping of train())."""
    torch.manual_seed(args.seed)
    device = torch.device(device)
    train_pairs, _ = sums(args.digits, args.eval_size, args.seed)
    model, tokenizer = model_and_tokenizer(args, device, make_config, model_class, train_pairs)
    model.train()
    ids, labels, real = encode_sft(tokenizer, train_pairs[:args.batch_size])
    step = harness.fixed_batch_step(make_optimizer(model, args, capturable), sft_loss(model), ids.to(device),
                                    labels.to(device))
    return step, int(real.sum()), "tokens"


def train(model, tokenizer, train_pairs, args, device, warmup=30):
    """AdamW with linear warm-up and cosine decay; returns the Progress."""
    ids, labels, real = encode_sft(tokenizer, train_pairs)
    opt = make_optimizer(model, args)
    warmup = min(warmup, max(args.steps // 5, 1))

    def factor(step):
        if step < warmup:
            return (step + 1) / warmup
        return 0.5 * (1 + math.cos(math.pi * (step - warmup) / max(args.steps - warmup, 1)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)

    loss_of = harness.compiled(sft_loss(model), args)
    gen = torch.Generator().manual_seed(args.seed)
    model.train()
    progress = harness.Progress(args.steps, "tokens")
    for step in progress:
        idx = torch.randint(len(ids), (args.batch_size,), generator=gen)
        loss = loss_of(ids[idx].to(device), labels[idx].to(device))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        progress.update(step, loss.detach(), int(real[idx].sum()))
    progress.bar.close()
    return progress


# --- generation -------------------------------------------------------------

def _prompts(tokenizer, pairs, device):
    # Left padding: every row's next token is then written at the same place.
    tokenizer.padding_side = "left"
    enc = tokenizer([prompt(a, b) for a, b in pairs], return_tensors="pt", padding=True)
    return enc["input_ids"].to(device), enc["attention_mask"].to(device)


def _greedy(tokenizer, **kw):
    return dict(do_sample=False, pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id, **kw)


@torch.no_grad()
def evaluate(model, tokenizer, pairs, device, **generate_kw):
    """Greedy generate() (KV cache) on the held-out prompts, all in one batch;
    returns (accuracy, [(prompt, answer text, correct)])."""
    model.eval()
    ids, mask = _prompts(tokenizer, pairs, device)
    # The longest answer is one digit more than the operands, then the end
    # token; a little slack for tokenizers that emit a leading space.
    digits = len(str(max(a + b for a, b in pairs)))
    out = model.generate(input_ids=ids, attention_mask=mask, **_greedy(tokenizer, max_new_tokens=digits + 2,
                                                                        **generate_kw))
    texts = tokenizer.batch_decode(out[:, ids.shape[1]:].cpu(), skip_special_tokens=True)
    rows = [(prompt(a, b), t.strip(), t.strip() == str(a + b)) for (a, b), t in zip(pairs, texts)]
    return sum(ok for *_, ok in rows) / len(rows), rows


@torch.no_grad()
def decode_speed(model, tokenizer, pairs, device, new_tokens=32, **generate_kw):
    """Generated tokens per second of greedy decoding, `new_tokens` per row
    (the end token is suppressed so every row runs the full length). A first
    call compiles; the second is timed."""
    model.eval()
    ids, mask = _prompts(tokenizer, pairs, device)
    kw = _greedy(tokenizer, max_new_tokens=new_tokens, min_new_tokens=new_tokens, **generate_kw)
    model.generate(input_ids=ids, attention_mask=mask, **kw)
    harness.sync(device)
    start = time.perf_counter()
    out = model.generate(input_ids=ids, attention_mask=mask, **kw)
    harness.sync(device)
    elapsed = time.perf_counter() - start
    made = out.shape[1] - ids.shape[1]
    return out.shape[0] * made / elapsed


def report(acc, rows, steps, progress):
    """The closing lines: what the model learned, with a held-out example."""
    shown = next((r for r in rows if r[2]), rows[0])
    print(f"trained {steps} steps at {progress.rate():.0f} tokens/s "
          f"(first step, with compiling, {progress.first_step_s or 0:.1f} s)")
    print(f"answers {acc:.0%} of {len(rows)} held-out sums correctly; {shown[0]} -> {shown[1] or '(nothing)'}")


def save(model, tokenizer, path):
    """model and tokenizer in HF format, loadable again with --model-path."""
    model.to("cpu").save_pretrained(path)
    tokenizer.save_pretrained(path)
    print(f"saved the model and tokenizer to {path}")
