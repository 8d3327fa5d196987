"""Registers the ``tpu`` device with PyTorch.

``load`` is the ``torch.backends`` entry point, so a bare ``import torch``
registers the device. It must never break ``import torch``: failures there
become a warning (set TORCH_DEVICE_BACKEND_AUTOLOAD=0 to skip autoload).
"""
from __future__ import annotations

import importlib.util
import logging
import os
import warnings

logger = logging.getLogger("torch_tpu")
# One variable for both the C++ side and this logger (docs/environment_variables.md).
_level = os.environ.get("TORCH_TPU_LOG_LEVEL", "").upper()
if _level in ("DEBUG", "INFO", "WARNING", "ERROR"):
    logger.setLevel(_level)

_registered = False


def _find_in_package(package: str, *relative: str) -> str:
    """Path of a file shipped inside an installed package, without importing it."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return ""
    if spec is None or not spec.submodule_search_locations:
        return ""
    for base in spec.submodule_search_locations:
        path = os.path.join(base, *relative)
        if os.path.exists(path):
            return path
    return ""


def plugin_candidates() -> dict[str, str]:
    """Installed PJRT plugins, by kind. The C++ runtime picks among them."""
    tpu = os.environ.get("TPU_LIBRARY_PATH", "") or _find_in_package("libtpu", "libtpu.so")
    cuda = _find_in_package("jax_plugins.xla_cuda13", "xla_cuda_plugin.so") or _find_in_package(
        "jax_plugins.xla_cuda12", "xla_cuda_plugin.so"
    )
    cpu = _find_in_package("xla_plugins.xla_cpu_pjrt", "xla_cpu_pjrt.so")
    return {"tpu": tpu, "cuda": cuda, "cpu": cpu}


_OWN_NPROC = "TORCH_TPU_DEFAULT_PJRT_NPROC"


def _set_cpu_threads(devices: int) -> None:
    """XLA:CPU sizes its thread pool from PJRT_NPROC when its client starts.
    One device in use: torch's thread count, so the two pools don't
    oversubscribe small machines. Several devices that one process drives
    together (TORCH_TPU_NUM_CPU_DEVICES: SPMD, torch.tpu.comm): also at least
    two threads per device.
    XLA:CPU runs every partition of a multi-device program on that pool, and
    with fewer threads the partitions already waiting in a collective can
    hold them all while a partner partition waits for one; after 40 s the
    plugin aborts the process ("Termination timeout ... only 1 of them
    arrived")."""
    import torch

    threads = max(1, torch.get_num_threads())
    if devices > 1:
        threads = max(threads, 2 * devices)
    chosen = os.environ.get("PJRT_NPROC")
    # A value a parent torch_tpu process chose for itself is not the user's.
    if chosen is not None and chosen == os.environ.get(_OWN_NPROC):
        chosen = None
    if chosen is None:
        os.environ["PJRT_NPROC"] = os.environ[_OWN_NPROC] = str(threads)
    elif devices > 1 and chosen.isdigit() and int(chosen) < 2 * devices:
        warnings.warn(f"PJRT_NPROC={chosen} gives XLA:CPU fewer than two threads for each of its {devices} devices: "
                      f"a program with collectives across them can deadlock, and XLA aborts the process after "
                      f"40 s. Leave PJRT_NPROC unset, or set it to at least {2 * devices}.", stacklevel=2)


def _register() -> None:
    global _registered
    if _registered:
        return
    import torch

    taken = torch._C._get_privateuse1_backend_name()
    if taken not in ("privateuseone", "tpu"):
        raise RuntimeError(
            f"torch_tpu cannot register the 'tpu' device: PyTorch's PrivateUse1 backend is already "
            f"named '{taken}' by another package. Only one such backend fits in a process; import "
            f"torch_tpu in a process without '{taken}', or disable autoloading with "
            f"TORCH_DEVICE_BACKEND_AUTOLOAD=0."
        )
    # Under torchrun each local rank picks tpu:<LOCAL_RANK>, as with CUDA
    # (DeviceMesh calls set_device(LOCAL_RANK)), so XLA:CPU gets one device
    # per local rank there; every process still runs only on its own.
    cpu_devices = int(os.environ.get("TORCH_TPU_NUM_CPU_DEVICES", os.environ.get("LOCAL_WORLD_SIZE", "1")))
    # Under torchrun a rank runs on its own device alone: no extra threads.
    _set_cpu_threads(int(os.environ.get("TORCH_TPU_NUM_CPU_DEVICES", "1")))
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")  # hide XLA INFO lines

    from torch_tpu import _C

    c = plugin_candidates()
    _C._configure(c["tpu"], c["cuda"], c["cpu"], cpu_devices)

    if taken != "tpu":
        torch.utils.rename_privateuse1_backend("tpu")
    from torch_tpu import tpu as device_module

    torch._register_device_module("tpu", device_module)
    if not hasattr(torch.Tensor, "is_tpu"):
        torch.utils.generate_methods_for_privateuse1_backend(
            for_tensor=True, for_module=True, for_storage=True
        )
    from torch_tpu import _amp

    _amp._register()
    _registered = True
    logger.debug("registered the tpu device; plugin candidates: %s", c)


def load() -> None:
    """``torch.backends`` entry point (same name as TorchTPU's)."""
    try:
        import torch_tpu  # noqa: F401
    except Exception as e:  # never break `import torch`
        warnings.warn(f"torch_tpu failed to load and the 'tpu' device is unavailable: {e}")
