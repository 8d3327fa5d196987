"""_foreach_* ops (as the optimizers use them) vs CPU (csrc/ops/optim/foreach.cc)."""
import pytest
import torch

from tests.helpers import TPU


def needs(*ops):
    """Skips until kernels owned by other op families are registered."""
    missing = [o for o in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{o}", "PrivateUse1")]
    return pytest.mark.skipif(bool(missing), reason=f"tpu kernels missing: {missing}")


# --- _foreach_* ------------------------------------------------------------------------

def _lists(n=3):
    return [torch.randn(3, 2 + i) for i in range(n)]


def test_foreach_add_mul_div():
    a, b = _lists(), _lists()
    ta, tb = [x.to(TPU) for x in a], [x.to(TPU) for x in b]
    torch._foreach_add_(ta, tb, alpha=0.5)
    torch._foreach_add_(a, b, alpha=0.5)
    torch._foreach_mul_(ta, 0.9)
    torch._foreach_mul_(a, 0.9)
    torch._foreach_add_(ta, 1.5)
    torch._foreach_add_(a, 1.5)
    torch._foreach_div_(ta, [2.0, 3.0, 4.0])
    torch._foreach_div_(a, [2.0, 3.0, 4.0])
    torch._foreach_mul_(ta, tb)
    torch._foreach_mul_(a, b)
    r = list(torch._foreach_add(ta, tb))
    e = list(torch._foreach_add(a, b))
    for x, y in zip(ta + r, a + e):
        torch.testing.assert_close(x.cpu(), y)
    torch._foreach_zero_(ta)
    assert all(not x.cpu().any() for x in ta)


@needs("lerp_.Scalar", "addcmul_", "addcdiv_", "sqrt", "maximum")
def test_foreach_adam_ops():
    a, b, c = _lists(), _lists(), [x.abs() + 0.1 for x in _lists()]
    ta, tb, tc = ([x.to(TPU) for x in l] for l in (a, b, c))
    for lib in ((a, b, c), (ta, tb, tc)):
        x, y, z = lib
        torch._foreach_lerp_(x, y, 0.1)
        torch._foreach_addcmul_(x, y, z, value=0.3)
        s = torch._foreach_sqrt(z)
        torch._foreach_addcdiv_(x, y, s, [0.1, 0.2, 0.3])
        torch._foreach_maximum_(x, y)
    for x, y in zip(ta, a):
        torch.testing.assert_close(x.cpu(), y)
