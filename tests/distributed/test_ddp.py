"""DistributedDataParallel over the tpu backend, two ranks under torchrun:
the GPT-style decoder trained with AdamW from one seed, half the global batch
per rank, several gradient buckets and a no_sync() accumulation step. Losses
and final weights match one process on CPU with the global batch."""
import torch

from tests.distributed.common import PARAM_ATOL, STEPS, launch, reference


def test_ddp_matches_single_process(tmp_path):
    ranks = launch("ddp", tmp_path)
    ref_losses, ref_params = reference()
    # After the first step DDP rebuilds its buckets at bucket_cap_mb and reduces each.
    log = ranks[0]["logging"]
    assert log["num_buckets_reduced"] > 1 and len(log["rebuilt_bucket_sizes"].split(",")) > 1, log
    for r, got in enumerate(ranks):
        assert got["losses"].shape == (STEPS,)
        # float32 on XLA:CPU vs ATen CPU: per-rank partial sums, then the
        # all-reduce, add in another order than one CPU pass over the batch
        # (a few ulp); AdamW's normalised steps carry that into the weights.
        torch.testing.assert_close(got["losses"], ref_losses, atol=1e-5, rtol=1e-5)
        assert got["params"].keys() == ref_params.keys()
        for n, p in ref_params.items():
            torch.testing.assert_close(got["params"][n], p, atol=PARAM_ATOL, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
    for n in ref_params:  # the ranks hold identical replicas
        assert torch.equal(ranks[0]["params"][n], ranks[1]["params"][n]), n


def test_compiled_ddp_matches_single_process(tmp_path):
    # torch.compile(DDP(model), backend="tpu"): dynamo's DDPOptimizer splits
    # the graph at bucket boundaries; the collectives run between the pieces.
    ranks = launch("ddp_compile", tmp_path)
    ref_losses, ref_params = reference()
    for got in ranks:
        torch.testing.assert_close(got["losses"], ref_losses, atol=1e-5, rtol=1e-5)
        for n, p in ref_params.items():
            torch.testing.assert_close(got["params"][n], p, atol=PARAM_ATOL, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
