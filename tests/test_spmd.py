"""torch_tpu.spmd: one process, a mesh of devices, SPMD programs partitioned
by XLA.

The checks need four devices. The test process has one, so the last test
re-runs this file in a process with TORCH_TPU_NUM_CPU_DEVICES=4; there the
other tests run and that one skips. Expected values come from PyTorch on CPU.
"""
import copy
import json
import math
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import rerun_with_devices

import torch_tpu
import torch_tpu.spmd as xs
from torch_tpu.bench.train import gpt_model

N = 4
four = pytest.mark.skipif(torch.tpu.device_count() < N, reason="needs 4 tpu devices (run by the last test)")


def compiles() -> int:
    return torch_tpu.debug.metrics()["compiles"]


def donated() -> int:
    return torch_tpu.debug.metrics()["donated_buffers"]


def programs_fetched() -> int:
    """Programs taken from below the memory tier: compiled, or loaded from the
    disk tier (which another test's process may have filled)."""
    return torch_tpu.debug.metrics()["cache_misses"]


@four
def test_mesh_checks_its_arguments():
    with pytest.raises(ValueError, match="holds 4 devices"):
        xs.Mesh(np.arange(3), (2, 2))
    with pytest.raises(ValueError, match="out of range"):
        xs.Mesh(np.arange(8), (8,))
    with pytest.raises(ValueError, match="distinct"):
        xs.Mesh([0, 0, 1, 2], (4,))
    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
    assert mesh.size() == 4 and mesh.shape() == {"data": 2, "model": 2}
    assert mesh.get_logical_mesh().tolist() == [[0, 1], [2, 3]]
    t = torch.zeros(4, 4, device="tpu")
    with pytest.raises(ValueError, match="unknown mesh axis"):
        xs.mark_sharding(t, mesh, ("rows", None))
    with pytest.raises(ValueError, match="2 dimensions"):
        xs.mark_sharding(t, mesh, ("data",))
    with pytest.raises(ValueError, match="appears twice"):
        xs.mark_sharding(t, mesh, ("data", "data"))
    with pytest.raises(TypeError, match="tpu tensor"):
        xs.mark_sharding(torch.zeros(4), mesh, ("data",))
    with pytest.raises(RuntimeError, match="span its whole storage"):
        xs.mark_sharding(t[1:], mesh, ("data", None))


def blocks_of(x, rows, cols):
    """The tiles of a 2-d tensor, rows x cols, row-major (torch.chunk)."""
    return [c for r in x.chunk(rows, 0) for c in r.chunk(cols, 1)]


@four
@pytest.mark.parametrize("spec, tiles", [
    (("data", None), (2, 1)), ((None, "model"), (1, 2)), (("data", "model"), (2, 2)),
    (("model", "data"), (2, 2)), ((("data", "model"), None), (4, 1)), ((None, None), None)])
def test_shard_places_blocks_and_reads_back_whole(spec, tiles):
    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
    x = torch.randn(8, 6)
    t = xs.shard(x, mesh, spec)
    torch.testing.assert_close(t.cpu(), x)
    s = xs.get_sharding(t)
    shards = xs.local_shards(t)
    if tiles is None:
        assert s.replicated and s.hlo == "{replicated}"
        for b in shards:
            torch.testing.assert_close(b, x.reshape(-1))
        return
    assert s.tiles == tiles
    # Device d = mesh position (i, j): which block it holds follows the spec.
    expected = blocks_of(x, *tiles)
    for d, b in enumerate(shards):
        i, j = divmod(d, 2)
        pos = {"data": i, "model": j}
        coord = []
        for entry, n in zip(spec, tiles):
            axes = () if entry is None else (entry if isinstance(entry, tuple) else (entry,))
            k = 0
            for a in axes:
                k = k * 2 + pos[a]
            coord.append(k)
        torch.testing.assert_close(b, expected[coord[0] * tiles[1] + coord[1]])


@four
def test_uneven_split_pads_like_xla():
    mesh = xs.Mesh(np.arange(4), (4,), ("data",))
    x = torch.arange(10.0)
    t = xs.shard(x, mesh, ("data",))
    torch.testing.assert_close(t.cpu(), x)
    shards = xs.local_shards(t)
    assert [b.tolist() for b in shards] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 0, 0]]
    torch.testing.assert_close((t * 2).cpu(), x * 2)


@four
def test_compiled_graph_runs_as_one_spmd_program(fresh_dynamo):
    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
    a, b = torch.randn(8, 6), torch.randn(6, 4)
    at = xs.shard(a, mesh, ("data", None))
    bt = xs.shard(b, mesh, (None, "model"))

    @torch.compile(backend="tpu")
    def f(x, w):
        y = x @ w
        return y.relu().sum(), y

    before = programs_fetched()
    for _ in range(3):
        s, y = f(at, bt)
        torch.testing.assert_close(y.cpu(), a @ b)
        torch.testing.assert_close(s.cpu(), (a @ b).relu().sum())
    assert programs_fetched() - before == 1
    assert xs.get_sharding(s).replicated
    assert not xs.get_sharding(y).replicated  # laid out by the partitioner
    # Another layout of the same graph is another program (the key holds it).
    ct = xs.shard(a, mesh, (None, "model"))
    _, y2 = f(ct, bt)
    torch.testing.assert_close(y2.cpu(), a @ b)
    assert programs_fetched() - before == 2


@four
def test_fused_eager_flush_runs_over_the_mesh():
    mesh = xs.Mesh(np.arange(4), (4,), ("data",))
    x = torch.randn(16, 8)
    w = torch.randn(8, 8)
    xt = xs.shard(x, mesh, ("data", None))
    wt = w.to("tpu")
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        y = torch.tanh(xt @ wt) + 1
        xt.mul_(2)
        torch_tpu.mark_step()
    assert xs.get_sharding(xt).tiles == (4, 1)  # written in place: keeps its layout
    torch.testing.assert_close(y.cpu(), torch.tanh(x @ w) + 1)
    torch.testing.assert_close(xt.cpu(), x * 2)


@four
@pytest.mark.parametrize("spec", [("data", None), (None, None)])
def test_a_step_updates_its_weights_in_place(spec, fresh_dynamo):
    # A storage the program overwrites in the same layout gives its blocks to
    # the result (the program's input-output alias): a step's weights and
    # optimizer state take no second copy of device memory.
    mesh = xs.Mesh(np.arange(4), (4,), ("data",))
    w0, x0 = torch.randn(8, 8), torch.randn(16, 8)
    w = xs.shard(w0.clone(), mesh, spec)
    x = xs.shard(x0, mesh, ("data", None))
    kept = copy.deepcopy(w)  # another tensor that holds the value before the steps

    @torch.compile(backend="tpu")
    def step(w, x):
        loss = (x @ w).tanh().sum()
        w.sub_(0.01 * w.sign())
        return loss

    before, ref = donated(), w0.clone()
    for _ in range(3):
        loss = step(w, x)
        torch.testing.assert_close(loss.cpu(), (x0 @ ref).tanh().sum(), rtol=1e-5, atol=1e-4)
        ref = ref - 0.01 * ref.sign()
    torch.testing.assert_close(w.cpu(), ref)
    torch.testing.assert_close(kept.cpu(), w0)
    assert xs.get_sharding(w).replicated == (spec == (None, None))
    assert donated() - before >= 2, "the weight's blocks were not donated"
    # Fused eager donates the same way.
    before = donated()
    with torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE):
        for _ in range(2):
            w.mul_(2)
            torch_tpu.mark_step()
    torch.testing.assert_close(w.cpu(), ref * 4)
    torch.testing.assert_close(kept.cpu(), w0)
    assert donated() - before >= 1


@four
def test_strict_eager_op_gathers_and_keeps_the_sharding():
    mesh = xs.Mesh(np.arange(4), (4,), ("data",))
    x = torch.randn(8, 3)
    t = xs.shard(x, mesh, ("data", None))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        y = t.exp()
    torch.testing.assert_close(y.cpu(), x.exp())
    assert xs.get_sharding(t).tiles == (4, 1)
    t.add_(1)  # an eager write: the layout sticks, the shards follow the value
    assert xs.get_sharding(t).tiles == (4, 1)
    torch.testing.assert_close(t.cpu(), x + 1)
    torch.testing.assert_close(torch.cat(xs.local_shards(t)), x + 1)


@four
def test_dtensor_layouts_are_accepted():
    from torch.distributed.device_mesh import DeviceMesh
    from torch.distributed.tensor import Replicate, Shard

    # A mesh over this process's devices needs no process group.
    dm = DeviceMesh("tpu", torch.arange(4).reshape(2, 2), mesh_dim_names=("dp", "tp"), _init_backend=False,
                    _rank=0)
    x = torch.randn(8, 6)
    t = xs.mark_sharding(x.to("tpu"), dm, [Shard(0), Replicate()])
    s = xs.get_sharding(t)
    assert s.tiles == (2, 1) and s.replicas == 2
    torch.testing.assert_close(t.cpu(), x)
    u = xs.mark_sharding(x.to("tpu"), dm, [Shard(1), Shard(0)])  # dim 0 over "tp", dim 1 over "dp"
    assert xs.get_sharding(u).hlo == xs.get_sharding(xs.shard(x, xs.Mesh(np.arange(4), (2, 2), ("dp", "tp")),
                                                               ("tp", "dp"))).hlo
    with pytest.raises(ValueError, match="no SPMD layout"):
        from torch.distributed.tensor import Partial
        xs.mark_sharding(x.to("tpu"), dm, [Partial(), Replicate()])


@four
def test_clear_sharding_gathers():
    mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
    x = torch.randn(4, 4)
    t = xs.shard(x, mesh, ("data", "model"))
    xs.clear_sharding(t)
    assert xs.get_sharding(t) is None
    torch.testing.assert_close(t.cpu(), x)


@four
def test_tensors_on_different_meshes_raise(fresh_dynamo):
    m1 = xs.Mesh([0, 1], (2,), ("data",))
    m2 = xs.Mesh([0, 2], (2,), ("data",))
    a = xs.shard(torch.randn(4), m1, ("data",))
    b = xs.shard(torch.randn(4), m2, ("data",))
    with pytest.raises(RuntimeError, match="different meshes"):
        torch.compile(lambda x, y: x + y, backend="tpu")(a, b)
    # The failed graph left nothing half-done: the device keeps working.
    c = xs.shard(torch.arange(4.0), m1, ("data",))
    torch.testing.assert_close(torch.compile(lambda x: x * 2, backend="tpu")(c).cpu(), torch.arange(4.0) * 2)


# --- training patterns: the bench's GPT, small ----------------------------

C = dict(vocab=64, d=32, layers=2, heads=2, seq=16, batch=8)


def shard_model(model, pattern, n=4):
    """The pattern's mesh over `n` devices, with the model's parameters
    marked (none for dp)."""
    if pattern in ("dp", "fsdp"):
        mesh = xs.Mesh(np.arange(n), (n,), ("data",))
        if pattern == "fsdp":
            for p in model.parameters():
                xs.mark_sharding(p, mesh, ("data",) + (None,) * (p.dim() - 1))
        return mesh
    mesh = xs.Mesh(np.arange(n), (1, n) if pattern == "tp" else (n // 2, 2), ("data", "model"))
    for b in model.blocks:
        for lin in (b.qkv, b.fc1):  # column-parallel: output features split
            xs.mark_sharding(lin.weight, mesh, ("model", None))
            xs.mark_sharding(lin.bias, mesh, ("model",))
        for lin in (b.proj, b.fc2):  # row-parallel: input features split
            xs.mark_sharding(lin.weight, mesh, (None, "model"))
    return mesh


def batches(steps=3):
    g = torch.Generator().manual_seed(1)
    return [(torch.randint(0, C["vocab"], (C["batch"], C["seq"]), generator=g),
             torch.randint(0, C["vocab"], (C["batch"], C["seq"]), generator=g)) for _ in range(steps)]


def setup(device, pattern, n=4):
    """(model, optimizer, step, mesh): the GPT, its AdamW and the training
    step the way users write it, compiled for tpu."""
    torch.manual_seed(0)
    model = gpt_model(C).to(device)
    mesh = shard_model(model, pattern, n) if pattern else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    return model, opt, step if device == "cpu" else torch.compile(step, backend="tpu"), mesh


def run_steps(step, mesh, data, device="tpu"):
    losses = []
    for x, y in data:
        if mesh is not None:  # a host batch onto the mesh, split on "data"
            x, y = xs.shard(x, mesh, ("data", None)), xs.shard(y, mesh, ("data", None))
        losses.append(step(x.to(device), y.to(device)).item())
    return losses


@pytest.fixture(scope="module")
def cpu_run():
    model, opt, step, _ = setup("cpu", None)
    return torch.tensor(run_steps(step, None, batches(), "cpu")), model


@four
@pytest.mark.parametrize("pattern", ["dp", "fsdp", "tp", "2d"])
def test_training_pattern_matches_one_device(pattern, cpu_run, fresh_dynamo):
    ref_losses, ref_model = cpu_run
    model, opt, step, mesh = setup("tpu", pattern)
    before, donated_before = compiles(), donated()
    losses = torch.tensor(run_steps(step, mesh, batches()))
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-5)
    # One program for every step: the first step's (which records the
    # optimizer state's creation) is the same text as the later ones'.
    assert compiles() - before <= 1
    # From the second step on, every parameter and its two AdamW moments are
    # updated in place.
    n = len(list(model.parameters()))
    assert donated() - donated_before >= 2 * 3 * n
    for (name, p), q in zip(model.named_parameters(), ref_model.parameters()):
        if name.endswith("qkv.bias"):
            # The key third of this bias has a zero gradient in exact math
            # (softmax ignores a shift shared by every key); AdamW scales its
            # rounding noise up to lr-sized steps, on CPU as on one tpu device.
            p, q = p[:C["d"]], q[:C["d"]]
        torch.testing.assert_close(p.detach().cpu(), q.detach(), rtol=1e-4, atol=1e-4, msg=lambda m: f"{name}: {m}")
    w = model.blocks[0].fc1.weight
    state = opt.state[w]["exp_avg"]
    if pattern == "dp":
        assert xs.get_sharding(w).replicated
    elif pattern == "fsdp":
        assert xs.get_sharding(w).tiles == (4, 1)
        s = xs.get_sharding(state)
        assert s is not None and not s.replicated, "the optimizer state is sharded like its parameter"
    else:
        assert xs.get_sharding(w).tiles == (4, 1) if pattern == "tp" else (2, 1)
        assert xs.get_sharding(model.blocks[0].fc2.weight).tiles[1] > 1


def save_checkpoint(path):
    """Two steps on a 2-d mesh of 8 devices (data 4 x model 2: parameters
    split over both axes where they divide), then a checkpoint. Runs in an
    8-device process started by the test below."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    model, opt, step, _ = setup("tpu", None)
    mesh = xs.Mesh(np.arange(8), (4, 2), ("data", "model"))
    for p in model.parameters():
        first = ("data", "model") if p.shape[0] % 8 == 0 else "data"
        xs.mark_sharding(p, mesh, (first,) + (None,) * (p.dim() - 1))
    run_steps(step, mesh, batches(2))
    assert xs.get_sharding(model.blocks[0].fc1.weight).tiles == (8, 1)
    msd, osd = get_state_dict(model, opt)
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=path)


@four
def test_checkpoint_loads_into_another_mesh(tmp_path, cpu_run, fresh_dynamo):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    path = str(tmp_path / "ckpt")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, TORCH_TPU_NUM_CPU_DEVICES="8", PYTHONPATH=here + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", f"import test_spmd; test_spmd.save_checkpoint({path!r})"],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    # 8 devices, 2-d -> 4 devices, 1-d (FSDP): the layouts are the new mesh's.
    model, opt, step, mesh = setup("tpu", "fsdp")
    msd, osd = get_state_dict(model, opt)
    sd = {"model": msd, "optim": osd}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "assuming the intent is to load in a single process"
        dcp.load(sd, checkpoint_id=path)
        set_state_dict(model, opt, model_state_dict=sd["model"], optim_state_dict=sd["optim"])
    # The checkpoint read onto the host by DCP alone: what every mesh must hold.
    host = {k: torch.empty(v.shape, dtype=v.dtype) for k, v in msd.items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load({"model": host}, checkpoint_id=path)
    for k, v in msd.items():
        torch.testing.assert_close(v.cpu(), host[k], rtol=0, atol=0, msg=lambda m: f"{k}: {m}")
    w = model.blocks[0].fc1.weight
    assert xs.get_sharding(w).tiles == (4, 1) and xs.get_sharding(w).devices == (0, 1, 2, 3)
    assert opt.state[w]["step"].item() == 2
    # The third step continues the run: the loss of an uninterrupted run on CPU.
    ref_losses, _ = cpu_run
    third = run_steps(step, mesh, batches()[2:])
    torch.testing.assert_close(torch.tensor(third), ref_losses[2:], rtol=1e-5, atol=1e-5)
    # The same checkpoint into a 2 x 2 mesh (tensor parallel).
    model2, opt2, _, _ = setup("tpu", "2d")
    msd2, _ = get_state_dict(model2, opt2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.load({"model": msd2}, checkpoint_id=path)
    assert xs.get_sharding(model2.blocks[0].fc2.weight).tiles == (1, 2)
    for k, v in msd2.items():
        torch.testing.assert_close(v.cpu(), host[k], rtol=0, atol=0, msg=lambda m: f"{k}: {m}")


def test_runs_in_a_four_device_process():
    if torch.tpu.device_count() >= N:
        pytest.skip("this process has the devices: the tests above ran here")
    rerun_with_devices(__file__, N)


def test_a_full_size_2d_step_runs_on_four_devices_of_two_cores():
    # The bench's full GPT on a 2 x 2 mesh: with XLA:CPU's pool at 2 threads
    # its partitions starve each other in a collective and the plugin aborts
    # the process after 40 s. The loader gives the pool two threads per
    # device (PJRT_NPROC, unless the user set it).
    # A user who left the pool's size alone (make test sets PJRT_NPROC=2).
    env = dict(os.environ, TORCH_TPU_NUM_CPU_DEVICES="4", TORCH_TPU_CACHE_DIR="disabled", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("PJRT_NPROC", None)
    env.pop("TORCH_TPU_DEFAULT_PJRT_NPROC", None)
    p = subprocess.run([sys.executable, "-m", "torch_tpu.bench", "spmd", "--child", "torch", "2d", "4", "1", "1", "1",
                        "0"], env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    res = json.loads(next(line[7:] for line in p.stdout.splitlines() if line.startswith("RESULT ")))
    assert res["compiles"] == 1 and math.isfinite(res["final_loss"])


SHARDY_CODE = """
import numpy as np, torch, torch_tpu, torch_tpu.spmd as xs
mesh = xs.Mesh(np.arange(4), (2, 2), ("data", "model"))
a, b = torch.randn(8, 6), torch.randn(6, 4)
at, bt = xs.shard(a, mesh, ("data", None)), xs.shard(b, mesh, (None, "model"))
f = torch.compile(lambda x, w: (x @ w).relu(), backend="tpu")
torch.testing.assert_close(f(at, bt).cpu(), (a @ b).relu())
torch.testing.assert_close(f(bt.t(), at.t()).cpu(), (b.t() @ a.t()).relu())
print("ok")
"""


@pytest.mark.parametrize("shardy", ["1", "0"])
def test_programs_are_partitioned_by_shardy(shardy):
    # Shardy partitions the programs (XLA's GSPMD propagation, deprecated,
    # logs a warning when it runs); TORCH_TPU_SPMD_SHARDY=0 asks for GSPMD.
    env = dict(os.environ, TORCH_TPU_NUM_CPU_DEVICES="4", PJRT_NPROC="8", TORCH_TPU_CACHE_DIR="disabled",
               TF_CPP_MIN_LOG_LEVEL="0", TORCH_TPU_SPMD_SHARDY=shardy)
    p = subprocess.run([sys.executable, "-c", SHARDY_CODE], env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip().endswith("ok"), p.stderr[-3000:]
    assert ("GSPMD sharding propagation" in p.stderr) == (shardy == "0"), p.stderr[-3000:]


def test_too_few_xla_cpu_threads_for_the_devices_warn():
    code = "import warnings, torch, torch_tpu, os; print('NPROC', os.environ['PJRT_NPROC'])"
    # A parent torch_tpu process's own choice, inherited, is replaced; the
    # user's is kept.
    env = dict(os.environ, TORCH_TPU_NUM_CPU_DEVICES="4", PJRT_NPROC="2", TORCH_TPU_DEFAULT_PJRT_NPROC="2")
    p = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and "NPROC 8" in p.stdout, p.stderr[-2000:]
    env["PJRT_NPROC"] = "2"
    env.pop("TORCH_TPU_DEFAULT_PJRT_NPROC", None)
    p = subprocess.run([sys.executable, "-W", "always", "-c", code], env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0 and "NPROC 2" in p.stdout
    assert "fewer than two threads for each of its 4 devices" in p.stderr
