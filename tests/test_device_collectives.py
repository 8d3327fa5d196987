"""torch.tpu.comm: collectives across the tpu devices of one process, each one
StableHLO program with one replica per device.

The checks need four devices. The test process has one, so the last test
re-runs this file in a process with TORCH_TPU_NUM_CPU_DEVICES=4 (four
XLA:CPU devices); there the other tests run and that one skips. Expected
values come from PyTorch on CPU.
"""
import os
import subprocess
import sys

import pytest
import torch
from helpers import rerun_with_devices

import torch_tpu  # noqa: F401

N = 4
four = pytest.mark.skipif(torch.tpu.device_count() < N, reason="needs 4 tpu devices (run by the last test)")


def on_devices(cpu_tensors):
    return [t.to(f"tpu:{i}") for i, t in enumerate(cpu_tensors)]


def inputs(shape=(6, 5), dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point or dtype.is_complex:
        return [torch.randn(shape, generator=g, dtype=dtype) for _ in range(N)]
    if dtype == torch.bool:
        return [torch.rand(shape, generator=g) > 0.5 for _ in range(N)]
    return [torch.randint(-50, 50, shape, generator=g, dtype=dtype) for _ in range(N)]


CPU_REDUCE = {
    "sum": lambda s: s.sum(0),
    "avg": lambda s: s.mean(0),
    "min": lambda s: s.amin(0),
    "max": lambda s: s.amax(0),
    "product": lambda s: s.prod(0),
}


@four
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32])
@pytest.mark.parametrize("op", ["sum", "avg", "min", "max", "product"])
def test_all_reduce_matches_cpu(dtype, op):
    if op == "avg" and not dtype.is_floating_point:
        pytest.skip("avg is for floating-point tensors (checked in test_errors)")
    cpu = inputs(dtype=dtype)
    if op == "product" and dtype.is_floating_point:
        cpu = [c.clamp(-2, 2) for c in cpu]
    ts = on_devices(cpu)
    out = torch.tpu.comm.all_reduce(ts, op=op)
    stacked = torch.stack(cpu).float() if dtype == torch.bfloat16 else torch.stack(cpu)
    want = CPU_REDUCE[op](stacked).to(dtype)
    for i, t in enumerate(out):
        assert t is ts[i] and t.device == torch.device(f"tpu:{i}")
        # bf16 sums of 4 values round once per add on the device, once on CPU.
        torch.testing.assert_close(t.cpu(), want, **({"atol": 0.05, "rtol": 0.02} if dtype == torch.bfloat16 else {}))


@four
def test_all_reduce_takes_reduce_op_and_bool_and_complex():
    import torch.distributed as dist

    cpu = inputs()
    out = torch.tpu.comm.all_reduce(on_devices(cpu), op=dist.ReduceOp.MAX)
    torch.testing.assert_close(out[2].cpu(), torch.stack(cpu).amax(0))
    b = inputs(dtype=torch.bool)
    torch.testing.assert_close(torch.tpu.comm.all_reduce(on_devices(b), "sum")[1].cpu(), torch.stack(b).any(0))
    torch.testing.assert_close(torch.tpu.comm.all_reduce(on_devices(b), "min")[1].cpu(), torch.stack(b).all(0))
    c = inputs(dtype=torch.complex64)
    torch.testing.assert_close(torch.tpu.comm.all_reduce(on_devices(c))[3].cpu(), torch.stack(c).sum(0))


@four
def test_all_reduce_writes_through_views_and_leaves_the_rest():
    base_cpu = [torch.arange(24.0).reshape(4, 6) * (i + 1) for i in range(N)]
    bases = on_devices(base_cpu)
    cols = [b[:, 1::2] for b in bases]  # non-contiguous views
    torch.tpu.comm.all_reduce(cols)
    want = torch.stack([b[:, 1::2] for b in base_cpu]).sum(0)
    for i, b in enumerate(bases):
        expect = base_cpu[i].clone()
        expect[:, 1::2] = want
        torch.testing.assert_close(b.cpu(), expect)


@four
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int8, torch.bool, torch.complex64])
def test_broadcast_is_bit_exact(dtype):
    cpu = inputs(dtype=dtype)
    if dtype == torch.float32:
        cpu[1][0, :3] = torch.tensor([-0.0, float("nan"), float("inf")])
    ts = on_devices(cpu)
    torch.tpu.comm.broadcast(ts, root=1)
    for t in ts:
        got = t.cpu()
        if dtype.is_floating_point:
            assert torch.equal(got.view(torch.int32 if dtype == torch.float32 else torch.int16),
                               cpu[1].view(torch.int32 if dtype == torch.float32 else torch.int16))
        else:
            assert torch.equal(got, cpu[1])


@four
@pytest.mark.parametrize("shape", [(3, 5), (2,), ()])
def test_all_gather_concatenates_in_list_order(shape):
    cpu = inputs(shape)
    order = [2, 0, 3, 1]  # list position, not device index, decides the order
    ts = [cpu[k].to(f"tpu:{k}") for k in order]
    out = torch.tpu.comm.all_gather(ts)
    want = torch.cat([cpu[k].reshape(-1, *shape[1:]) if shape else cpu[k].reshape(1) for k in order])
    for t, k in zip(out, order):
        assert t.device == torch.device(f"tpu:{k}")
        torch.testing.assert_close(t.cpu(), want)


@four
@pytest.mark.parametrize("op", ["sum", "max", "avg"])
def test_reduce_scatter_gives_each_device_its_piece(op):
    cpu = inputs((8, 3))
    out = torch.tpu.comm.reduce_scatter(on_devices(cpu), op=op)
    full = CPU_REDUCE[op](torch.stack(cpu))
    for k, t in enumerate(out):
        torch.testing.assert_close(t.cpu(), full[2 * k : 2 * k + 2])


@four
def test_all_to_all_transposes_pieces():
    cpu = inputs((8, 2), dtype=torch.int64)
    out = torch.tpu.comm.all_to_all(on_devices(cpu))
    for k, t in enumerate(out):
        torch.testing.assert_close(t.cpu(), torch.cat([c[2 * k : 2 * k + 2] for c in cpu]))


@four
def test_torch_cuda_comm_names():
    src = torch.randn(5, 2)
    outs = torch.tpu.comm.broadcast_to(src.to("tpu:2"), [0, 1, 2, 3])
    assert [o.device.index for o in outs] == [0, 1, 2, 3]
    for o in outs:
        torch.testing.assert_close(o.cpu(), src)
    cpu = inputs()
    total = torch.tpu.comm.reduce_add(on_devices(cpu), destination=2)
    assert total.device == torch.device("tpu:2")
    torch.testing.assert_close(total.cpu(), torch.stack(cpu).sum(0))


@four
def test_deferred_values_and_one_program_per_signature():
    cpu = inputs()
    old = torch.tpu.get_eager_mode()
    torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE)
    try:
        ts = [(t * 2).exp() for t in on_devices(cpu)]  # pending in the fused graph
        torch.tpu.comm.all_reduce(ts)
        torch.testing.assert_close(ts[0].cpu(), torch.stack([(c * 2).exp() for c in cpu]).sum(0))
    finally:
        torch.tpu.set_eager_mode(old)
    ts = on_devices(cpu)
    torch.tpu.comm.all_reduce(ts)
    torch.tpu.synchronize()
    before = torch_tpu._C._metrics()["compiles"]
    again = on_devices(inputs(seed=1))
    torch.tpu.comm.all_reduce(again)
    torch.tpu.synchronize()
    assert torch_tpu._C._metrics()["compiles"] == before


@four
def test_errors_are_clear_and_raised_before_running():
    t = [torch.ones(4, device=f"tpu:{i}") for i in range(N)]
    with pytest.raises(RuntimeError, match="distinct devices"):
        torch.tpu.comm.all_reduce([t[0], torch.ones(4, device="tpu:0")])
    with pytest.raises(RuntimeError, match="one shape"):
        torch.tpu.comm.all_reduce([t[0], torch.ones(5, device="tpu:1")])
    with pytest.raises(TypeError, match="one dtype"):
        torch.tpu.comm.all_reduce([t[0], torch.ones(4, device="tpu:1", dtype=torch.float64)])
    with pytest.raises(RuntimeError, match="expected tpu tensors"):
        torch.tpu.comm.all_reduce([t[0], torch.ones(4)])
    with pytest.raises(RuntimeError, match="avg needs a floating-point"):
        torch.tpu.comm.all_reduce([torch.ones(4, dtype=torch.int64, device=f"tpu:{i}") for i in range(2)], "avg")
    with pytest.raises(ValueError, match="unsupported reduce op"):
        torch.tpu.comm.all_reduce(t, op="xor")
    with pytest.raises(ValueError, match="root 4 is out of range"):
        torch.tpu.comm.broadcast(t, root=4)
    with pytest.raises(RuntimeError, match="split evenly"):
        torch.tpu.comm.reduce_scatter([torch.ones(6, device=f"tpu:{i}") for i in range(N)])
    with pytest.raises(TypeError, match="sequence of tensors"):
        torch.tpu.comm.all_gather(t[0])
    # Nothing was changed by the failed calls.
    assert t[0].cpu().tolist() == [1.0] * 4


@four
@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_ops_recorded_before_run_before(mode):
    # y reads x before the in-place all_reduce replaces x's buffer; y must
    # see the old value whether y's op is still queued (strict eager's
    # compile-ahead, a fresh shape) or pending in a fused graph.
    old = torch.tpu.get_eager_mode()
    if mode == "fused":
        torch.tpu.set_eager_mode(torch.tpu.EagerMode.DEFER_AND_FUSE)
    try:
        cpu = inputs((7, 3), seed=5)
        xs = on_devices(cpu)
        ys = [x * 3 + 1 for x in xs]
        torch.tpu.comm.all_reduce(xs)
        for c, y in zip(cpu, ys):
            torch.testing.assert_close(y.cpu(), c * 3 + 1)
        torch.testing.assert_close(xs[1].cpu(), torch.stack(cpu).sum(0))
    finally:
        torch.tpu.set_eager_mode(old)


@four
def test_many_launches_without_a_sync_complete():
    # Queued launches once starved XLA:CPU's workers (each replica waits for
    # its partners on a worker thread) and XLA aborted the process.
    ts = [torch.full((256,), float(i), device=f"tpu:{i}") for i in range(N)]
    for _ in range(300):
        torch.tpu.comm.all_reduce(ts, op="max")
        torch.tpu.comm.broadcast(ts, root=0)
    torch.testing.assert_close(ts[2].cpu(), torch.full((256,), float(N - 1)))


@four
def test_a_resized_storage_stays_on_its_device():
    # arange resizes an empty tensor while tpu:0 is current; its storage (and
    # so every view of it) used to land on tpu:0.
    x = torch.arange(6.0, device="tpu:3")
    assert x.untyped_storage().device == torch.device("tpu:3")
    y = x.reshape(2, 3).exp()
    assert y.device == torch.device("tpu:3")
    torch.testing.assert_close(y.cpu(), torch.arange(6.0).reshape(2, 3).exp())


def test_runs_in_a_four_device_process():
    if torch.tpu.device_count() >= N:
        pytest.skip("this process has the devices: the tests above ran here")
    rerun_with_devices(__file__, N)
