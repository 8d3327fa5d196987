"""renorm vs CPU (csrc/ops/nn/renorm.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check


@pytest.mark.parametrize("dtype,p", [(torch.float32, 1), (torch.float32, 3.5), (torch.float32, float("inf")),
                                     (torch.bfloat16, 2)])
def test_renorm(dtype, p):
    x = torch.randn(4, 5, 3, dtype=dtype) * 3
    check(lambda x: torch.renorm(x, p, 1, 2.0), x, grad=True)
    check(lambda x: torch.renorm(x.transpose(0, 2), p, 0, 1.5), x, grad=True)
    cx, tx = x.clone(), x.to(TPU)
    cx.renorm_(p, 0, 1.0)
    tx.renorm_(p, 0, 1.0)
    torch.testing.assert_close(tx.cpu(), cx, atol=1e-2 if dtype == torch.bfloat16 else 1e-5, rtol=1.6e-2)


def test_renorm_errors():
    both_raise(RuntimeError, lambda x: torch.renorm(x, 0, 0, 1.0), torch.randn(3, 3))
    both_raise(RuntimeError, lambda x: torch.renorm(x, 2, 0, -1.0), torch.randn(3, 3))
    both_raise(RuntimeError, lambda x: torch.renorm(x, 2, 0, 1.0), torch.randn(3))
