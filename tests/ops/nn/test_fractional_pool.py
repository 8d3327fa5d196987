"""fractional_max_pool2d/3d vs CPU (csrc/ops/nn/fractional_pool.cc)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


# --- fractional max pool -----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_fractional_max_pool(dtype):
    x = torch.randn(2, 3, 9, 7, dtype=dtype)
    s = torch.rand(2, 3, 2, dtype=dtype)
    check(lambda x: F.fractional_max_pool2d(x, 2, output_size=(4, 3), _random_samples=s.to(x.device),
                                            return_indices=True), x, grad=True)
    check(lambda x: F.fractional_max_pool2d(x[0].transpose(1, 2), (3, 2), output_size=3,
                                            _random_samples=s[:1].to(x.device)), x, grad=True)
    x3 = torch.randn(1, 2, 5, 6, 7, dtype=dtype)
    s3 = torch.rand(1, 2, 3, dtype=dtype)
    check(lambda x: F.fractional_max_pool3d(x, 2, output_size=(3, 4, 2), _random_samples=s3.to(x.device),
                                            return_indices=True), x3, grad=True)


def test_fractional_max_pool_errors():
    both_raise(RuntimeError, lambda x, s: F.fractional_max_pool2d(x, 4, output_size=3, _random_samples=s),
               torch.randn(1, 1, 5, 5), torch.rand(1, 1, 2))


def test_fractional_max_pool_random():
    x = torch.randn(2, 3, 10, 10, device=TPU)
    y = F.fractional_max_pool2d(x, 3, output_ratio=(0.5, 0.5))
    assert y.shape == (2, 3, 5, 5)


def test_fractional_max_pool_out_forms():
    from tests.helpers import check_pair_out

    x, s = torch.randn(2, 3, 9, 7), torch.rand(2, 3, 2)
    x3, s3 = torch.randn(1, 2, 5, 6, 7), torch.rand(1, 2, 3)
    dts = (torch.float32, torch.long)
    check_pair_out(lambda a, out: torch._C._nn.fractional_max_pool2d(a, (2, 2), (4, 3), s.to(a.device), out=out), x,
                   dts)
    check_pair_out(lambda a, out: torch._C._nn.fractional_max_pool3d(a, (2, 2, 2), (3, 4, 2), s3.to(a.device),
                                                                     out=out), x3, dts)
    # The backward's out= form: CPU's values into an empty out.
    outs = []
    for dev in ("cpu", TPU):
        xd = x.to(dev)
        _, idx = torch._C._nn.fractional_max_pool2d(xd, (2, 2), (4, 3), s.to(dev))
        g = torch.arange(2 * 3 * 4 * 3, dtype=torch.float32).reshape(2, 3, 4, 3).to(dev)
        gi = torch.empty(0, device=dev)
        bwd = torch.ops.aten.fractional_max_pool2d_backward.grad_input
        assert bwd(g, xd, [2, 2], [4, 3], idx, grad_input=gi) is gi
        outs.append(gi.cpu())
    torch.testing.assert_close(outs[1], outs[0])
