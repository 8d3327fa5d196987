"""Training-step throughput, side by side, in one run.

    python -m torch_tpu.bench [train] [--models mlp-demo,mlp,gpt,resnet18] [--modes ...] [--steps N]
    python -m torch_tpu.bench --models examples   # the models of examples/ (ex-mingpt, ..., ex-unet)
    (also: python bench/train_step.py ...)

For every (model, mode) a fresh process trains with an empty compilation
cache and reports the first step's time (compiles included, until the
updated parameters are there) and steps/s
after warm-up. Modes: PyTorch CPU eager and Inductor (cpu-eager,
cpu-inductor), dynamo alone with its no-op backend on CPU (cpu-dynamo:
its first step is what dynamo's own tracing costs, a floor for any
torch.compile backend's first step), dynamo with a backend that computes
nothing (dynamo-floor: each graph returns its first outputs again, so the
steps/s is the ceiling that dynamo's frames and guards and the optimizer's
own Python leave any torch.compile backend; its loss does not train),
tpu strict eager, fused eager and torch.compile (tpu-strict,
tpu-fused, tpu-compile, which traces loss.backward() into the graph;
tpu-compile-engine leaves it to the autograd engine, options={"trace_backward":
False}), the whole step captured once with torch.tpu.graph
and replayed (tpu-graph: one warm-up step in fused eager, then the capture;
its first-step time is the warm-up step's), and JAX jit of the same model on XLA:CPU (jax-jit;
on torch_tpu's own XLA:CPU plugin, and jax-jit-bundled on jaxlib's own
XLA:CPU build; skipped when JAX is not installed: pip install -r
requirements-bench.txt).
Per (model, mode): steps/s, items/s (samples, tokens or images), the first
step's time, programs compiled and peak tpu memory.
The ex-* models (from a source checkout only) are the examples' own models,
losses, optimizers and generated data, through each example's bench_setup()
in examples/<name>/train.py; one fixed batch, no learning-rate schedule. Prints a table with
ratios and writes train_step.{json,csv,png} to --out (bench/results in a
source checkout, else ./bench_results). On a machine whose speed drifts,
--repeats R runs R interleaved rounds over every (model, mode) and reports
each mode's median round, with the range beside it.
Within each process, steps/s is the median of --windows (5) timed windows
of --steps steps each.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

MODELS = {
    # name: (description, batch)
    "mlp-demo": "MLP 32-128-128-10 (make demo), batch 64, AdamW",
    "mlp": "MLP 784-512-512-10, batch 128, SGD",
    "gpt": "GPT decoder 4 layers, d 256, seq 128, batch 8, AdamW",
    "resnet18": "torchvision ResNet-18, 32x32, batch 16, SGD",
}
# The examples' models: name -> (examples/<dir>, batch size, default timed steps, description).
EXAMPLES = {
    "ex-mingpt": ("mingpt", 64, 10, "examples/mingpt: GPT 2 layers, dim 64, sorting 6 digits, AdamW"),
    "ex-resnet": ("resnet", 16, 5, "examples/resnet: ResNet-18 on 16x16 digits, bf16 autocast, AdamW"),
    "ex-dlrm": ("dlrm", 256, 10, "examples/dlrm: DLRM, 6 EmbeddingBags (2 multi-hot), dim 16, Adagrad"),
    "ex-llama": ("llama", 32, 5, "examples/llama: HF LlamaForCausalLM 2 layers, hidden 192, AdamW"),
    "ex-qwen": ("qwen", 32, 5, "examples/qwen: HF Qwen3ForCausalLM 2 layers, hidden 192, AdamW"),
    "ex-unet": ("unet", 16, 5, "examples/unet: DDPM UNet, 16 channels, 16x16 shapes, AdamW"),
}
MODELS.update({name: f"{e[3]}, batch {e[1]}" for name, e in EXAMPLES.items()})
MODES = ["cpu-eager", "cpu-inductor", "cpu-dynamo", "dynamo-floor", "tpu-strict", "tpu-fused", "tpu-compile",
         "tpu-compile-engine", "tpu-graph", "jax-jit", "jax-jit-bundled"]
GPT = dict(vocab=512, d=256, layers=4, heads=4, seq=128, batch=8)


# --- PyTorch models ---------------------------------------------------------

def examples_dir() -> str | None:
    """examples/ of the source checkout this package runs from, or None."""
    path = os.path.join(repo_root(), "examples")
    return path if os.path.isdir(path) else None


def example_setup(name: str, device: str, capturable: bool = False):
    """(step, items per step, unit) from examples/<dir>/train.py's bench_setup()."""
    import importlib.util

    import torch

    torch.manual_seed(0)
    path = os.path.join(examples_dir(), EXAMPLES[name][0], "train.py")
    spec = importlib.util.spec_from_file_location(f"_bench_example_{EXAMPLES[name][0]}", path)
    module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses look it up
    spec.loader.exec_module(module)
    return module.bench_setup(device, EXAMPLES[name][1], capturable=capturable)


def gpt_model(c: dict):
    """The bench's GPT (pre-LayerNorm blocks, causal SDPA, GELU MLP) for the
    sizes in `c` (vocab, d, layers, heads, seq): a CPU module."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(c["d"]), nn.LayerNorm(c["d"])
            self.qkv, self.proj = nn.Linear(c["d"], 3 * c["d"]), nn.Linear(c["d"], c["d"])
            self.fc1, self.fc2 = nn.Linear(c["d"], 4 * c["d"]), nn.Linear(4 * c["d"], c["d"])

        def forward(self, x):
            B, T, D = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(D, dim=2)
            q, k, v = (t.view(B, T, c["heads"], D // c["heads"]).transpose(1, 2) for t in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(B, T, D))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class GPTModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok, self.pos = nn.Embedding(c["vocab"], c["d"]), nn.Embedding(c["seq"], c["d"])
            self.blocks = nn.Sequential(*[Block() for _ in range(c["layers"])])
            self.ln, self.head = nn.LayerNorm(c["d"]), nn.Linear(c["d"], c["vocab"], bias=False)

        def forward(self, idx):
            pos = torch.arange(idx.shape[1], device=idx.device)
            return self.head(self.ln(self.blocks(self.tok(idx) + self.pos(pos))))

    return GPTModel()


def build(name: str, device: str, capturable: bool = False, gpt: dict | None = None):
    """(model, optimizer, x, y, loss_fn) of a bench model, on `device`;
    `gpt` overrides the GPT's sizes (GPT)."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    torch.manual_seed(0)
    g = torch.Generator().manual_seed(0)
    if name in ("mlp-demo", "mlp"):
        d_in, h, b = (32, 128, 64) if name == "mlp-demo" else (784, 512, 128)
        model = nn.Sequential(nn.Linear(d_in, h), nn.ReLU(), nn.Linear(h, h), nn.ReLU(), nn.Linear(h, 10))
        x, y = torch.randn(b, d_in, generator=g), torch.randint(0, 10, (b,), generator=g)
        loss_fn = F.cross_entropy
    elif name == "gpt":
        c = gpt or GPT
        model = gpt_model(c)
        x = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g)
        y = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), generator=g)

        def loss_fn(logits, t):
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), t.reshape(-1))
    elif name == "resnet18":
        import torchvision

        model = torchvision.models.resnet18(num_classes=10)
        x, y = torch.randn(16, 3, 32, 32, generator=g), torch.randint(0, 10, (16,), generator=g)
        loss_fn = F.cross_entropy
    else:
        raise ValueError(name)
    model = model.to(device)
    if name in ("mlp", "resnet18"):
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        # capturable: the step counters on the device, as graph capture needs
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3, **({"capturable": True} if capturable else {}))
    return model, opt, x.to(device), y.to(device), loss_fn


def torch_setup(name: str, device: str, capturable: bool = False, detached: bool = False):
    """The training step of a bench model. It returns its loss, the common
    form; detached=True returns a copy detached before backward (dynamo
    alone, the cpu-dynamo and dynamo-floor modes, would otherwise break
    the graph at backward, which tpu-compile does not)."""
    model, opt, x, y, loss_fn = build(name, device, capturable)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        out = loss.detach() if detached else loss
        loss.backward()
        opt.step()
        return out

    step.opt = opt  # for --lr-schedule
    return step


def _windows(run_window, steps: int, windows: int) -> dict:
    """steps/s as the median over `windows` timed windows of `steps` steps
    each (run_window() runs one window, synced, and returns its last loss).
    A single window of the tiny models lasts a tenth of a second, which one
    hiccup of a shared 2-vCPU VM could halve."""
    import statistics

    rates, final = [], None
    for _ in range(max(windows, 1)):
        t0 = time.perf_counter()
        final = run_window()
        rates.append(steps / (time.perf_counter() - t0))
    return dict(steps_per_s=statistics.median(rates), window_steps_per_s=rates, final_loss=final)


def time_compiled_step(model, opt, loss_fn, x, y, steps: int, warmup: int, windows: int) -> dict:
    """A training step (zero_grad, forward, backward, optimizer step,
    `return loss`) compiled with backend="tpu", timed: the first step (with
    its tracing and compiles) and its loss and recorded ops, then steps/s
    over timed windows (_windows), and the programs compiled."""
    import torch

    import torch_tpu

    @torch.compile(backend="tpu")
    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    ops0 = torch_tpu.debug.metrics()["ops_dispatched"]
    t0 = time.perf_counter()
    first_loss = step(x, y).item()
    first = time.perf_counter() - t0
    ops = torch_tpu.debug.metrics()["ops_dispatched"] - ops0
    for _ in range(warmup):
        step(x, y)
    torch.tpu.synchronize()

    def window():
        for _ in range(steps):
            loss = step(x, y)
        return loss.item()

    res = dict(first_step_s=first, first_loss=first_loss, ops_first_step=ops, **_windows(window, steps, windows))
    res["compiles"] = torch_tpu.debug.metrics()["compiles"]
    return res


def _replay_first_outputs(gm, example_inputs):
    """A torch.compile backend that runs each graph once and then returns
    those outputs again without computing (dynamo-floor)."""
    first = []

    def run(*args):
        if not first:
            first.append(gm(*args))
        return first[0]

    return run


def run_torch(name: str, mode: str, steps: int, warmup: int, windows: int = 1, schedule: bool = False) -> dict:
    import torch

    import torch_tpu

    device = "tpu" if mode.startswith("tpu") or mode == "dynamo-floor" else "cpu"
    extra = {}
    if name in EXAMPLES:
        step, items, unit = example_setup(name, device, capturable=mode == "tpu-graph")
        extra.update(items_per_step=items, unit=unit)
    else:
        step = torch_setup(name, device, capturable=mode == "tpu-graph",
                           detached=mode in ("cpu-dynamo", "dynamo-floor"))
    opt = getattr(step, "opt", None)
    if mode == "cpu-inductor":
        step = torch.compile(step)
    elif mode == "cpu-dynamo":
        # Dynamo alone: its no-op backend runs each captured graph as it is,
        # with backward traced as tpu-compile traces it. Its first step is
        # the floor for any torch.compile backend's first step.
        torch._dynamo.config.trace_autograd_ops = True
        step = torch.compile(step, backend="eager")
    elif mode == "dynamo-floor":
        torch._dynamo.config.trace_autograd_ops = True  # the graphs tpu-compile gets
        step = torch.compile(step, backend=_replay_first_outputs)
    elif mode == "tpu-compile":
        step = torch.compile(step, backend="tpu")
    elif mode == "tpu-compile-engine":
        step = torch.compile(step, backend="tpu", options={"trace_backward": False})
    elif mode == "tpu-fused":
        torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    sync = (lambda v: v.cpu()) if device == "tpu" else (lambda v: v)
    if mode == "tpu-graph":
        torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE  # the warm-up step in fused eager
    t0 = time.perf_counter()
    sync(step())
    if device == "tpu":
        # The whole step, not just its loss: strict eager and the compile-
        # ahead queue still have the backward and optimizer programs to
        # compile and run when the loss is read (JAX's one program has not).
        torch.tpu.synchronize()
    first = time.perf_counter() - t0
    if mode == "tpu-graph":
        t0 = time.perf_counter()
        graph = torch.tpu.TPUGraph()
        with torch.tpu.graph(graph):
            static_loss = step()
        graph.replay()
        sync(static_loss)
        extra["capture_s"] = time.perf_counter() - t0

        def step():
            graph.replay()
            return static_loss
    if schedule and opt is not None and mode != "tpu-graph":
        # --lr-schedule: a cosine schedule stepped after every step, as
        # scripts do (a new lr every step).
        sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10**6)
        unscheduled = step

        def step():
            loss = unscheduled()
            sched.step()
            return loss
    for _ in range(warmup):
        loss = step()
    sync(loss)
    if device == "tpu":
        # Tiered compiles: time the full programs, not the quick first ones.
        torch_tpu.cache.wait_background_compiles()

    def window():
        for _ in range(steps):
            loss = step()
        return float(sync(loss))

    out = dict(first_step_s=first, **_windows(window, steps, windows), **extra)
    if device == "tpu":
        m = torch_tpu.debug.metrics()
        out.update(compiles=m["compiles"], compile_ms=m["compile_ms"], flushes=m["flushes"],
                   peak_bytes=torch.tpu.max_memory_allocated())
    return out


# --- JAX models (the same shapes and optimizers) ---------------------------

def plugin_path() -> str:
    """The XLA:CPU PJRT plugin torch_tpu loads (TORCH_TPU_PJRT_PLUGIN, else
    the embedded one)."""
    chosen = os.environ.get("TORCH_TPU_PJRT_PLUGIN")
    if chosen:
        return chosen
    import xla_plugins.xla_cpu_pjrt as plugin

    return os.path.join(os.path.dirname(plugin.__file__), "xla_cpu_pjrt.so")


def use_plugin_for_jax() -> None:
    """Points JAX at torch_tpu's XLA:CPU PJRT plugin, so both frameworks run
    on the same compiler and runtime (jaxlib bundles its own XLA:CPU, a
    different build)."""
    import jax
    from jax._src import xla_bridge

    xla_bridge.register_plugin("torch_tpu_xla_cpu", priority=500, library_path=plugin_path(), options=None)
    jax.config.update("jax_platforms", "torch_tpu_xla_cpu")


def _jax_resnet18(key):
    """torchvision's ResNet-18 (BasicBlock [2, 2, 2, 2], 10 classes) in plain
    jax.lax, NHWC: training-mode BatchNorm over the batch, running statistics
    updated as PyTorch does (momentum 0.1, unbiased variance)."""
    import jax
    import jax.numpy as jnp
    from jax import lax

    keys = iter(jax.random.split(key, 64))

    def conv_p(k, cin, cout):
        std = math.sqrt(2.0 / (cout * k * k))  # kaiming_normal_, fan_out, as torchvision
        return jax.random.normal(next(keys), (k, k, cin, cout)) * std

    def bn_p(c):
        return {"g": jnp.ones(c), "b": jnp.zeros(c)}, {"mean": jnp.zeros(c), "var": jnp.ones(c)}

    params, bufs = {"conv1": conv_p(7, 3, 64)}, {}
    params["bn1"], bufs["bn1"] = bn_p(64)
    cin, blocks = 64, []
    for stage, cout in enumerate((64, 128, 256, 512)):
        for i in range(2):
            stride = 2 if stage > 0 and i == 0 else 1
            name = f"l{stage}b{i}"
            params[name + "c1"], params[name + "c2"] = conv_p(3, cin, cout), conv_p(3, cout, cout)
            params[name + "n1"], bufs[name + "n1"] = bn_p(cout)
            params[name + "n2"], bufs[name + "n2"] = bn_p(cout)
            down = stride != 1 or cin != cout
            if down:
                params[name + "dc"] = conv_p(1, cin, cout)
                params[name + "dn"], bufs[name + "dn"] = bn_p(cout)
            blocks.append((name, stride, down))
            cin = cout
    bound = 1 / math.sqrt(512)
    params["fc"] = {"w": jax.random.uniform(next(keys), (512, 10), minval=-bound, maxval=bound),
                    "b": jax.random.uniform(next(keys), (10,), minval=-bound, maxval=bound)}

    def conv(x, w, stride):
        pad = (w.shape[0] - 1) // 2
        return lax.conv_general_dilated(x, w, (stride, stride), [(pad, pad), (pad, pad)],
                                        dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def bn(p, b, x, new):
        mean = x.mean((0, 1, 2))
        var = ((x - mean) ** 2).mean((0, 1, 2))
        n = x.size // x.shape[-1]
        new.append({"mean": 0.9 * b["mean"] + 0.1 * mean, "var": 0.9 * b["var"] + 0.1 * var * n / (n - 1)})
        return (x - mean) / jnp.sqrt(var + 1e-5) * p["g"] + p["b"]

    def loss_fn(p, b, x, y):
        new, names = [], ["bn1"]
        h = jax.nn.relu(bn(p["bn1"], b["bn1"], conv(x, p["conv1"], 2), new))
        h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 3, 3, 1), (1, 2, 2, 1), [(0, 0), (1, 1), (1, 1), (0, 0)])
        for name, stride, down in blocks:
            out = jax.nn.relu(bn(p[name + "n1"], b[name + "n1"], conv(h, p[name + "c1"], stride), new))
            out = bn(p[name + "n2"], b[name + "n2"], conv(out, p[name + "c2"], 1), new)
            names += [name + "n1", name + "n2"]
            if down:
                h = bn(p[name + "dn"], b[name + "dn"], conv(h, p[name + "dc"], stride), new)
                names.append(name + "dn")
            h = jax.nn.relu(out + h)
        logits = h.mean((1, 2)) @ p["fc"]["w"] + p["fc"]["b"]
        loss = -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[:, None], axis=-1))
        return loss, dict(zip(names, new))

    return params, bufs, loss_fn


def jax_model(name: str, gpt: dict | None = None):
    """(params, buffers, loss_fn(params, buffers, x, y) -> (loss, new
    buffers), x, y) of a bench model in JAX, in the torch model's layouts
    (a dense weight is (out, in) and applied as ``x @ w.T``, as nn.Linear)."""
    import jax
    import jax.numpy as jnp

    key = jax.random.PRNGKey(0)

    def dense(k, i, o, bias=True):
        bound = 1 / math.sqrt(i)
        k1, k2 = jax.random.split(k)
        p = {"w": jax.random.uniform(k1, (o, i), minval=-bound, maxval=bound)}
        if bias:
            p["b"] = jax.random.uniform(k2, (o,), minval=-bound, maxval=bound)
        return p

    def lin(p, x):
        y = x @ p["w"].T
        return y + p["b"] if "b" in p else y

    def xent(logits, y):
        return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), y[..., None], axis=-1))

    if name in ("mlp-demo", "mlp"):
        d_in, h, b = (32, 128, 64) if name == "mlp-demo" else (784, 512, 128)
        ks = jax.random.split(key, 4)
        params = [dense(ks[0], d_in, h), dense(ks[1], h, h), dense(ks[2], h, 10)]
        x = jax.random.normal(ks[3], (b, d_in))
        y = jax.random.randint(ks[3], (b,), 0, 10)

        def loss_fn(p, x, y):
            return xent(lin(p[2], jax.nn.relu(lin(p[1], jax.nn.relu(lin(p[0], x))))), y)
    elif name == "gpt":
        c = gpt or GPT
        d, H = c["d"], c["heads"]
        ks = iter(jax.random.split(key, 64))

        def ln_p():
            return {"g": jnp.ones(d), "b": jnp.zeros(d)}

        def ln(p, x):
            m = x.mean(-1, keepdims=True)
            v = ((x - m) ** 2).mean(-1, keepdims=True)
            return (x - m) / jnp.sqrt(v + 1e-5) * p["g"] + p["b"]

        def block_p():
            return {"ln1": ln_p(), "ln2": ln_p(), "qkv": dense(next(ks), d, 3 * d), "proj": dense(next(ks), d, d),
                    "fc1": dense(next(ks), d, 4 * d), "fc2": dense(next(ks), 4 * d, d)}

        params = {"tok": jax.random.normal(next(ks), (c["vocab"], d)),
                  "pos": jax.random.normal(next(ks), (c["seq"], d)),
                  "blocks": [block_p() for _ in range(c["layers"])],
                  "ln": ln_p(), "head": dense(next(ks), d, c["vocab"], bias=False)}
        x = jax.random.randint(next(ks), (c["batch"], c["seq"]), 0, c["vocab"])
        y = jax.random.randint(next(ks), (c["batch"], c["seq"]), 0, c["vocab"])
        mask = jnp.tril(jnp.ones((c["seq"], c["seq"]), bool))

        def loss_fn(p, x, y):
            B, T = x.shape
            h = p["tok"][x] + p["pos"][:T]
            for blk in p["blocks"]:
                q, k, v = jnp.split(lin(blk["qkv"], ln(blk["ln1"], h)), 3, axis=-1)
                q, k, v = (t.reshape(B, T, H, d // H).transpose(0, 2, 1, 3) for t in (q, k, v))
                att = jnp.where(mask, q @ k.transpose(0, 1, 3, 2) / math.sqrt(d // H), -jnp.inf)
                a = (jax.nn.softmax(att, -1) @ v).transpose(0, 2, 1, 3).reshape(B, T, d)
                h = h + lin(blk["proj"], a)
                h = h + lin(blk["fc2"], jax.nn.gelu(lin(blk["fc1"], ln(blk["ln2"], h)), approximate=False))
            return xent(lin(p["head"], ln(p["ln"], h)), y)
    elif name == "resnet18":
        params, bufs, loss_fn = _jax_resnet18(key)
        kx, ky = jax.random.split(jax.random.fold_in(key, 1))
        x = jax.random.normal(kx, (16, 32, 32, 3))  # NHWC, as JAX models are written
        y = jax.random.randint(ky, (16,), 0, 10)
        return params, bufs, loss_fn, x, y
    else:
        raise NotImplementedError(f"no JAX version of {name}")
    plain = loss_fn

    def with_buffers(p, b, x, y):
        return plain(p, x, y), b

    return params, {}, with_buffers, x, y


def jax_step(name: str, params, loss_fn, out_shardings=None):
    """(step, initial optimizer state) of a bench model's optimizer in JAX:
    ``step(params, buffers, state, x, y) -> (params, buffers, state, loss)``,
    jitted with the parameters, buffers and state donated, so XLA updates
    them in place as torch's optimizers do. The state is what the optimizer
    uses and no more: SGD's momentum buffers; AdamW's two moments and its
    step count, a device scalar the step advances (as a capturable torch
    optimizer keeps it)."""
    import jax
    import jax.numpy as jnp

    tmap = jax.tree_util.tree_map
    if name in ("mlp", "resnet18"):  # SGD, momentum 0.9, lr 0.01
        state = tmap(jnp.zeros_like, params)

        def update(p, g, m):
            m = tmap(lambda m, g: 0.9 * m + g, m, g)
            return tmap(lambda p, m: p - 0.01 * m, p, m), m
    else:  # AdamW lr 1e-3, betas (0.9, 0.999), eps 1e-8, weight decay 0.01
        state = (tmap(jnp.zeros_like, params), tmap(jnp.zeros_like, params), jnp.zeros((), jnp.float32))

        def update(p, g, s):
            m, v, t = s
            t = t + 1
            m = tmap(lambda m, g: 0.9 * m + 0.1 * g, m, g)
            v = tmap(lambda v, g: 0.999 * v + 0.001 * g * g, v, g)
            bc1, bc2 = 1 - 0.9 ** t, 1 - 0.999 ** t
            p = tmap(lambda p, m, v: p * (1 - 1e-5) - 1e-3 * (m / bc1) / (jnp.sqrt(v / bc2) + 1e-8), p, m, v)
            return p, (m, v, t)

    def step(p, b, s, x, y):
        (loss, b), g = jax.value_and_grad(loss_fn, has_aux=True)(p, b, x, y)
        p, s = update(p, g, s)
        return p, b, s, loss

    # out_shardings (SPMD): the updated values keep their inputs' layouts.
    kw = {} if out_shardings is None else {"out_shardings": out_shardings}
    return jax.jit(step, donate_argnums=(0, 1, 2), **kw), state


def run_jax(name: str, steps: int, warmup: int, windows: int = 1) -> dict:
    params, bufs, loss_fn, x, y = jax_model(name)
    step, state = jax_step(name, params, loss_fn)
    return time_jax(step, params, bufs, state, x, y, steps, warmup, windows)


def time_jax(step, params, bufs, state, x, y, steps: int, warmup: int, windows: int, t0: float | None = None,
             sync: bool = False) -> dict:
    """A jax_step's first step (from `t0`, default now), then steps/s over
    windows, its outputs fed back as the next step's inputs. `sync` waits
    for each step before dispatching the next."""
    t0 = time.perf_counter() if t0 is None else t0
    params, bufs, state, loss = step(params, bufs, state, x, y)
    loss.block_until_ready()
    first = time.perf_counter() - t0
    for _ in range(warmup):
        params, bufs, state, loss = step(params, bufs, state, x, y)
        if sync:
            loss.block_until_ready()
    loss.block_until_ready()

    def window():
        nonlocal params, bufs, state
        for _ in range(steps):
            params, bufs, state, loss = step(params, bufs, state, x, y)
            if sync:
                loss.block_until_ready()
        return float(loss)  # waits for it

    return dict(first_step_s=first, **_windows(window, steps, windows))


# --- driver -------------------------------------------------------------------

def child(name: str, mode: str, steps: int, warmup: int, windows: int = 1, schedule: bool = False) -> None:
    if mode == "jax-jit":
        use_plugin_for_jax()
    if mode.startswith("jax"):
        res = run_jax(name, steps, warmup, windows)
    else:
        res = run_torch(name, mode, steps, warmup, windows, schedule)
    print("RESULT " + json.dumps(res))


def run_child(module: str, child_args: list, label: str, timeout: int = 1800, **env_extra) -> dict | None:
    """Runs ``python -m module --child *child_args`` in a fresh process with
    empty compilation caches, tpu's and Inductor's (cold start: a first
    step's time includes every compile); its RESULT line as a dict, or None with the failure's
    last lines on stderr."""
    env = dict(os.environ, **env_extra)
    with tempfile.TemporaryDirectory(prefix="tt_bench_cache_") as cache:
        env["TORCH_TPU_CACHE_DIR"] = cache
        # Inductor's own caches too: its cold start must include its compile.
        env["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(cache, "inductor")
        env["TORCHINDUCTOR_FX_GRAPH_CACHE"] = "0"
        env["TORCHINDUCTOR_AUTOGRAD_CACHE"] = "0"
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"  # the plugin logs harmless "Unsupported fusion type" lines
        r = subprocess.run([sys.executable, "-m", module, "--child", *map(str, child_args)],
                           env=env, capture_output=True, text=True, timeout=timeout)
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
    print(f"  {label} failed: {' | '.join(tail)}", file=sys.stderr)
    return None


def measure(name: str, mode: str, steps: int, warmup: int, windows: int = 1, schedule: bool = False) -> dict | None:
    extra = {"JAX_PLATFORMS": "cpu"} if mode == "jax-jit-bundled" else {}
    args = [name, mode, steps, warmup, windows] + (["--lr-schedule"] if schedule else [])
    return run_child("torch_tpu.bench.train", args, f"{name}/{mode}", **extra)


def repo_root() -> str:
    """The source checkout's root, when the package runs from one."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def default_out() -> str:
    # bench/results in a source checkout (where the docs link the charts).
    repo = repo_root()
    if os.path.isdir(os.path.join(repo, "bench")):
        return os.path.join(repo, "bench", "results")
    return os.path.abspath("bench_results")


# Items per step, for items/s: (count, unit).
ITEMS = {"mlp-demo": (64, "samples"), "mlp": (128, "samples"), "gpt": (GPT["batch"] * GPT["seq"], "tokens"),
         "resnet18": (16, "images")}


def items_of(results: dict, m: str) -> tuple:
    """(items per step, unit) of model m: ITEMS, or what the example reported."""
    if m in ITEMS:
        return ITEMS[m]
    r = next((r for r in (results.get(m) or {}).values() if r and "items_per_step" in r), None)
    return (r["items_per_step"], r["unit"]) if r else (1, "items")


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="mlp-demo,mlp,gpt,resnet18",
                    help="comma-separated; 'examples' stands for " + ",".join(EXAMPLES))
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--steps", type=int, default=0, help="timed steps (default: per model)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--windows", type=int, default=5,
                    help="timed windows of --steps steps each, in every process; steps/s is their median")
    ap.add_argument("--repeats", type=int, default=1,
                    help="rounds over every (model, mode), interleaved so that drift of the machine hits every mode "
                         "alike; each figure is the round with the median steps/s")
    ap.add_argument("--out", default=default_out())
    ap.add_argument("--lr-schedule", action="store_true",
                    help="step a cosine LR schedule after every training step (a new lr every step)")
    ap.add_argument("--child", nargs=5, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        child(a.child[0], a.child[1], int(a.child[2]), int(a.child[3]), int(a.child[4]), a.lr_schedule)
        return
    from tqdm import tqdm

    models = [n for m in a.models.split(",") for n in (list(EXAMPLES) if m == "examples" else [m])]
    modes = a.modes.split(",")
    if any(m in EXAMPLES for m in models) and examples_dir() is None:
        print("examples/ not found (not a source checkout): skipping the ex-* models")
        models = [m for m in models if m not in EXAMPLES]
    try:
        import jax  # noqa: F401
    except ImportError:
        if any(m.startswith("jax") for m in modes):
            print("JAX is not installed: skipping the jax columns (pip install -r requirements-bench.txt)")
            modes = [m for m in modes if not m.startswith("jax")]
    default_steps = {"mlp-demo": 200, "mlp": 50, "gpt": 10, "resnet18": 10,
                     **{name: e[2] for name, e in EXAMPLES.items()}}
    results: dict = {}
    # No JAX version of the examples' models.
    jobs = [(m, mode) for m in models for mode in modes if not (mode.startswith("jax") and m in EXAMPLES)]
    rounds: dict = {}
    for m, mode in tqdm(jobs * max(a.repeats, 1), desc="train-step bench", unit="run"):
        rounds.setdefault((m, mode), []).append(measure(m, mode, a.steps or default_steps.get(m, 10), a.warmup,
                                                           a.windows, a.lr_schedule))
    for (m, mode), runs in rounds.items():
        results.setdefault(m, {})[mode] = median_run(runs)

    os.makedirs(a.out, exist_ok=True)
    lines = []
    for m in models:
        lines.append(f"\n{m}: {MODELS.get(m, m)}")
        n_items, unit = items_of(results, m)
        lines.append(f"{'mode':<19}{'steps/s':>10}{unit + '/s':>12}{'first step s':>14}{'1st / strict':>14}"
                     f"{'vs strict':>11}{'vs JAX':>9}{'vs jaxlib':>10}{'compiles':>10}{'peak MiB':>10}")
        base = (results[m].get("tpu-strict") or {}).get("steps_per_s")
        base_first = (results[m].get("tpu-strict") or {}).get("first_step_s")
        # JAX on torch_tpu's plugin (what torch_tpu adds over the same XLA
        # build) and on jaxlib's own XLA:CPU (the best this machine does).
        jax_sps = (results[m].get("jax-jit") or {}).get("steps_per_s")
        jaxlib_sps = (results[m].get("jax-jit-bundled") or {}).get("steps_per_s")
        for mode in modes:
            if mode not in results[m]:
                continue
            r = results[m][mode]
            if r is None:
                lines.append(f"{mode:<19}{'failed (the error is above)':>40}")
                continue
            sps = r["steps_per_s"]
            vs = f"{sps / base:.2f}x" if base else "-"
            vj = f"{sps / jax_sps:.2f}x" if jax_sps else "-"
            vjl = f"{sps / jaxlib_sps:.2f}x" if jaxlib_sps else "-"
            vf = f"{r['first_step_s'] / base_first:.2f}x" if base_first else "-"
            peak = r.get("peak_bytes")
            peak = f"{peak / 2**20:.0f}" if peak is not None else "-"
            spread = r.get("steps_per_s_runs")
            spread = f"  ({min(spread):.1f}-{max(spread):.1f} over {len(spread)} rounds)" if spread else ""
            lines.append(f"{mode:<19}{sps:>10.1f}{sps * n_items:>12.0f}{r['first_step_s']:>14.2f}{vf:>14}{vs:>11}"
                         f"{vj:>9}{vjl:>10}{r.get('compiles', '-'):>10}{peak:>10}{spread}")
    text = "\n".join(lines)
    print(text)
    with open(os.path.join(a.out, "train_step.json"), "w") as f:
        json.dump({"machine": machine(), "results": results}, f, indent=1)
    write_csv(results, models, modes, os.path.join(a.out, "train_step.csv"))
    plot(results, models, modes, os.path.join(a.out, "train_step.png"))


def median_run(runs: list):
    """The run with the median steps/s of several rounds (None if any failed),
    with every round's steps/s and first-step time beside it."""
    if any(r is None for r in runs):
        return None
    if len(runs) == 1:
        return runs[0]
    ordered = sorted(runs, key=lambda r: r["steps_per_s"])
    best = dict(ordered[(len(ordered) - 1) // 2])
    best["steps_per_s_runs"] = [r["steps_per_s"] for r in runs]
    best["first_step_s_runs"] = [r["first_step_s"] for r in runs]
    return best


def write_csv(results, models, modes, path) -> None:
    import csv

    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "mode", "steps_per_s", "items_per_s", "unit", "first_step_s", "compiles", "peak_bytes"])
        for m in models:
            n_items, unit = items_of(results, m)
            for mode in modes:
                r = (results.get(m) or {}).get(mode)
                if r:
                    w.writerow([m, mode, f"{r['steps_per_s']:.3f}", f"{r['steps_per_s'] * n_items:.1f}", unit,
                                f"{r['first_step_s']:.3f}", r.get("compiles", ""), r.get("peak_bytes", "")])
    print(f"wrote {path}")


def machine() -> str:
    import platform

    return f"{platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"


def plot(results, models, modes, path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart (pip install -r requirements-bench.txt)")
        return
    fig, axes = plt.subplots(1, len(models), figsize=(4 * len(models), 3.6), squeeze=False)
    for ax, m in zip(axes[0], models):
        names = [mode for mode in modes if results[m].get(mode)]
        vals = [results[m][mode]["steps_per_s"] for mode in names]
        palette = {"cpu-eager": "#888", "cpu-inductor": "#aaa", "cpu-dynamo": "#bbb", "dynamo-floor": "#ccc",
                   "tpu-strict": "#4a7",
                   "tpu-fused": "#2a5",
                   "tpu-compile": "#075", "tpu-compile-engine": "#064", "tpu-graph": "#053", "jax-jit": "#c63",
                   "jax-jit-bundled": "#e96"}
        ax.bar(range(len(names)), vals, color=[palette.get(n, "#555") for n in names])
        # dynamo's floor (a backend that computes nothing) runs 10-1000x
        # faster than any real mode: scale the axis to the real modes and
        # print each bar's value, the cut-off floor's included.
        real = [v for n, v in zip(names, vals) if n not in ("dynamo-floor", "cpu-dynamo")]
        top = 1.2 * max(real) if real else None
        if top:
            ax.set_ylim(0, top)
        for i, v in enumerate(vals):
            label = f"{v:,.0f}" if v >= 100 else f"{v:.1f}"
            ax.text(i, min(v, top * 0.93) if top else v, label, ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(names)), names, rotation=45, ha="right", fontsize=8)
        ax.set_title(m, fontsize=10)
        ax.set_ylabel("steps/s")
    fig.suptitle(f"Training steps/s ({machine()})", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
