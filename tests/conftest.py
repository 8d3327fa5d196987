import os

# Tests run with CPU fallback off: an unimplemented op must fail loudly.
os.environ.setdefault("TORCH_TPU_CPU_FALLBACK", "0")

import pytest  # noqa: E402
import torch  # noqa: E402

import torch_tpu  # noqa: E402,F401


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
