"""rsub vs CPU (csrc/ops/pointwise/arithmetic.cc; add/sub/mul/div are
exercised throughout the other tests)."""
import pytest
import torch

from tests.helpers import both_raise, check, rnd

# --- rsub ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_rsub(dtype):
    a, b = rnd(3, 4, dtype=dtype), rnd(4, dtype=dtype)
    check(lambda x, y: torch.rsub(x, y), a, b, grad=dtype.is_floating_point)
    check(lambda x, y: torch.rsub(x, y, alpha=2), a, b)
    check(lambda x: torch.rsub(x, 3), a)
    check(lambda x: torch.rsub(x.t(), 1), rnd(4, 3, dtype=dtype))


def test_rsub_bool_raises():
    both_raise(RuntimeError, torch.rsub, rnd(3, dtype=torch.bool), rnd(3, dtype=torch.bool))
