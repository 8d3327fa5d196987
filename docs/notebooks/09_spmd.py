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
    # 9. SPMD on one host

    `torch_tpu.spmd` lets one process drive every device of a host. You lay
    tensors out over a grid of devices (a *mesh*), and a compiled function
    that reads them becomes one SPMD program: XLA's partitioner splits it
    over the mesh, adds the collectives it needs, and every device runs its
    part at the same time. The names follow torch_xla's
    `torch_xla.distributed.spmd`; `docs/spmd.md` is the reference.

    SPMD or `torchrun`? With SPMD one process runs one partitioned program
    on all local devices, and you say how tensors are split rather than
    where data moves. With `torchrun` and the `"tpu"` process group (chapter
    6, `docs/distributed.md`) each device has its own process and the
    processes exchange data through c10d collectives, which is also how you
    span several hosts.
    """)
    return


@app.cell
def _(mo):
    import os

    # torch_tpu reads this once, when it loads, and `import torch` loads it:
    # set the variable first. It only matters on XLA:CPU.
    os.environ.setdefault("TORCH_TPU_NUM_CPU_DEVICES", "4")

    import tempfile
    import time
    import warnings

    import numpy as np
    import torch
    import torch.nn.functional as F

    import torch_tpu
    import torch_tpu.spmd as xs

    _n = torch.tpu.device_count()
    if torch.tpu.get_device_name() == "XLA:CPU":
        assert _n == 4, (
            f"{_n} tpu device(s): TORCH_TPU_NUM_CPU_DEVICES={os.environ['TORCH_TPU_NUM_CPU_DEVICES']} was read when "
            "torch was first imported. Set it to 4 (or unset it) and restart the kernel."
        )
    else:
        assert _n >= 4, f"this chapter needs 4 devices, {torch.tpu.get_device_name()} has {_n}"
    mo.md(
        f"torch {torch.__version__}, torch_tpu {torch_tpu.__version__} on **{torch.tpu.get_device_name()}**: "
        f"`torch.tpu.device_count()` → `{_n}` (" + ", ".join(f"`tpu:{_i}`" for _i in range(_n)) + ")"
    )
    return F, np, os, tempfile, time, torch, torch_tpu, warnings, xs


@app.cell
def _(mo):
    mo.md(r"""
    On XLA:CPU the number of devices comes from the environment variable
    `TORCH_TPU_NUM_CPU_DEVICES` (default 1). torch_tpu is loaded
    automatically by `import torch` and creates its devices then, so the cell
    above sets the variable before that import. Setting it later has no
    effect; restart the kernel instead. On a TPU VM the devices are the
    chips, and the variable is ignored. Each XLA:CPU device computes on the
    host's cores, so four of them show how programs are split, not a speed-up.

    ## The mesh

    A `Mesh` arranges device indices in a grid, row-major, and names its
    axes. A 2 × 2 mesh with a `"data"` and a `"model"` axis is the usual
    shape for data parallelism combined with tensor parallelism.
    """)
    return


@app.cell
def _(mo, np, xs):
    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
    mo.md(f"""
    ```python
    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
    ```

    - `mesh.shape()` → `{mesh.shape()}`
    - `mesh.get_logical_mesh()` → `{mesh.get_logical_mesh().tolist()}`: `tpu:1` sits at `data` 0, `model` 1
    """)
    return (mesh,)


@app.cell
def _(mo):
    mo.md(r"""
    ## Sharding a tensor

    A partition spec has one entry per tensor dimension: the mesh axis that
    dimension is split over (or a tuple of axes), or `None` to keep it whole.
    Mesh axes the spec does not name hold copies. `xs.mark_sharding(t, mesh,
    spec)` spreads a tpu tensor in place; `xs.shard(host_tensor, mesh, spec)`
    creates a sharded tpu tensor from a host tensor in one call, sending each
    device only its block.

    `xs.get_sharding(t)` describes the layout (`.hlo` is XLA's notation,
    `.tiles` the number of pieces per dimension, `.replicated` whether every
    device holds all of it), and `xs.local_shards(t)` copies each device's
    block to the host. Below, an 8 × 4 tensor under three specs:
    """)
    return


@app.cell
def _(mesh, mo, torch, xs):
    a = torch.arange(32.0).reshape(8, 4)

    a_2d = a.to("tpu")
    xs.mark_sharding(a_2d, mesh, ("data", "model"))  # in place: rows over "data", columns over "model"
    a_rows = xs.shard(a, mesh, ("data", None))  # from the host: rows over "data", copies along "model"
    a_full = xs.shard(a, mesh, (None, None))  # every device holds all of it

    def describe(code, t):
        _s = xs.get_sharding(t)
        _blocks = xs.local_shards(t)
        _lines = [f"tpu:{_d}: {tuple(_b.shape)} {_b.tolist()}" for _d, _b in enumerate(_blocks)]
        if _s.replicated:
            _lines = [f"tpu:{_d}: {tuple(_b.shape)}, all 32 values" for _d, _b in enumerate(_blocks)]
        return (
            f"`{code}`\n\n"
            f"hlo `{_s.hlo}`, tiles `{_s.tiles}`, replicated `{_s.replicated}`\n\n"
            "```\n" + "\n".join(_lines) + "\n```"
        )

    assert torch.equal(a_2d.cpu(), a) and torch.equal(a_rows.cpu(), a) and torch.equal(a_full.cpu(), a)
    mo.md(
        "\n\n".join(
            [
                describe('xs.mark_sharding(t, mesh, ("data", "model"))', a_2d),
                describe('xs.shard(a, mesh, ("data", None))', a_rows),
                describe("xs.shard(a, mesh, (None, None))", a_full),
            ]
        )
        + "\n\nReading a sharded tensor on the host (`.cpu()`, `.item()`, printing) assembles the whole value: "
        "all three read back as `a`."
    )
    return a, a_2d


@app.cell
def _(a, a_2d, mo, torch, xs):
    xs.clear_sharding(a_2d)
    assert xs.get_sharding(a_2d) is None and torch.equal(a_2d.cpu(), a)
    mo.md(f"""
    `xs.clear_sharding(t)` gathers the tensor whole onto its own device and drops
    the layout: `xs.get_sharding(t)` → `{xs.get_sharding(a_2d)}`, on `{a_2d.device}`.
    torch_tpu warns each time it gathers a sharded tensor outside an SPMD program, as it
    does here; ops outside `torch.compile` (or fused eager) on a sharded tensor run on the
    whole value too, gathered the same way, and the tensor keeps its layout.
    """)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## A compiled function over the mesh

    A `torch.compile(backend="tpu")` function whose inputs are sharded
    compiles into one SPMD program. Here `x` is split by rows over `"data"`
    and `w` by columns over `"model"`, so every device computes one block of
    `x @ w`; the sum needs every block, so the partitioner adds the
    reduction. Outputs come back sharded the way the partitioner laid them
    out.

    When it compiles such a program, XLA logs that its GSPMD sharding
    propagation, which partitions it, is to be replaced by Shardy; the
    notice does not change the result.
    """)
    return


@app.cell
def _(mesh, mo, torch, torch_tpu, xs):
    @torch.compile(backend="tpu")
    def matmul_relu_sum(x, w):
        y = x @ w
        return y.relu().sum(), y

    _x, _w = torch.randn(8, 6), torch.randn(6, 4)
    torch_tpu.debug.reset_metrics()
    _total, _y = matmul_relu_sum(xs.shard(_x, mesh, ("data", None)), xs.shard(_w, mesh, (None, "model")))
    torch.testing.assert_close(_y.cpu(), _x @ _w)
    torch.testing.assert_close(_total.cpu(), (_x @ _w).relu().sum())
    _m = torch_tpu.debug.metrics()
    if "spmd" in _m["compiles_by_op"]:
        _compiled = (
            f'`torch_tpu.debug.metrics()["compiles_by_op"]["spmd"]` → `{_m["compiles_by_op"]["spmd"]}`: '
            "(programs compiled, milliseconds)."
        )
    else:
        _compiled = (
            "The program came from the disk cache (chapter 3), so nothing compiled; on a cold cache "
            '`torch_tpu.debug.metrics()["compiles_by_op"]` gets an `"spmd"` entry, (programs compiled, milliseconds).'
        )
    mo.md(f"""
    | output | shape | `xs.get_sharding(...).hlo` | block on `tpu:0` |
    |---|---|---|---|
    | `y` | `{tuple(_y.shape)}` | `{xs.get_sharding(_y).hlo}` | `{tuple(xs.local_shards(_y)[0].shape)}` |
    | `y.relu().sum()` | `()` | `{xs.get_sharding(_total).hlo}` | `{tuple(xs.local_shards(_total)[0].shape)}` |

    Both match PyTorch on CPU. The call ran as one program over the four devices
    (`torch_tpu.debug.metrics()["executions"]` → `{_m["executions"]}`). {_compiled}
    Inputs with another layout make another program; the same layout reuses this one.
    """)
    return


@app.cell
def _(F, torch):
    from torch_tpu.bench.train import gpt_model

    C = dict(vocab=64, d=32, layers=2, heads=2, seq=16, batch=8)
    STEPS = 5

    # Six batches of a task the model can learn: each target is its input token plus one.
    _g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(STEPS + 1):
        _x = torch.randint(0, C["vocab"], (C["batch"], C["seq"]), generator=_g)
        batches.append((_x, (_x + 1) % C["vocab"]))

    def new_gpt(device):
        """(model, optimizer, training step): the same initial weights every time."""
        torch.manual_seed(0)
        model = gpt_model(C).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

        def step(x, y):
            opt.zero_grad(set_to_none=True)
            logits = model(x)
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            loss.backward()
            opt.step()
            return loss

        return model, opt, step

    # The reference: the same training on the CPU, no torch_tpu involved.
    _, _, _cpu_step = new_gpt("cpu")
    cpu_losses = [_cpu_step(_x, _y).item() for _x, _y in batches]
    return STEPS, batches, cpu_losses, new_gpt


@app.cell
def _(mo):
    mo.md(r"""
    ## Training a sharded model

    The model is the benchmark suite's small GPT (`torch_tpu.bench.train.gpt_model`),
    shrunk to two layers of width 32. On the 2 × 2 mesh, each block is split
    Megatron-style over `"model"`: the attention input projection `qkv` and
    the first MLP layer `fc1` by output features (weight rows and bias), the
    projections that follow (`proj`, `fc2`) by input features (weight
    columns). The other parameters stay whole on every device. Each batch is
    split by rows over `"data"`. The training step is the one you would write
    for one device, compiled with `backend="tpu"`: zero the gradients,
    forward, loss, backward, `AdamW.step()`.
    """)
    return


@app.cell
def _(STEPS, batches, cpu_losses, mesh, mo, new_gpt, time, torch, torch_tpu, xs):
    model, opt, _step = new_gpt("tpu")
    for _b in model.blocks:
        for _lin in (_b.qkv, _b.fc1):  # column-parallel: output features split
            xs.mark_sharding(_lin.weight, mesh, ("model", None))
            xs.mark_sharding(_lin.bias, mesh, ("model",))
        for _lin in (_b.proj, _b.fc2):  # row-parallel: input features split
            xs.mark_sharding(_lin.weight, mesh, (None, "model"))
    train_step = torch.compile(_step, backend="tpu")

    _rows = []
    for _name, _p in model.blocks[0].named_parameters():
        _s = xs.get_sharding(_p)
        _rows.append(
            f"| `blocks.0.{_name}` | `{tuple(_p.shape)}` | `{'whole' if _s is None else _s.hlo}` "
            f"| `{tuple(_p.shape) if _s is None else tuple(xs.local_shards(_p)[0].shape)}` |"
        )

    torch_tpu.debug.reset_metrics()
    _t0 = time.perf_counter()
    _pending = []
    for _x, _y in batches[:STEPS]:
        # A host batch onto the mesh: rows split over "data", copies along "model".
        _pending.append(train_step(xs.shard(_x, mesh, ("data", None)), xs.shard(_y, mesh, ("data", None))))
    spmd_losses = [_l.item() for _l in _pending]
    _secs = time.perf_counter() - _t0
    _programs, _ms = torch_tpu.debug.metrics()["compiles_by_op"].get("spmd", (0, 0.0))

    torch.testing.assert_close(torch.tensor(spmd_losses), torch.tensor(cpu_losses[:STEPS]), rtol=1e-5, atol=1e-5)
    _loss_rows = "\n".join(
        f"| {_i + 1} | {_a:.6f} | {_c:.6f} | {abs(_a - _c):.1e} |"
        for _i, (_a, _c) in enumerate(zip(spmd_losses, cpu_losses))
    )
    mo.md(
        "The layout of the first block's parameters (the second block is the same):\n\n"
        "| parameter | shape | layout | block on `tpu:0` |\n|---|---|---|---|\n"
        + "\n".join(_rows)
        + "\n\n`[2,1,2]` with `last_tile_dim_replicate` reads: 2 pieces along dimension 0, 1 along dimension 1, "
        "each held by 2 devices (the `data` axis, which the spec leaves out).\n\n"
        f"{STEPS} training steps on the mesh, against the same steps on the CPU:\n\n"
        "| step | SPMD loss | CPU loss | difference |\n|---|---|---|---|\n"
        + _loss_rows
        + f"\n\nThe {STEPS} steps took {_secs:.1f} s. The step is two SPMD programs: one for the first step, "
        "which also creates AdamW's state, and one for every step after it. This run compiled "
        f"{_programs} of them ({_ms / 1000:.1f} s); when they are in the disk cache, none compile. "
        "The losses agree with the CPU within `rtol=1e-5, atol=1e-5` (`torch.testing.assert_close`), and the "
        "notebook stops with an error if they do not."
    )
    return model, opt


@app.cell
def _(mo, model, opt, xs):
    _w = model.blocks[0].fc1.weight
    _state = opt.state[_w]
    assert xs.get_sharding(_state["exp_avg"]).hlo == xs.get_sharding(_w).hlo
    _rows = [("`w`", _w)] + [(f'`opt.state[w]["{_k}"]`', _state[_k]) for _k in ("exp_avg", "exp_avg_sq", "step")]
    _table = "\n".join(
        f"| {_n} | `{tuple(_t.shape)}` | `{xs.get_sharding(_t).hlo}` | `{tuple(xs.local_shards(_t)[0].shape)}` |"
        for _n, _t in _rows
    )
    mo.md(
        "## The optimizer state is sharded too\n\n"
        "AdamW keeps two tensors per parameter. Each takes the layout of its parameter, so a device holds "
        "the state of its own block only. For `w = model.blocks[0].fc1.weight`:\n\n"
        "| tensor | shape | layout | block on `tpu:0` |\n|---|---|---|---|\n" + _table
    )
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## Checkpoints, and loading into another layout

    `torch.distributed.checkpoint` (DCP) saves sharded tensors as they are:
    `get_state_dict(model, opt)` collects the model's and optimizer's state,
    and `dcp.save` writes it to a folder. Loading goes the other way:
    `dcp.load` reads the checkpoint into the state dict of a model that is
    already laid out, its tensors keeping their layout, and `set_state_dict`
    hands the values to the model and optimizer. The layout on load does
    not need to be the layout on save: here the model trained on the 2 × 2
    mesh is loaded FSDP-style, every parameter split by its first dimension
    over a 1-D mesh of the four devices.

    Two warnings are expected and silenced. Without
    `torch.distributed.init_process_group`, DCP warns that it assumes a
    single process; that is the case here, since one process drives all four
    devices. And `set_state_dict` copies the loaded values into the
    parameters with eager ops, which torch_tpu runs on the gathered value
    and reports; that happens once, at load time.
    """)
    return


@app.cell
def _(mo, model, new_gpt, np, opt, os, tempfile, torch, warnings, xs):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    fsdp_mesh = xs.Mesh(np.arange(4), (4,), ("data",))
    model2, opt2, step2 = new_gpt("tpu")  # fresh weights: the load must overwrite them
    for _p in model2.parameters():
        xs.mark_sharding(_p, fsdp_mesh, ("data",) + (None,) * (_p.dim() - 1))

    with warnings.catch_warnings(), tempfile.TemporaryDirectory(prefix="torch_tpu_spmd_ckpt_") as _dir:
        warnings.filterwarnings("ignore", message=r".*assuming the intent is to (save|load) in a single process")
        warnings.filterwarnings("ignore", message=r"tpu: a tensor sharded over a mesh was gathered")
        _msd, _osd = get_state_dict(model, opt)
        dcp.save({"model": _msd, "optim": _osd}, checkpoint_id=_dir)
        _files = sorted(os.listdir(_dir))

        _msd2, _osd2 = get_state_dict(model2, opt2)
        _sd = {"model": _msd2, "optim": _osd2}
        dcp.load(_sd, checkpoint_id=_dir)
        set_state_dict(model2, opt2, model_state_dict=_sd["model"], optim_state_dict=_sd["optim"])

    for (_name, _p), _q in zip(model2.named_parameters(), model.parameters()):
        torch.testing.assert_close(_p.detach().cpu(), _q.detach().cpu(), rtol=0, atol=0, msg=lambda m: f"{_name}: {m}")
    for _p, _q in zip(model2.parameters(), model.parameters()):
        for _k in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(opt2.state[_p][_k].cpu(), opt.state[_q][_k].cpu(), rtol=0, atol=0)
    _w, _w2 = model.blocks[0].fc1.weight, model2.blocks[0].fc1.weight
    _m2 = opt2.state[_w2]["exp_avg"]
    assert xs.get_sharding(_w2).tiles == (4, 1)
    mo.md(f"""
    The checkpoint folder held `{_files}`. Every parameter and every AdamW state tensor of the loaded
    model equals the saved one, bit for bit (`rtol=0, atol=0`), and the step counter reads
    `{opt2.state[_w2]["step"].item():.0f}`. Only the layout changed:

    | `blocks.0.fc1.weight` | layout | block on `tpu:0` |
    |---|---|---|
    | saved (2 × 2 mesh) | `{xs.get_sharding(_w).hlo}` | `{tuple(xs.local_shards(_w)[0].shape)}` |
    | loaded (1-D mesh, FSDP-style) | `{xs.get_sharding(_w2).hlo}` | `{tuple(xs.local_shards(_w2)[0].shape)}` |
    | its `exp_avg` after loading | `{xs.get_sharding(_m2).hlo}` | `{tuple(xs.local_shards(_m2)[0].shape)}` |
    """)
    return fsdp_mesh, step2


@app.cell
def _(STEPS, batches, cpu_losses, fsdp_mesh, mo, step2, torch, xs):
    _x, _y = batches[STEPS]
    _resumed_step = torch.compile(step2, backend="tpu")
    _x, _y = xs.shard(_x, fsdp_mesh, ("data", None)), xs.shard(_y, fsdp_mesh, ("data", None))
    resumed_loss = _resumed_step(_x, _y).item()
    torch.testing.assert_close(resumed_loss, cpu_losses[STEPS], rtol=1e-5, atol=1e-5)
    mo.md(f"""
    Training goes on from the checkpoint in the new layout. Step {STEPS + 1}, on the loaded model with its
    batch split over the four devices, has loss **{resumed_loss:.6f}**; the CPU run, which never stopped,
    has {cpu_losses[STEPS]:.6f} at the same step.
    """)
    return


@app.cell
def _(mo):
    mo.md(r"""
    ## What to take away

    - On XLA:CPU, set `TORCH_TPU_NUM_CPU_DEVICES` before the first `import torch`;
      on a TPU VM the devices are the chips.
    - `xs.Mesh` names the device grid; a partition spec says which mesh axis splits
      which tensor dimension. `xs.mark_sharding` lays out a tpu tensor in place,
      `xs.shard` sends a host tensor straight to the mesh.
    - A function compiled with `torch.compile(backend="tpu")` over sharded inputs is
      one SPMD program. XLA inserts the collectives, and parameters and optimizer
      state keep their layouts across steps.
    - `xs.get_sharding` and `xs.local_shards` show where every block lives;
      `xs.clear_sharding` gathers a tensor back onto one device.
    - `torch.distributed.checkpoint` saves sharded state and loads it into another
      layout, with no process group.
    - To use several hosts, or to run one process per device, use `torchrun` and the
      `"tpu"` process group (chapter 6, `docs/distributed.md`).
    """)
    return


if __name__ == "__main__":
    app.run()
