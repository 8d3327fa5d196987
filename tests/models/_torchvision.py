"""Imports torchvision next to the CPU torch wheel.

PyPI's torchvision 0.28 wheel is built against CUDA torch: its compiled ops
library (torchvision/_C.so) links libtorch_cuda.so, so it cannot load beside
the CPU wheel. The models are plain Python and do not need it, but the
package import registers fake kernels for torchvision::nms and ::qnms
without checking that the library defined them, and fails. Declaring those
two schemas first (the signatures torchvision's C++ library declares) lets the
import go through; the ops themselves still raise, having no kernels.
transformers imports torchvision whenever it is installed, so
tests/models/conftest.py declares them before any model test is collected.
"""
import torch

_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
_lib = None


def declare_missing_ops():
    """Declares the two schemas if the compiled library did not. Idempotent."""
    global _lib
    missing = []
    for name, schema in _SCHEMAS.items():
        try:
            torch._C._dispatch_find_schema_or_throw(f"torchvision::{name}", "")
        except RuntimeError:
            missing.append(schema)
    if missing:
        _lib = _lib or torch.library.Library("torchvision", "FRAGMENT")
        for schema in missing:
            _lib.define(schema)


def import_torchvision():
    declare_missing_ops()
    import torchvision

    return torchvision
