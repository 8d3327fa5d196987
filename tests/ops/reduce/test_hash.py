"""hash_tensor vs CPU (csrc/ops/reduce/hash.cc)."""
import pytest
import torch

from tests.helpers import TPU, check


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.int32, torch.bool])
def test_hash_tensor(dtype):
    x = torch.randn(4, 5).mul(10).to(dtype)
    check(torch.hash_tensor, x)
    check(lambda x: torch.hash_tensor(x, 1), x)
    check(lambda x: torch.hash_tensor(x, (0,), keepdim=True), x)
    check(lambda x: torch.hash_tensor(x, 0), x.t())
    check(torch.hash_tensor, torch.tensor(3).to(dtype))
    h = torch.hash_tensor(x.to(TPU))
    assert h.dtype == torch.uint64 and h.device.type == "tpu"
