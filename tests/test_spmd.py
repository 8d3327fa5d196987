"""torch_tpu.spmd: one process, a mesh of devices, SPMD programs partitioned
by XLA.

The checks need four devices. The test process has one, so the last test
re-runs this file in a process with TORCH_TPU_NUM_CPU_DEVICES=4; there the
other tests run and that one skips. Expected values come from PyTorch on CPU.
"""
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

    before = compiles()
    for _ in range(3):
        s, y = f(at, bt)
        torch.testing.assert_close(y.cpu(), a @ b)
        torch.testing.assert_close(s.cpu(), (a @ b).relu().sum())
    assert compiles() - before == 1
    assert xs.get_sharding(s).replicated
    assert not xs.get_sharding(y).replicated  # laid out by the partitioner
    assert torch_tpu.debug.metrics()["compiles_by_op"]["spmd"][0] >= 1
    # Another layout of the same graph is another program (the key holds it).
    ct = xs.shard(a, mesh, (None, "model"))
    _, y2 = f(ct, bt)
    torch.testing.assert_close(y2.cpu(), a @ b)
    assert compiles() - before == 2


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
def test_strict_eager_op_gathers_and_keeps_the_sharding():
    mesh = xs.Mesh(np.arange(4), (4,), ("data",))
    x = torch.randn(8, 3)
    t = xs.shard(x, mesh, ("data", None))
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        y = t.exp()
    torch.testing.assert_close(y.cpu(), x.exp())
    assert xs.get_sharding(t).tiles == (4, 1)
    t.add_(1)  # an eager write: the value is whole on its device again
    assert xs.get_sharding(t) is None
    torch.testing.assert_close(t.cpu(), x + 1)


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


# --- training patterns: the bench's GPT, small ----------------------------

C = dict(vocab=64, d=32, layers=2, heads=2, seq=16, batch=8)


def shard_model(model, pattern):
    """The pattern's mesh, with the model's parameters marked (none for dp)."""
    if pattern in ("dp", "fsdp"):
        mesh = xs.Mesh(np.arange(4), (4,), ("data",))
        if pattern == "fsdp":
            for p in model.parameters():
                xs.mark_sharding(p, mesh, ("data",) + (None,) * (p.dim() - 1))
        return mesh
    mesh = xs.Mesh(np.arange(4), (1, 4) if pattern == "tp" else (2, 2), ("data", "model"))
    for b in model.blocks:
        for lin in (b.qkv, b.fc1):  # column-parallel: output features split
            xs.mark_sharding(lin.weight, mesh, ("model", None))
            xs.mark_sharding(lin.bias, mesh, ("model",))
        for lin in (b.proj, b.fc2):  # row-parallel: input features split
            xs.mark_sharding(lin.weight, mesh, (None, "model"))
    return mesh


def train(device, pattern, steps=3):
    torch.manual_seed(0)
    model = gpt_model(C).to(device)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(0, C["vocab"], (C["batch"], C["seq"]), generator=g),
                torch.randint(0, C["vocab"], (C["batch"], C["seq"]), generator=g)) for _ in range(steps)]
    mesh = shard_model(model, pattern) if pattern else None
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        loss.backward()
        opt.step()
        return loss

    if device != "cpu":
        step = torch.compile(step, backend="tpu")
    losses = []
    for x, y in batches:
        if mesh is not None:  # a host batch onto the mesh, split on "data"
            x, y = xs.shard(x, mesh, ("data", None)), xs.shard(y, mesh, ("data", None))
        losses.append(step(x.to(device), y.to(device)).item())
    return torch.tensor(losses), model, opt


@pytest.fixture(scope="module")
def cpu_run():
    return train("cpu", None)


@four
@pytest.mark.parametrize("pattern", ["dp", "fsdp", "tp", "2d"])
def test_training_pattern_matches_one_device(pattern, cpu_run, fresh_dynamo):
    ref_losses, ref_model, _ = cpu_run
    losses, model, opt = train("tpu", pattern)
    torch.testing.assert_close(losses, ref_losses, rtol=1e-5, atol=1e-5)
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


def test_runs_in_a_four_device_process():
    if torch.tpu.device_count() >= N:
        pytest.skip("this process has the devices: the tests above ran here")
    rerun_with_devices(__file__, N)
