"""Rank program for tests/distributed: run under torchrun as
``worker.py SCENARIO OUT_DIR``. Each rank writes what it saw to
OUT_DIR/SCENARIO_rank<r>.pt; the tests compare that with a single-process
run on CPU."""
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

import torch_tpu  # noqa: F401 - registers the tpu device and backend
from tests.distributed.common import GLOBAL_BATCH, STEPS, batches, loss_of, make_gpt, make_opt

TPU = torch.device("tpu")


def _save(out, scenario, payload):
    torch.save(payload, os.path.join(out, f"{scenario}_rank{dist.get_rank()}.pt"))


def _local(x, rank, world):
    n = x.shape[0] // world
    return x[rank * n:(rank + 1) * n]


def _global_loss(loss):
    t = loss.detach().clone()
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    return t.cpu()


def collectives(out):
    r, w = dist.get_rank(), dist.get_world_size()
    res = {}
    for name, op in [("sum", dist.ReduceOp.SUM), ("avg", dist.ReduceOp.AVG), ("min", dist.ReduceOp.MIN),
                     ("max", dist.ReduceOp.MAX), ("product", dist.ReduceOp.PRODUCT)]:
        t = torch.arange(6.0, device=TPU).view(2, 3) + r + 1
        dist.all_reduce(t, op=op)
        res[f"all_reduce_{name}"] = t.cpu()
    t = torch.arange(4, device=TPU) * (r + 1)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    res["all_reduce_avg_int"] = t.cpu()
    t = torch.full((3,), float(r), device=TPU)
    dist.broadcast(t, src=w - 1)
    res["broadcast"] = t.cpu()
    outs = [torch.empty(2, device=TPU) for _ in range(w)]
    dist.all_gather(outs, torch.full((2,), float(r), device=TPU))
    res["all_gather"] = torch.stack([o.cpu() for o in outs])
    o = torch.empty(2 * w, device=TPU)
    dist.all_gather_into_tensor(o, torch.full((2,), float(r), device=TPU))
    res["all_gather_into_tensor"] = o.cpu()
    # One list per source rank, shaped like the inputs.
    outs = [[torch.empty(1, device=TPU), torch.empty(2, device=TPU)] for _ in range(w)]
    dist.all_gather_coalesced(outs, [torch.full((1,), float(r), device=TPU), torch.full((2,), 10.0 + r, device=TPU)])
    res["all_gather_coalesced"] = [torch.cat([t.cpu() for t in lst]) for lst in outs]
    o = torch.empty(2, device=TPU)
    dist.reduce_scatter_tensor(o, torch.arange(2.0 * w, device=TPU) * (r + 1))
    res["reduce_scatter_tensor"] = o.cpu()
    o = torch.empty(2, device=TPU)
    dist.reduce_scatter(o, [torch.full((2,), float(i + r), device=TPU) for i in range(w)])
    res["reduce_scatter"] = o.cpu()
    # Uneven all_to_all_single: rank r sends r + j + 1 elements to rank j.
    in_splits = [r + j + 1 for j in range(w)]
    out_splits = [j + r + 1 for j in range(w)]
    o = torch.empty(sum(out_splits), device=TPU)
    dist.all_to_all_single(o, torch.arange(float(sum(in_splits)), device=TPU) + 100 * r, out_splits, in_splits)
    res["all_to_all_single"] = o.cpu()
    ol = [torch.empty(2, device=TPU) for _ in range(w)]
    dist.all_to_all(ol, [torch.full((2,), float(10 * r + j), device=TPU) for j in range(w)])
    res["all_to_all"] = torch.stack([x.cpu() for x in ol])
    g = [torch.empty(2, device=TPU) for _ in range(w)] if r == 0 else None
    dist.gather(torch.full((2,), float(r), device=TPU), g, dst=0)
    res["gather"] = torch.stack([x.cpu() for x in g]) if r == 0 else None
    s = torch.empty(2, device=TPU)
    dist.scatter(s, [torch.full((2,), float(j), device=TPU) for j in range(w)] if r == 0 else None, src=0)
    res["scatter"] = s.cpu()
    t = torch.full((2,), float(r), device=TPU)
    dist.reduce(t, dst=0, op=dist.ReduceOp.SUM)
    res["reduce"] = t.cpu() if r == 0 else None
    if r == 0:
        dist.send(torch.tensor([5.0, 6.0], device=TPU), 1)
    elif r == 1:
        z = torch.empty(2, device=TPU)
        dist.recv(z, 0)
        res["recv"] = z.cpu()
    # Async work: wait() and the future give the written tensor.
    t = torch.ones(3, device=TPU)
    work = dist.all_reduce(t, async_op=True)
    work.wait()
    res["async_wait"] = t.cpu()
    t = torch.ones(3, device=TPU)
    fut = dist.all_reduce(t, async_op=True).get_future()
    res["async_future"] = fut.wait()[0].cpu()
    dist.barrier()
    objs = [None] * w
    dist.all_gather_object(objs, {"rank": r})
    res["all_gather_object"] = objs
    c = torch.ones(2)
    dist.all_reduce(c)
    res["cpu_all_reduce"] = c
    # Functional collectives (DTensor's and torch.compile's path).
    from torch.distributed import _functional_collectives as fc
    res["functional_all_reduce"] = fc.all_reduce(torch.ones(3, device=TPU) * (r + 1), "sum", dist.group.WORLD).cpu()
    res["functional_all_gather"] = fc.all_gather_tensor(torch.full((2,), float(r), device=TPU), 0,
                                                        dist.group.WORLD).cpu()
    res["functional_reduce_scatter"] = fc.reduce_scatter_tensor(torch.arange(2.0 * w, device=TPU), "sum", 0,
                                                                dist.group.WORLD).cpu()
    sub = dist.new_group(list(range(w)))
    t = torch.ones(1, device=TPU)
    dist.all_reduce(t, group=sub)
    res["new_group"] = t.cpu()
    # The zero-copy path (XLA:CPU: Gloo reads and writes the device buffer
    # itself): outputs that already hold a buffer, a view of the reduced
    # storage, values still pending in fused eager, and reduce's non-root
    # input, which must not change.
    outs = [torch.zeros(2, device=TPU) for _ in range(w)]
    dist.all_gather(outs, torch.full((2,), float(r), device=TPU))
    res["all_gather_into_buffers"] = torch.stack([o.cpu() for o in outs])
    base = torch.arange(6.0, device=TPU) + r
    view = base.view(2, 3)
    dist.all_reduce(base)
    res["all_reduce_seen_through_view"] = view.cpu()
    prev = torch.tpu.eager_mode
    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    t = torch.ones(3, device=TPU) * (r + 1)
    dist.all_reduce(t)
    t.mul_(2)
    res["all_reduce_fused"] = t.cpu()
    torch.tpu.eager_mode = prev
    t = torch.full((2,), float(r + 1), device=TPU)
    dist.reduce(t, dst=0)
    res["reduce_non_root_input"] = t.cpu()
    # Bad use: clear errors, not hangs.
    errors = {}
    try:
        dist.all_reduce(torch.ones(2 + r, device=TPU))  # shapes differ across ranks
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        errors["shape_mismatch"] = (type(e).__name__, str(e))
    try:
        dist.broadcast(torch.ones(2, device=TPU, dtype=torch.float32 if r == 0 else torch.int64), src=0)
    except Exception as e:  # noqa: BLE001
        errors["dtype_mismatch"] = (type(e).__name__, str(e))
    # The same mismatch through the check that ranks on different hosts use.
    import torch_tpu.distributed as tpu_dist
    pg = dist.distributed_c10d._get_default_group()._get_backend(torch.device(TPU))
    res["check"] = "shared memory" if pg._shm else "gloo"
    tpu_dist._CHECK_MODE = "gloo"
    try:
        dist.all_reduce(torch.ones(2 + r, device=TPU))
    except Exception as e:  # noqa: BLE001
        errors["shape_mismatch_gloo"] = (type(e).__name__, str(e))
    tpu_dist._CHECK_MODE = "1"
    t = torch.ones(2, device=TPU)
    dist.all_reduce(t)  # the group still works after those errors
    res["after_errors"] = t.cpu()
    try:
        dist.all_gather_into_tensor(torch.empty(3, device=TPU), torch.ones(2, device=TPU))
    except Exception as e:  # noqa: BLE001
        errors["bad_size"] = (type(e).__name__, str(e))
    try:
        dist.all_reduce(torch.ones(4, device=TPU)[::2])
    except Exception as e:  # noqa: BLE001
        errors["non_contiguous"] = (type(e).__name__, str(e))
    res["errors"] = errors
    res["backend"] = dist.get_backend()
    _save(out, "collectives", res)


def ddp(out):
    from torch.nn.parallel import DistributedDataParallel as DDP
    r, w = dist.get_rank(), dist.get_world_size()
    model = make_gpt().to(TPU)
    model.tie_weights()
    # A small bucket cap gives several gradient buckets.
    net = DDP(model, bucket_cap_mb=0.05)
    opt = make_opt(net.parameters())
    losses = []
    for step, (x, y) in enumerate(batches()):
        x, y = _local(x, r, w).to(TPU), _local(y, r, w).to(TPU)
        opt.zero_grad()
        if step == STEPS - 1:
            # Gradient accumulation: the first micro-batch skips the all-reduce.
            h = x.shape[0] // 2
            with net.no_sync():
                loss1 = loss_of(net, x[:h], y[:h]) / 2
                loss1.backward()
            loss2 = loss_of(net, x[h:], y[h:]) / 2
            loss2.backward()
            loss = loss1.detach() + loss2.detach()
        else:
            loss = loss_of(net, x, y)
            loss.backward()
        opt.step()
        losses.append(_global_loss(loss))
    params = {n: p.detach().cpu() for n, p in model.named_parameters()}
    _save(out, "ddp", {"losses": torch.stack(losses), "params": params,
                       "logging": net._get_ddp_logging_data()})


def _train(model, local, params_of, **opt_kw):
    """STEPS AdamW steps of `model` on each rank's part of the global batch
    (`local` picks it); returns the global losses and the full parameters."""
    opt = make_opt(model.parameters(), **opt_kw)
    losses = []
    for x, y in batches():
        x, y = local(x).to(TPU), local(y).to(TPU)
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        losses.append(_global_loss(loss))
    return torch.stack(losses), params_of(model)


def _full_params(model):
    from torch.distributed.tensor import DTensor
    return {n: (p.full_tensor() if isinstance(p, DTensor) else p).detach().cpu() for n, p in model.named_parameters()}


def fsdp(out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor import DTensor
    r, w = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("tpu", (w,))
    res = {}
    for reshard in (True, False):
        model = make_gpt().to(TPU)
        model.tie_weights()
        for block in model.h:
            fully_shard(block, mesh=mesh, reshard_after_forward=reshard)
        fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        p = next(model.parameters())
        kinds = {(type(q).__name__, q.device.type, str(q.placements)) for q in model.parameters()}
        assert isinstance(p, DTensor), type(p)
        losses, params = _train(model, lambda t: _local(t, r, w), _full_params)
        res[f"reshard={reshard}"] = {"losses": losses, "params": params, "kinds": kinds,
                                     "local_numel": sum(q.to_local().numel() for q in model.parameters())}
    _save(out, "fsdp", res)


def tp(out):
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.parallel import parallelize_module
    mesh = init_device_mesh("tpu", (dist.get_world_size(),))
    model = make_gpt(tp=True).to(TPU)
    model.tie_weights()
    parallelize_module(model, mesh, _tp_plan(model))
    # Tensor parallel: every rank sees the whole batch.
    # foreach=False: PyTorch's foreach kernels refuse a mix of DTensor and plain
    # parameters (the same on CUDA); with FSDP on top all would be DTensors.
    losses, params = _train(model, lambda t: t, _full_params, foreach=False)
    _save(out, "tp", {"losses": losses, "params": params,
                      "sharded": sorted(n for n, p in model.named_parameters() if hasattr(p, "placements"))})


def _tp_plan(model):
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel
    plan = {}
    for i in range(len(model.h)):
        plan.update({f"h.{i}.attn.q": ColwiseParallel(), f"h.{i}.attn.k": ColwiseParallel(),
                     f"h.{i}.attn.v": ColwiseParallel(), f"h.{i}.attn.c_proj": RowwiseParallel(),
                     f"h.{i}.mlp.0": ColwiseParallel(), f"h.{i}.mlp.2": RowwiseParallel()})
    return plan


def tp_sequence_parallel(out):
    """Tensor parallel with sequence parallelism (LayerNorms and the residual
    stream sharded along the sequence) and a loss-parallel cross entropy on
    vocabulary-sharded logits."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import DTensor, Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        loss_parallel,
        parallelize_module,
    )
    mesh = init_device_mesh("tpu", (dist.get_world_size(),))
    model = make_gpt(tp=True, untied=True).to(TPU)
    replicate_in = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
    plan = {"wte": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
            "wpe": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(0)),
            "ln_f": SequenceParallel(),
            "lm_head": ColwiseParallel(input_layouts=Shard(1), output_layouts=Shard(-1), use_local_output=False)}
    for i in range(len(model.h)):
        plan.update({f"h.{i}.ln_1": SequenceParallel(), f"h.{i}.attn": replicate_in,
                     f"h.{i}.attn.q": ColwiseParallel(), f"h.{i}.attn.k": ColwiseParallel(),
                     f"h.{i}.attn.v": ColwiseParallel(), f"h.{i}.attn.c_proj": RowwiseParallel(output_layouts=Shard(1)),
                     f"h.{i}.ln_2": SequenceParallel(), f"h.{i}.mlp": replicate_in,
                     f"h.{i}.mlp.0": ColwiseParallel(), f"h.{i}.mlp.2": RowwiseParallel(output_layouts=Shard(1))})
    parallelize_module(model, mesh, plan)
    opt = make_opt(model.parameters(), foreach=False)
    losses = []
    for x, y in batches():
        x, y = x.to(TPU), y.to(TPU)
        opt.zero_grad()
        with loss_parallel():
            logits = model(x)
            assert isinstance(logits, DTensor) and logits.placements == (Shard(2),), logits.placements
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1))
            loss.backward()
        opt.step()
        losses.append(loss.full_tensor().detach().cpu())
    _save(out, "tp_sequence_parallel", {"losses": torch.stack(losses), "params": _full_params(model)})


def fsdp_tp(out):
    """2-D: tensor parallel inside pairs of ranks, FSDP2 across the pairs."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.distributed.tensor.parallel import parallelize_module
    mesh = init_device_mesh("tpu", (2, dist.get_world_size() // 2), mesh_dim_names=("dp", "tp"))
    model = make_gpt(tp=True).to(TPU)
    model.tie_weights()
    parallelize_module(model, mesh["tp"], _tp_plan(model))
    for block in model.h:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    dp = mesh["dp"].get_local_rank()
    losses, params = _train(model, lambda t: _local(t, dp, 2), _full_params)
    _save(out, "fsdp_tp", {"losses": losses, "params": params,
                           "meshes": sorted({str(p.device_mesh.mesh_dim_names) for p in model.parameters()})})


def ddp_compile(out):
    """A DDP step under torch.compile(backend="tpu")."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    r, w = dist.get_rank(), dist.get_world_size()
    model = make_gpt().to(TPU)
    model.tie_weights()
    net = torch.compile(DDP(model), backend="tpu")
    losses, params = _train(net, lambda t: _local(t, r, w), lambda m: _full_params(model))
    _save(out, "ddp_compile", {"losses": losses, "params": params})


def fsdp_llama(out):
    """FSDP2 on Hugging Face Llama (tiny config): each decoder layer, then the root."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    from tests.distributed.common import llama_batches, make_llama
    r, w = dist.get_rank(), dist.get_world_size()
    mesh = init_device_mesh("tpu", (w,))
    model = make_llama().to(TPU)
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    opt = make_opt(model.parameters())
    losses = []
    for ids in llama_batches():
        ids = _local(ids, r, w).to(TPU)
        opt.zero_grad()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        losses.append(_global_loss(loss))
    _save(out, "fsdp_llama", {"losses": torch.stack(losses), "params": _full_params(model)})


def default_backend(out):
    """init_process_group() with no backend picks the current accelerator's
    backend: tpu, as cuda gets NCCL (and, as there, only for its device)."""
    t = torch.ones(2, device=TPU)
    dist.all_reduce(t)
    try:
        dist.all_reduce(torch.ones(2))
        cpu_error = None
    except RuntimeError as e:
        cpu_error = str(e)
    _save(out, "default_backend", {"backend": dist.get_backend_config(), "tpu": t.cpu(), "cpu_error": cpu_error})


def rank_dies(out, after_a_collective=False):
    """Rank 1 exits without a word; rank 0's next collective must fail with
    a message within the group's timeout, not hang. after_a_collective: the
    ranks have set up their shared-memory check first, which sees the exit."""
    if after_a_collective:
        dist.all_reduce(torch.ones(2, device=TPU))
    if dist.get_rank() == 1:
        os._exit(0)
    name = "rank_dies_after_a_collective" if after_a_collective else "rank_dies"
    torch.save(_timed_all_reduce(), os.path.join(out, f"{name}_rank0.pt"))
    os._exit(0)  # the group cannot be torn down cleanly without rank 1


def _timed_all_reduce():
    """{"error": (type, message) or None, "seconds": how long} of one all_reduce."""
    import time
    t0 = time.perf_counter()
    try:
        dist.all_reduce(torch.ones(2, device=TPU))
        err = None
    except Exception as e:  # noqa: BLE001 - the message is what is checked
        err = (type(e).__name__, str(e))
    return {"error": err, "seconds": time.perf_counter() - t0}


def rank_dies_after_a_collective(out):
    rank_dies(out, after_a_collective=True)


def rank_stuck(out, after_a_collective=True):
    """Rank 1 stays alive but never calls the next collective (stuck in its
    own work); rank 0's collective must raise within the group's 20 s
    timeout. Rank 1 waits until rank 0 has reported, then exits."""
    import time
    if after_a_collective:
        dist.all_reduce(torch.ones(2, device=TPU))
    path = os.path.join(out, f"{'rank_stuck' if after_a_collective else 'rank_stuck_first'}_rank0.pt")
    if dist.get_rank() == 1:
        while not os.path.exists(path):
            time.sleep(0.2)
        os._exit(0)
    torch.save(_timed_all_reduce(), path + ".tmp")
    os.replace(path + ".tmp", path)
    os._exit(0)


def rank_stuck_first(out):
    rank_stuck(out, after_a_collective=False)


def exit_after_future(out):
    """Waits on collective futures and exits at once, with Gloo's thread made
    slow to release the Python callbacks it ran (as a loaded machine makes
    it): the process must still exit cleanly, not abort at finalization."""
    import time

    class SlowRelease:
        def __del__(self):
            time.sleep(0.3)  # releases the GIL: the main thread reaches exit meanwhile

    then = torch._C.Future.then

    def slow_then(fut, callback):
        def wrapped(f, _slow=SlowRelease()):
            return callback(f)
        return then(fut, wrapped)

    torch._C.Future.then = slow_then
    t = torch.ones(4, device=TPU)
    dist.all_reduce(t, async_op=True).get_future().wait()
    # The coalesced form's future chains several Gloo futures (torch_tpu's _Joined).
    dist.all_reduce_coalesced([t, t.clone()], async_op=True).wait()
    # Exit keeps the latest Gloo works and futures referenced (never released
    # by a Gloo thread once finalizing), but only a few once they complete.
    from torch_tpu import distributed as td
    for _ in range(40):
        dist.all_reduce(torch.ones(1 << 14, device=TPU))
    kept = len(td._kept)
    # An async collective that nobody waits for, its tensor dropped at once:
    # exit waits for it to complete instead of finalizing under Gloo's thread.
    dist.all_reduce(torch.ones(1 << 16, device=TPU), async_op=True)
    _save(out, "exit_after_future", {"t": t.cpu(), "kept": kept})


def _fsdp_model(mesh):
    from torch.distributed.fsdp import fully_shard
    model = make_gpt().to(TPU)
    model.tie_weights()
    for block in model.h:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def dcp_save(out):
    """FSDP2 on all ranks: STEPS - 1 steps, a sharded checkpoint of model and
    optimizer, then the last step (whose loss the 1-rank resume must match)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    r, w = dist.get_rank(), dist.get_world_size()
    model = _fsdp_model(init_device_mesh("tpu", (w,)))
    opt = make_opt(model.parameters())
    losses = []
    for step, (x, y) in enumerate(batches()):
        if step == STEPS - 1:
            msd, osd = get_state_dict(model, opt)
            dcp.save({"model": msd, "optim": osd}, checkpoint_id=os.path.join(out, "ckpt"))
        x, y = _local(x, r, w).to(TPU), _local(y, r, w).to(TPU)
        opt.zero_grad()
        loss = loss_of(model, x, y)
        loss.backward()
        opt.step()
        losses.append(_global_loss(loss))
    _save(out, "dcp_save", {"losses": torch.stack(losses), "params": _full_params(model)})


def _resume_last_step(out, model, split):
    """Loads the saved checkpoint into `model` and a fresh optimizer, and runs
    the last step on `split` of each batch: (loss, optimizer)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
    opt = make_opt(model.parameters())
    loss_of(model, *(split(t).to(TPU) for t in batches()[0])).backward()  # the state, for loading to fill
    opt.step()
    opt.zero_grad()
    msd, osd = get_state_dict(model, opt)
    state = {"model": msd, "optim": osd}
    dcp.load(state, checkpoint_id=os.path.join(out, "ckpt"))
    set_state_dict(model, opt, model_state_dict=state["model"], optim_state_dict=state["optim"])
    loss = loss_of(model, *(split(t).to(TPU) for t in batches()[STEPS - 1]))
    loss.backward()
    opt.step()
    return loss


def dcp_load(out):
    """One rank, no FSDP: load the 2-rank checkpoint and run the last step."""
    model = make_gpt().to(TPU)
    model.tie_weights()
    loss = _resume_last_step(out, model, lambda t: t)
    _save(out, "dcp_load", {"loss": loss.detach().cpu(), "params": _full_params(model)})


def dcp_load_fsdp(out):
    """FSDP2 over another world size than the save's: load the checkpoint
    (resharded by DCP) and run the last step on this world's split."""
    from torch.distributed.device_mesh import init_device_mesh
    r, w = dist.get_rank(), dist.get_world_size()
    model = _fsdp_model(init_device_mesh("tpu", (w,)))
    loss = _resume_last_step(out, model, lambda t: _local(t, r, w))
    _save(out, "dcp_load_fsdp", {"loss": _global_loss(loss), "params": _full_params(model)})


def train_forever(out):
    """All-reduces until killed, after writing `started` (SIGTERM test)."""
    x = torch.ones(1024, device=TPU)
    dist.all_reduce(x)
    open(os.path.join(out, f"started_rank{dist.get_rank()}"), "w").close()
    while True:
        dist.all_reduce(x)
        x.fill_(1.0)


def main():
    scenario, out = sys.argv[1], sys.argv[2]
    import datetime
    if scenario == "default_backend":
        dist.init_process_group()
    else:
        seconds = 15 if scenario.startswith("rank_dies") else 20 if scenario.startswith("rank_stuck") else 60
        dist.init_process_group("tpu", timeout=datetime.timedelta(seconds=seconds))
    try:
        globals()[scenario](out)
    finally:
        if scenario != "exit_after_future":  # that one exits with the group alive, as scripts may
            dist.destroy_process_group()


if __name__ == "__main__":
    main()
