"""torch.distributed.checkpoint across world sizes: FSDP2 on two ranks saves
a sharded checkpoint of the model and AdamW state mid-training; one process
without FSDP loads it and resumes with the same loss and weights as the
two-rank run."""
import torch

from tests.distributed.common import launch


def test_sharded_checkpoint_resumes_on_one_rank(tmp_path):
    two = launch("dcp_save", tmp_path, nproc=2)
    one = launch("dcp_load", tmp_path, nproc=1)[0]
    # The resumed step sees the global batch that the two ranks split, so its
    # loss is their mean, up to float32 summation order.
    torch.testing.assert_close(one["loss"], two[0]["losses"][-1], atol=1e-5, rtol=1e-5)
    for n, p in two[0]["params"].items():
        torch.testing.assert_close(one["params"][n], p, atol=2e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
