"""Hugging Face `accelerate` (and so `Trainer`) data-parallel on tpu under
torchrun.

accelerate decides distributed training from a fixed table of device types
and their process-group backends. tpu is not in it, so under torchrun it
would set `DistributedType.NO`: every rank would train the whole dataset on
its own, unwrapped, and the job would only look distributed. This module
teaches accelerate the one thing it lacks: with a `LOCAL_RANK` and tpu as
the accelerator, the backend is the "tpu" process group and the type is
accelerate's generic multi-device data parallel (`MULTI_GPU`: DDP over a
torch.distributed backend, nothing CUDA-specific on that path once the
device is set). Everything else stays accelerate's: data sharding, loss
gathering, gradient accumulation, checkpoints.

It patches `accelerate.state` and `accelerate.accelerator` when each is
first imported, so importing torch_tpu costs nothing for users who never
import accelerate.
"""
from __future__ import annotations

import inspect
import os
import warnings

from torch_tpu._after_import import after_import


def _tpu_is_the_accelerator() -> bool:
    import torch

    try:
        acc = torch.accelerator.current_accelerator()
    except RuntimeError:
        return False
    return acc is not None and acc.type == "tpu"


def _known_shape(fn, params) -> bool:
    try:
        return list(inspect.signature(fn).parameters) == params
    except (TypeError, ValueError):
        return False


def _patch_state(mod) -> None:
    PartialState, DistributedType = mod.PartialState, mod.DistributedType
    if getattr(PartialState, "_torch_tpu_patched", False):
        return
    prepare_backend, set_device = PartialState._prepare_backend, PartialState.set_device
    if not _known_shape(prepare_backend, ["self", "cpu", "sagemaker_dp", "backend"]) or \
            not _known_shape(set_device, ["self"]) or not hasattr(DistributedType, "MULTI_GPU"):
        warnings.warn("torch_tpu: this version of accelerate decides distributed training in a way torch_tpu does "
                      "not know; under torchrun a Hugging Face Trainer on tpu would train each rank alone, without "
                      "DDP. Use accelerate 1.16 (requirements.txt) or a DDP/FSDP2 loop of your own.", stacklevel=2)
        return

    def _prepare_backend(self, cpu=False, sagemaker_dp=False, backend=None):
        if (not cpu and not sagemaker_dp and backend in (None, "tpu")
                and int(os.environ.get("LOCAL_RANK", -1)) != -1 and _tpu_is_the_accelerator()):
            return "tpu", DistributedType.MULTI_GPU
        return prepare_backend(self, cpu, sagemaker_dp, backend)

    def _set_device(self):
        if self.device is None and self.backend == "tpu" and self.distributed_type != DistributedType.NO:
            import torch

            # One process per device: rank r of a host drives its r-th tpu
            # device, or the only one (XLA:CPU gives each process its own).
            self.device = torch.device("tpu", self.local_process_index % torch.tpu.device_count())
            torch.tpu.set_device(self.device)
            return
        set_device(self)

    PartialState._prepare_backend = _prepare_backend
    PartialState.set_device = _set_device
    PartialState._torch_tpu_patched = True


def _patch_accelerator(acc_mod) -> None:
    # accelerate wraps DDP with device_ids=[local rank], the CUDA convention.
    # tpu's DDP takes device_ids=None (the module's own device), which
    # accelerate passes when ACCELERATE_BYPASS_DEVICE_MAP is set. That flag
    # also skips its refusal of device_map="auto" models, so the refusal is
    # made here first.
    Accelerator = acc_mod.Accelerator
    if getattr(Accelerator, "_torch_tpu_patched", False):
        return
    prepare_model = Accelerator.prepare_model

    def _prepare_model(self, model, *args, **kwargs):
        if self.state.backend != "tpu" or self.distributed_type == acc_mod.DistributedType.NO:
            return prepare_model(self, model, *args, **kwargs)
        if self.verify_device_map(model):
            raise ValueError("You can't train a model that has been loaded with `device_map='auto'` in any "
                             "distributed mode. Load it on one tpu device, or launch one process.")
        old = os.environ.get("ACCELERATE_BYPASS_DEVICE_MAP")
        os.environ["ACCELERATE_BYPASS_DEVICE_MAP"] = "true"
        try:
            return prepare_model(self, model, *args, **kwargs)
        finally:
            if old is None:
                os.environ.pop("ACCELERATE_BYPASS_DEVICE_MAP", None)
            else:
                os.environ["ACCELERATE_BYPASS_DEVICE_MAP"] = old

    Accelerator.prepare_model = _prepare_model
    Accelerator._torch_tpu_patched = True


def _install() -> None:
    after_import("accelerate.state", _patch_state)
    after_import("accelerate.accelerator", _patch_accelerator)
