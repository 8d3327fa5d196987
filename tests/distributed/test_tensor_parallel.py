"""Tensor parallelism with DeviceMesh + parallelize_module over the tpu
backend, two ranks under torchrun: q/k/v and the MLP's first Linear
ColwiseParallel, the attention and MLP output projections RowwiseParallel.
Losses and final weights match one process on CPU."""
import torch

from tests.distributed.common import launch, reference


def test_colwise_rowwise_matches_single_process(tmp_path):
    ranks = launch("tp", tmp_path)
    ref_losses, ref_params = reference(tp=True)
    for got in ranks:
        assert {"h.0.attn.q.weight", "h.0.attn.c_proj.weight", "h.1.mlp.0.weight", "h.1.mlp.2.weight"} <= \
            set(got["sharded"]), got["sharded"]
        # Tolerances as in test_ddp.py: float32 sums in another order, then AdamW.
        torch.testing.assert_close(got["losses"], ref_losses, atol=1e-5, rtol=1e-5)
        for n, p in ref_params.items():
            torch.testing.assert_close(got["params"][n], p, atol=2e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")


def test_fsdp_by_tp_on_a_2d_mesh_matches_single_process(tmp_path):
    # 4 ranks: tensor parallel inside each pair, FSDP2 across the pairs.
    ranks = launch("fsdp_tp", tmp_path, nproc=4)
    ref_losses, ref_params = reference(tp=True)
    for got in ranks:
        assert got["meshes"] == ["('dp', 'tp')", "('dp',)"], got["meshes"]
        torch.testing.assert_close(got["losses"], ref_losses, atol=1e-5, rtol=1e-5)
        for n, p in ref_params.items():
            torch.testing.assert_close(got["params"][n], p, atol=2e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")


def test_sequence_parallel_and_loss_parallel_match_single_process(tmp_path):
    # SequenceParallel LayerNorms with the residual stream sharded along the
    # sequence, embeddings RowwiseParallel into that layout, and the head's
    # logits sharded over the vocabulary into loss_parallel's cross entropy.
    ranks = launch("tp_sequence_parallel", tmp_path)
    ref_losses, ref_params = reference(tp=True, untied=True)
    for got in ranks:
        torch.testing.assert_close(got["losses"], ref_losses, atol=1e-5, rtol=1e-5)
        assert got["params"].keys() == ref_params.keys()
        for n, p in ref_params.items():
            torch.testing.assert_close(got["params"][n], p, atol=2e-5, rtol=1e-4, msg=lambda m, n=n: f"{n}: {m}")
