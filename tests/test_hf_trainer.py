"""Hugging Face's Trainer on tpu: accelerate picks the tpu device by itself,
and a short fine-tune (AdamW, linear schedule, gradient clipping, logging,
evaluation) ends where the same run on the CPU does."""
from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")


class _Digits(torch.utils.data.Dataset):
    """Fixed token sequences: sample i is the same on every run."""

    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        ids = torch.randint(0, 96, (12,), generator=torch.Generator().manual_seed(i))
        return {"input_ids": ids, "labels": ids.clone()}


def _train(tmp_path, use_cpu: bool, with_trainer: bool = False):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=96)
    model = transformers.LlamaForCausalLM(cfg)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / ("cpu" if use_cpu else "tpu")), per_device_train_batch_size=4, max_steps=6,
        learning_rate=2e-3, lr_scheduler_type="linear", warmup_steps=2, max_grad_norm=1.0, logging_steps=2,
        eval_strategy="steps", eval_steps=3, per_device_eval_batch_size=4, report_to=[], save_strategy="no",
        use_cpu=use_cpu, dataloader_num_workers=0, seed=0, disable_tqdm=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_Digits(24), eval_dataset=_Digits(8))
    out = trainer.train()
    logs = [h for h in trainer.state.log_history if "loss" in h or "eval_loss" in h]
    if with_trainer:
        return model, out.training_loss, logs, trainer
    return model, out.training_loss, logs, args.device


def test_trainer_runs_on_tpu_and_matches_cpu(tmp_path):
    model, loss, logs, device = _train(tmp_path, use_cpu=False)
    ref, ref_loss, ref_logs, _ = _train(tmp_path, use_cpu=True)
    assert device.type == "tpu" and next(model.parameters()).device.type == "tpu"
    # Six AdamW steps on float32: XLA's and ATen's kernels round differently,
    # and the optimizer carries those differences on (the model tests allow
    # 1e-5 on losses after the first steps, too).
    torch.testing.assert_close(loss, ref_loss, atol=1e-5, rtol=1e-5)
    for got, expected in zip(logs, ref_logs):
        for key in ("loss", "eval_loss", "grad_norm", "learning_rate"):
            if key in expected:
                assert got[key] == pytest.approx(expected[key], rel=1e-4, abs=1e-5), (key, got, expected)
    for (name, p), q in zip(ref.named_parameters(), model.parameters()):
        torch.testing.assert_close(q.detach().cpu(), p.detach(), atol=1e-5, rtol=1e-4, msg=name)


def test_an_accelerate_of_unknown_shape_is_left_alone_with_a_warning():
    # A future accelerate whose backend choice takes other arguments must not
    # be patched blindly: the user is told that a Trainer under torchrun
    # would train each rank alone.
    import types

    from torch_tpu import _hf_accelerate

    class PartialState:
        def _prepare_backend(self, cpu, backend, timeout):
            return None, None

        def set_device(self):
            pass

    mod = types.SimpleNamespace(PartialState=PartialState, DistributedType=types.SimpleNamespace(MULTI_GPU=1))
    with pytest.warns(UserWarning, match="would train each rank alone"):
        _hf_accelerate._patch_state(mod)
    assert not getattr(PartialState, "_torch_tpu_patched", False)
    assert PartialState._prepare_backend.__name__ == "_prepare_backend"
    assert PartialState._prepare_backend.__qualname__.startswith("test_an_accelerate")
