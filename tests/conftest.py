import os
import tempfile

# Tests run with CPU fallback off: an unimplemented op must fail loudly.
os.environ.setdefault("TORCH_TPU_CPU_FALLBACK", "0")
# A fresh disk-cache directory per run, so compile counts in tests do not
# depend on what earlier runs left in ~/.cache/torch_tpu.
os.environ.setdefault("TORCH_TPU_CACHE_DIR", tempfile.mkdtemp(prefix="torch_tpu_test_cache_"))

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_tpu  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield


@pytest.fixture
def fresh_dynamo():
    """dynamo's caches and counters cleared before and after a test (the
    torch.compile test files use it for every test: pytestmark)."""
    import torch._dynamo

    torch._dynamo.reset()
    torch._dynamo.utils.counters.clear()
    yield
    torch._dynamo.reset()


@pytest.fixture
def strict_eager():
    """Strict eager for the test, whatever mode the run selects (files that
    test what strict eager alone does use it: pytestmark)."""
    prev = torch.tpu.eager_mode
    torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_NEVER
    yield
    torch.tpu.eager_mode = prev
