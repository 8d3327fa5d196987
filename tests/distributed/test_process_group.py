"""The c10d "tpu" backend under torchrun, two ranks: every collective against
the values it must give, async work, functional collectives, CPU tensors in
the same group, and clear errors for bad use."""
import os

import pytest
import torch
import torch.distributed as dist

import torch_tpu  # noqa: F401
from tests.distributed.common import launch

W = 2


@pytest.fixture(scope="module")
def ranks(tmp_path_factory):
    return launch("collectives", tmp_path_factory.mktemp("collectives"), nproc=W)


def test_backend_is_registered_for_tpu():
    assert "tpu" in dist.Backend.backend_list and "tpu_dist" in dist.Backend.backend_list
    assert dist.Backend.default_device_backend_map["tpu"] == "tpu"
    assert set(dist.Backend.backend_capability["tpu"]) == {"cpu", "tpu"}


def _expected(r):
    base = torch.arange(6.0).view(2, 3)
    vals = [base + k + 1 for k in range(W)]
    e = {
        "all_reduce_sum": sum(vals),
        "all_reduce_avg": sum(vals) / W,
        "all_reduce_min": torch.minimum(*vals),
        "all_reduce_max": torch.maximum(*vals),
        "all_reduce_product": vals[0] * vals[1],
        "all_reduce_avg_int": torch.div(sum(torch.arange(4) * (k + 1) for k in range(W)), W, rounding_mode="trunc"),
        "broadcast": torch.full((3,), float(W - 1)),
        "all_gather": torch.stack([torch.full((2,), float(k)) for k in range(W)]),
        "all_gather_into_tensor": torch.cat([torch.full((2,), float(k)) for k in range(W)]),
        "all_gather_coalesced": [torch.tensor([float(k), 10.0 + k, 10.0 + k]) for k in range(W)],
        "reduce_scatter_tensor": sum(torch.arange(2.0 * W) * (k + 1) for k in range(W))[2 * r:2 * r + 2],
        "reduce_scatter": torch.full((2,), float(sum(r + k for k in range(W)))),
        "all_to_all": torch.stack([torch.full((2,), float(10 * k + r)) for k in range(W)]),
        "scatter": torch.full((2,), float(r)),
        "async_wait": torch.full((3,), float(W)),
        "async_future": torch.full((3,), float(W)),
        "all_gather_object": [{"rank": k} for k in range(W)],
        "cpu_all_reduce": torch.full((2,), float(W)),
        "functional_all_reduce": torch.full((3,), float(sum(k + 1 for k in range(W)))),
        "functional_all_gather": torch.cat([torch.full((2,), float(k)) for k in range(W)]),
        "functional_reduce_scatter": (torch.arange(2.0 * W) * W)[2 * r:2 * r + 2],
        "new_group": torch.full((1,), float(W)),
        "all_gather_into_buffers": torch.stack([torch.full((2,), float(k)) for k in range(W)]),
        "all_reduce_seen_through_view": sum(torch.arange(6.0) + k for k in range(W)).view(2, 3),
        "all_reduce_fused": torch.full((3,), 2.0 * sum(k + 1 for k in range(W))),
        "reduce_non_root_input": torch.full((2,), float(sum(k + 1 for k in range(W)) if r == 0 else r + 1)),
    }
    # all_to_all_single with uneven splits: rank k sends k + j + 1 elements to rank j.
    pieces = []
    for k in range(W):
        splits = [k + j + 1 for j in range(W)]
        start = sum(splits[:r])
        pieces.append(torch.arange(float(start), float(start + splits[r])) + 100 * k)
    e["all_to_all_single"] = torch.cat(pieces)
    if r == 0:
        e["gather"] = torch.stack([torch.full((2,), float(k)) for k in range(W)])
        e["reduce"] = torch.full((2,), float(sum(range(W))))
    if r == 1:
        e["recv"] = torch.tensor([5.0, 6.0])
    return e


@pytest.mark.parametrize("r", range(W))
def test_collectives_give_the_expected_values(ranks, r):
    got = ranks[r]
    assert got["backend"] == "tpu"
    for name, want in _expected(r).items():
        assert name in got, name
        if isinstance(want, torch.Tensor):
            torch.testing.assert_close(got[name], want, msg=lambda m, name=name: f"{name}: {m}")
        elif isinstance(want, list) and want and isinstance(want[0], torch.Tensor):
            for a, b in zip(got[name], want):
                torch.testing.assert_close(a, b)
        else:
            assert got[name] == want, name


def test_host_alias_is_the_device_buffer_or_nothing():
    """The zero-copy view collectives use on XLA:CPU: writes through it change
    the tpu tensor; it is refused where writing could touch anything else."""
    from torch_tpu import _C

    t = torch.arange(6.0, device="tpu") * 1
    a = _C._host_alias(t)
    assert a is not None and a.device.type == "cpu"
    a.mul_(10)
    torch.testing.assert_close(t.cpu(), torch.arange(6.0) * 10)
    t.add_(1)  # a new buffer: the alias keeps the old one alive and stays valid
    torch.testing.assert_close(a, torch.arange(6.0) * 10)
    torch.testing.assert_close(t.cpu(), torch.arange(6.0) * 10 + 1)
    assert _C._host_alias(torch.empty(3, device="tpu")) is None  # no buffer yet
    assert _C._host_alias(t[::2]) is None  # not contiguous
    assert _C._host_alias(t.view(torch.int32)) is None  # the buffer holds floats
    held = _C._host_alias(t)
    assert held is not None and _C._host_alias(t) is None  # the first alias, in use, shares the buffer
    # Released (its collective done), it keeps the memory valid but no
    # longer blocks a new alias: Gloo's kept works hold their tensors, and
    # every collective after the first on one tensor would otherwise stage.
    assert _C._release_host_alias(held) and not _C._release_host_alias(t.cpu())
    again = _C._host_alias(t)
    assert again is not None and again.data_ptr() == held.data_ptr()
    again.add_(1)
    torch.testing.assert_close(held, again)
    torch.testing.assert_close(t.cpu(), torch.arange(6.0) * 10 + 2)
    assert _C._host_alias(t) is None  # `again` is in use
    del held, again
    assert _C._host_alias(torch.ones(4, device="tpu")[1:3]) is not None  # an offset view
    assert _C._host_alias(torch.ones(4, device="tpu")[1:3]).tolist() == [1.0, 1.0]


def test_bad_use_gets_clear_errors(ranks):
    errors = ranks[0]["errors"]
    for r in range(W):
        if os.access("/dev/shm", os.W_OK):  # both ranks on this host: the shared-memory check
            assert ranks[r]["check"] == "shared memory"
        for what in ("shape_mismatch", "dtype_mismatch", "shape_mismatch_gloo"):
            kind, msg = ranks[r]["errors"][what]
            assert kind == "RuntimeError" and "different tensor shapes or dtypes" in msg, (r, what, msg)
        torch.testing.assert_close(ranks[r]["after_errors"], torch.full((2,), float(W)))
    assert errors["bad_size"][0] == "ValueError" and "must equal world size" in errors["bad_size"][1]
    assert errors["non_contiguous"][0] == "ValueError" and "contiguous" in errors["non_contiguous"][1]


def test_init_process_group_without_a_backend_uses_tpu_for_tpu_tensors(tmp_path):
    for got in launch("default_backend", tmp_path):
        assert got["backend"] == "tpu:tpu", got["backend"]
        torch.testing.assert_close(got["tpu"], torch.full((2,), 2.0))
        # As with cuda and NCCL: the accelerator's backend only; CPU tensors
        # need init_process_group("tpu") (or "cpu:gloo,tpu:tpu").
        assert "No backend type associated with device type cpu" in got["cpu_error"], got["cpu_error"]


def test_a_dead_rank_gives_an_error_not_a_hang(tmp_path):
    # Rank 1 exits right after init (exit code 0, so torchrun waits for rank 0).
    launch("rank_dies", tmp_path, check_files=False)
    got = torch.load(os.path.join(tmp_path, "rank_dies_rank0.pt"), weights_only=False)
    assert got["error"] is not None, "the collective with a dead peer returned normally"
    kind, msg = got["error"]
    assert kind in ("RuntimeError", "DistBackendError"), got["error"]
    assert "closed" in msg.lower() or "timed out" in msg.lower() or "timeout" in msg.lower(), msg
    assert got["seconds"] < 60, got["seconds"]  # the group's timeout is 15 s


def test_a_rank_that_dies_after_a_collective_is_seen_at_once(tmp_path):
    # The ranks share their check's memory by then; it watches the peers'
    # processes, so rank 0 need not wait for the group's 15 s timeout.
    launch("rank_dies_after_a_collective", tmp_path, check_files=False)
    got = torch.load(os.path.join(tmp_path, "rank_dies_after_a_collective_rank0.pt"), weights_only=False)
    assert got["error"] is not None, "the collective with a dead peer returned normally"
    kind, msg = got["error"]
    if not os.access("/dev/shm", os.W_OK):
        pytest.skip("no /dev/shm here: the group checks through Gloo (test_a_dead_rank_gives_an_error_not_a_hang)")
    assert kind == "RuntimeError" and "rank 1 exited" in msg, got["error"]
    assert got["seconds"] < 10, got["seconds"]


@pytest.mark.parametrize("scenario", ["rank_stuck", "rank_stuck_first"])
def test_a_stuck_rank_makes_the_others_raise_within_the_timeout(tmp_path, scenario):
    # init_process_group(timeout=20 s): rank 1 is alive but never reaches the
    # all_reduce, after one collective (the shared-memory check is set up)
    # or before any (the check is still being set up through the store).
    launch(scenario, tmp_path, check_files=False)
    got = torch.load(os.path.join(tmp_path, f"{scenario}_rank0.pt"), weights_only=False)
    assert got["error"] is not None, "the collective with a stuck peer returned normally"
    kind, msg = got["error"]
    assert kind in ("RuntimeError", "DistBackendError") and "timed out" in msg.lower(), got["error"]
    assert 15 < got["seconds"] < 40, got["seconds"]


def test_completed_works_are_released_even_behind_an_incomplete_older_one(monkeypatch):
    # A Gloo work marks itself completed only after its thread has released
    # its future's callbacks, so an old work can stay incomplete while many
    # newer ones finish (seen in CI on a fast machine: 82 works kept, not 8).
    import collections

    from torch_tpu import distributed as td

    class FakeWork:
        def __init__(self, done):
            self.done = done

        def is_completed(self):
            return self.done

    monkeypatch.setattr(td, "_kept", collections.deque())
    slow = td._keep(FakeWork(False))
    for _ in range(40):
        td._keep(FakeWork(True))
    assert len(td._kept) == 1 + td._KEEP_DONE
    assert td._kept[0] is slow
    slow.done = True
    td._keep(FakeWork(True))
    assert len(td._kept) == td._KEEP_DONE and slow not in td._kept


def test_exit_right_after_a_collective_future_does_not_abort(tmp_path):
    # Gloo's thread releases the Python callbacks it ran under the GIL; exit
    # waits for it (torch_tpu/distributed.py), or the process aborts with
    # "terminate called without an active exception".
    for got in launch("exit_after_future", tmp_path):
        torch.testing.assert_close(got["t"], torch.full((4,), 4.0))
        # Completed works beyond the newest 8 are released while Python runs
        # (40 collectives ran): what exit keeps stays bounded. The first two
        # collectives' Gloo works may still be incomplete (their thread is
        # still releasing the slowed callbacks), so up to 8 + 2.
        assert 1 <= got["kept"] <= 10, got["kept"]
