"""torch_tpu: a native PyTorch backend for XLA devices through PJRT.

Importing this package (or just ``import torch``, through the autoload entry
point) registers the ``tpu`` device. See README.md and docs/.
"""
from torch_tpu._loader import _register as _register

_register()

import atexit as _atexit  # noqa: E402

from torch_tpu import _compile, _dlpack, _eager, _fastpath, cache, debug, distributed, graphs  # noqa: E402
from torch_tpu._eager import EagerMode, mark_step  # noqa: E402
from torch_tpu._fallback import cpu_fallback, get_cpu_fallback, set_cpu_fallback  # noqa: E402

__version__ = "0.1.0"

# Background cache writes finish before the process exits.
_atexit.register(cache.flush)
_atexit.register(_eager._drain_autograd_device_threads)  # runs first (LIFO)
_eager._install()
_compile._install()
_dlpack._install()
_fastpath._install()
distributed._install()
debug._install()
graphs._install()
__all__ = [
    "EagerMode", "mark_step", "cache", "debug", "set_cpu_fallback", "get_cpu_fallback", "cpu_fallback", "__version__",
]
