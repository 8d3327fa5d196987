"""torch_tpu: a native PyTorch backend for XLA devices through PJRT.

Importing this package (or just ``import torch``, through the autoload entry
point) registers the ``tpu`` device. See README.md and docs/.
"""
import sys as _sys
import warnings as _warnings

__version__ = "0.1.0"
__all__ = [
    "EagerMode", "mark_step", "cache", "debug", "set_cpu_fallback", "get_cpu_fallback", "cpu_fallback", "__version__",
]


def _autoloading() -> bool:
    """Whether PyTorch's backend autoload (inside ``import torch``) is importing us."""
    f = _sys._getframe(1)
    while f is not None:
        if f.f_code.co_name == "_import_device_backends":
            return True
        f = f.f_back
    return False


def _init() -> None:
    import atexit

    from torch_tpu._loader import _register

    _register()
    from torch_tpu import (
        _control_flow,
        _dlpack,
        _dynamo_patches,
        _eager,
        _fastpath,
        _hf_accelerate,
        _hf_generate,
        _profiler,
        cache,
        debug,
        distributed,
        graphs,
    )
    # Background cache writes finish before the process exits.
    atexit.register(cache.flush)
    atexit.register(_eager._drain_autograd_device_threads)  # runs first (LIFO)
    _eager._install()
    _dynamo_patches._install()
    _dlpack._install()
    _fastpath._install()
    distributed._install()
    debug._install()
    graphs._install()
    _profiler._install()
    _control_flow._install()
    _hf_accelerate._install()
    _hf_generate._install()


try:
    _init()
except Exception as _e:
    # A failure here must not break `import torch` (autoload imports this
    # package): warn and leave the device unregistered. A direct
    # `import torch_tpu` raises as usual.
    if not _autoloading():
        raise
    _hint = (" The C++ extension looks older than the Python code: rebuild it (make, or ninja -C build)."
             if isinstance(_e, AttributeError) and "torch_tpu._C" in str(_e) else "")
    _warnings.warn(f"torch_tpu failed to load and the 'tpu' device is unavailable: {_e}.{_hint} "
                   "TORCH_DEVICE_BACKEND_AUTOLOAD=0 skips loading it.", stacklevel=2)
else:
    from torch_tpu import cache, debug  # noqa: E402,F401
    from torch_tpu._eager import EagerMode, mark_step  # noqa: E402,F401
    from torch_tpu._fallback import cpu_fallback, get_cpu_fallback, set_cpu_fallback  # noqa: E402,F401
    from torch_tpu._scan_layers import ScannedLayers, scan_layers  # noqa: E402,F401
