"""DLPack and tpu tensors.

A tpu tensor's memory is a PJRT buffer owned by the runtime (on a TPU, in
device HBM), not an address a DLPack consumer could read, so tpu tensors are
not exported: ``__dlpack__`` raises ``BufferError`` (the type the DLPack
protocol uses for "cannot export") and ``__dlpack_device__`` reports the
device honestly as an extension device. Copy to the host first:
``np.from_dlpack(t.cpu())``. Import into tpu is refused in C++ (a foreign
pointer is never read as a tpu storage).
"""
from __future__ import annotations

import functools

import torch

_MSG = ("tpu tensors cannot be exported through DLPack: their memory is a PJRT device buffer, not "
        "an address another library can read. Copy it first: torch.from_dlpack(t.cpu()) or "
        "numpy.from_dlpack(t.cpu())")


def _install() -> None:
    if getattr(torch.Tensor.__dlpack__, "_torch_tpu", False):
        return
    orig_dlpack, orig_device = torch.Tensor.__dlpack__, torch.Tensor.__dlpack_device__
    orig_to = torch.utils.dlpack.to_dlpack

    @functools.wraps(orig_dlpack)
    def __dlpack__(self, *args, **kwargs):
        if self.device.type == "tpu":
            raise BufferError(_MSG)
        return orig_dlpack(self, *args, **kwargs)

    @functools.wraps(orig_device)
    def __dlpack_device__(self):
        if self.device.type == "tpu":
            from torch.utils.dlpack import DLDeviceType

            return (DLDeviceType.kDLExtDev, self.device.index or 0)
        return orig_device(self)

    @functools.wraps(orig_to)
    def to_dlpack(tensor):
        if isinstance(tensor, torch.Tensor) and tensor.device.type == "tpu":
            raise RuntimeError(_MSG)
        return orig_to(tensor)

    __dlpack__._torch_tpu = True
    torch.Tensor.__dlpack__ = __dlpack__
    torch.Tensor.__dlpack_device__ = __dlpack_device__
    torch.utils.dlpack.to_dlpack = to_dlpack
    if getattr(torch, "to_dlpack", None) is orig_to:
        torch.to_dlpack = to_dlpack
