"""torch.distributed.checkpoint across world sizes: FSDP2 on two ranks saves
a sharded checkpoint of the model and AdamW state mid-training; one process
without FSDP, and FSDP2 on four ranks, load it and resume with the same loss
and weights as the two-rank run. And torch_tpu.checkpoint's directories."""
import os

import pytest
import torch

import torch_tpu.checkpoint
from tests.distributed.common import launch


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """(folder, the two ranks' payloads) of one FSDP2 save on two ranks,
    shared by the loads into other world sizes."""
    out = tmp_path_factory.mktemp("dcp")
    return out, launch("dcp_save", out, nproc=2)


def test_sharded_checkpoint_resumes_on_one_rank(saved):
    tmp_path, two = saved
    one = launch("dcp_load", tmp_path, nproc=1)[0]
    # The resumed step sees the global batch that the two ranks split, so its
    # loss is their mean, up to float32 summation order.
    torch.testing.assert_close(one["loss"], two[0]["losses"][-1], atol=1e-5, rtol=1e-5)
    for n, p in two[0]["params"].items():
        torch.testing.assert_close(one["params"][n], p, atol=2e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")


def test_a_checkpoint_saved_on_two_ranks_resumes_on_four(saved):
    tmp_path, two = saved
    four = launch("dcp_load_fsdp", tmp_path, nproc=4)
    torch.testing.assert_close(four[0]["loss"], two[0]["losses"][-1], atol=1e-5, rtol=1e-5)
    for n, p in two[0]["params"].items():
        torch.testing.assert_close(four[0]["params"][n], p, atol=2e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")


def test_checkpoint_directories_mark_complete_prune_and_skip_cut_ones(tmp_path):
    root = str(tmp_path)
    assert torch_tpu.checkpoint.latest(root) is None
    assert torch_tpu.checkpoint.latest(os.path.join(root, "missing")) is None
    for step in (4, 8, 12):
        path = torch_tpu.checkpoint.save({"w": torch.full((3,), float(step))}, root, step, keep=2)
        assert path == os.path.join(root, f"step_{step:09d}")
    assert sorted(os.listdir(root)) == ["step_000000008", "step_000000012"]  # keep=2
    os.makedirs(os.path.join(root, "step_000000016"))  # a save cut short: no marker
    path, step = torch_tpu.checkpoint.latest(root)
    assert step == 12
    state = {"w": torch.zeros(3)}
    import torch.distributed.checkpoint as dcp
    dcp.load(state, checkpoint_id=path)
    torch.testing.assert_close(state["w"], torch.full((3,), 12.0))
    with pytest.raises(ValueError, match="keep"):
        torch_tpu.checkpoint.save({}, root, 20, keep=0)
