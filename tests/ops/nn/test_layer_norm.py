"""layer_norm (and rms_norm, composite over it) forward and backward
against PyTorch CPU (csrc/ops/nn/layer_norm.cc)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


def assert_close(actual, expected, **tol):
    torch.testing.assert_close(actual.cpu(), expected, **tol)


# --- layer / rms norm ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_layer_norm_and_module(dtype):
    x = torch.randn(3, 4, 6, dtype=dtype)
    w, b = torch.randn(4, 6, dtype=dtype), torch.randn(4, 6, dtype=dtype)
    check(lambda x, w, b: F.layer_norm(x, [4, 6], w, b), x, w, b, grad=True)
    check(lambda x: F.layer_norm(x.transpose(0, 1), [6]), x, grad=True)
    m, tm = nn.LayerNorm(6), nn.LayerNorm(6).to(TPU)
    check(lambda x: tm(x) if x.device.type == "tpu" else m(x), torch.randn(5, 6), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rms_norm(dtype):
    x = torch.randn(3, 4, 6, dtype=dtype)
    w = torch.randn(6, dtype=dtype)
    check(lambda x, w: F.rms_norm(x, [6], w), x, w, grad=True)
    check(lambda x: F.rms_norm(x[:, ::2], [2, 6], eps=1e-3), x, grad=True)
    m = nn.RMSNorm([4, 6])
    with torch.no_grad():
        m.weight.copy_(torch.randn(4, 6))
    tm = nn.RMSNorm([4, 6]).to(TPU)
    tm.load_state_dict(m.state_dict())
    xf = x.float().requires_grad_()
    xt = xf.detach().to(TPU).requires_grad_()
    y, yt = m(xf), tm(xt)
    assert_close(yt.detach(), y.detach())
    y.sum().backward()
    yt.sum().backward()
    assert_close(xt.grad, xf.grad)
    assert_close(tm.weight.grad, m.weight.grad)
    both_raise(RuntimeError, lambda x: F.rms_norm(x, [5]), x)


# --- layer norm --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, False)])
def test_layer_norm(dtype, affine):
    x = torch.randn(3, 4, 6, dtype=dtype) * 2 + 1
    w = torch.randn(6, dtype=dtype) if affine[0] else None
    b = torch.randn(6, dtype=dtype) if affine[1] else None
    args = [a for a in (w, b) if a is not None]
    check(lambda x, *wb: F.layer_norm(x, [6], *wb, eps=1e-5), x, *args, grad=True)


def test_layer_norm_multi_dim_and_views():
    x, w, b = torch.randn(2, 3, 4, 5), torch.randn(4, 5), torch.randn(4, 5)
    check(lambda x, w, b: F.layer_norm(x, [4, 5], w, b), x, w, b, grad=True)
    check(lambda x, w: F.layer_norm(x.transpose(0, 2), [2], w), torch.randn(2, 3, 4), torch.randn(2), grad=True)
    # returned statistics match CPU's too
    check(lambda x, w, b: torch.native_layer_norm(x, [5], w, b, 1e-3), x, torch.randn(5), torch.randn(5))


def test_layer_norm_errors():
    x = torch.randn(4, 5)
    both_raise(RuntimeError, lambda x: F.layer_norm(x, [4]), x)
    both_raise(RuntimeError, lambda x, w: F.layer_norm(x, [5], w), x, torch.ones(4))
