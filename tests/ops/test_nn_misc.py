"""Misc NN/math ops against PyTorch CPU: threshold, soft/hardshrink, prelu,
rrelu, logit backward, angle, sgn grad, channel_shuffle, renorm, trace,
logcumsumexp, cauchy_/geometric_, max_unpool, cdist/pdist, margin losses
and grid_sample."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


# --- pointwise activations ----------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_threshold(dtype):
    x = (torch.randn(5, 6) * 4).to(dtype)
    check(lambda x: F.threshold(x, 0.5, -2.0), x, grad=dtype.is_floating_point)
    check(lambda x: F.threshold(x.t()[1:], 1, 7), x, grad=dtype.is_floating_point)
    cx, tx = x.clone(), x.to(TPU)
    F.threshold(cx, 0.0, 3.0, inplace=True)
    F.threshold(tx, 0.0, 3.0, inplace=True)
    torch.testing.assert_close(tx.cpu(), cx)
    big = torch.zeros(4, 8, dtype=dtype, device=TPU)
    torch.threshold(x.to(TPU)[:4, :3], 0.0, 1.0, out=big[:, ::3])
    cbig = torch.zeros(4, 8, dtype=dtype)
    torch.threshold(x[:4, :3], 0.0, 1.0, out=cbig[:, ::3])
    torch.testing.assert_close(big.cpu(), cbig)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("fn", [F.softshrink, F.hardshrink])
def test_shrink(dtype, fn):
    x = torch.randn(6, 5, dtype=dtype) * 2
    x[0, 0] = 0.5  # on the boundary
    check(lambda x: fn(x, 0.5), x, grad=True)
    check(lambda x: fn(x[:, ::2], 1.2), x, grad=True)
    out_c, out_t = torch.empty(0, dtype=dtype), torch.empty(0, dtype=dtype, device=TPU)
    op = getattr(torch.ops.aten, fn.__name__).out
    op(x, 0.3, out=out_c)
    op(x.to(TPU), 0.3, out=out_t)
    torch.testing.assert_close(out_t.cpu(), out_c)


def test_softshrink_bad_lambda():
    both_raise(RuntimeError, lambda x: F.softshrink(x, -1.0), torch.randn(3))


@pytest.mark.parametrize("dtype", FLOATS)
def test_prelu(dtype):
    x = torch.randn(3, 4, 5, dtype=dtype)
    check(F.prelu, x, torch.rand(4, dtype=dtype), grad=True)
    check(F.prelu, x, torch.rand(1, dtype=dtype), grad=True)
    check(lambda x, w: F.prelu(x.transpose(1, 2), w), x, torch.rand(5, dtype=dtype), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_rrelu_eval(dtype):
    x = torch.randn(4, 6, dtype=dtype)
    check(lambda x: F.rrelu(x, 0.1, 0.3, training=False), x, grad=True)
    check(lambda x: F.rrelu(x.t(), training=False), x, grad=True)


def test_rrelu_train():
    x = torch.randn(200, device=TPU, requires_grad=True)
    y = F.rrelu(x, 0.1, 0.3, training=True)
    slope = (y / x).detach().cpu()
    xc = x.detach().cpu()
    assert torch.all(slope[xc >= 0] == 1)
    neg = slope[xc < 0]
    assert torch.all((neg >= 0.1 - 1e-6) & (neg <= 0.3 + 1e-6))
    assert neg.std() > 0.01  # random, not the mean slope
    y.sum().backward()
    torch.testing.assert_close(x.grad.cpu(), slope)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("eps", [None, 0.1])
def test_logit_grad(dtype, eps):
    x = torch.rand(5, 4, dtype=dtype) * 0.9 + 0.05
    x[0, :3] = torch.tensor([0.01, 0.99, 0.5])
    check(lambda x: torch.logit(x, eps), x, grad=True)
    # Outside [0, 1] the gradient is NaN without eps and 0 with it.
    y = torch.tensor([-0.1, 0.0, 0.3, 1.0, 1.2], dtype=dtype, requires_grad=True)
    yt = y.detach().to(TPU).requires_grad_()
    torch.logit(y, eps).sum().backward()
    torch.logit(yt, eps).sum().backward()
    torch.testing.assert_close(yt.grad.cpu(), y.grad, equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_angle(dtype):
    x = (torch.randn(10) * 3).to(dtype)
    if dtype.is_floating_point:
        x[1] = 0.0
    check(torch.angle, x, grad=dtype.is_floating_point)
    if dtype.is_floating_point:
        n = torch.tensor([float("nan"), -1.0], dtype=dtype)
        torch.testing.assert_close(torch.angle(n.to(TPU)).cpu(), torch.angle(n), equal_nan=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_sgn_grad(dtype):
    x = torch.randn(4, 5, dtype=dtype)
    check(torch.sgn, x, grad=True)


def test_efficientzerotensor():
    z = torch._efficientzerotensor((2, 3), device=TPU)
    assert z.shape == (2, 3) and z.device.type == "tpu"
    assert torch.all(z.cpu() == 0)


# --- shape / reduction style ops -----------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_channel_shuffle(dtype):
    x = (torch.randn(2, 6, 3, 2) * 5).to(dtype)
    check(lambda x: F.channel_shuffle(x, 3), x, grad=dtype.is_floating_point)
    check(lambda x: F.channel_shuffle(x.transpose(2, 3), 2), x, grad=dtype.is_floating_point)
    both_raise(RuntimeError, lambda x: F.channel_shuffle(x, 4), x)


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


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_trace(dtype):
    x = (torch.randn(5, 4) * 3).to(dtype)
    check(torch.trace, x, grad=dtype.is_floating_point)
    check(lambda x: torch.trace(x.t()[1:]), x, grad=dtype.is_floating_point)
    both_raise(RuntimeError, torch.trace, torch.randn(3))
    both_raise(NotImplementedError, torch.trace, torch.ones(2, 2, dtype=torch.bool))


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp(dtype):
    x = torch.randn(4, 9, dtype=dtype) * 5
    check(lambda x: torch.logcumsumexp(x, 1), x, grad=True)
    check(lambda x: torch.logcumsumexp(x.t(), 0), x, grad=True)
    check(lambda x: torch.logcumsumexp(x, 0), x, grad=True)
    y = torch.tensor([float("-inf"), float("-inf"), 1.0, float("inf"), 2.0, float("nan"), 3.0])
    torch.testing.assert_close(torch.logcumsumexp(y.to(TPU), 0).cpu(), torch.logcumsumexp(y, 0), equal_nan=True)
    check(lambda y: torch.logcumsumexp(y, 0), torch.tensor(2.5))


# --- random samplers -------------------------------------------------------------------

def test_cauchy_geometric():
    torch.manual_seed(0)
    c = torch.empty(4000, device=TPU).cauchy_(1.0, 2.0).cpu()
    assert torch.isfinite(c).all()
    assert abs(c.median().item() - 1.0) < 0.3
    g = torch.empty(4000, device=TPU).geometric_(0.25).cpu()
    assert (g >= 1).all() and torch.all(g == g.round())
    assert abs(g.mean().item() - 4.0) < 0.4
    gi = torch.empty(100, dtype=torch.int64, device=TPU).geometric_(0.5).cpu()
    assert (gi >= 1).all()
    b = torch.empty(10, dtype=torch.bfloat16, device=TPU).cauchy_()
    assert b.dtype == torch.bfloat16
    both_raise(RuntimeError, lambda x: x.geometric_(1.5), torch.empty(3))
    both_raise(RuntimeError, lambda x: x.cauchy_(0.0, -1.0), torch.empty(3))


# --- max_unpool ---------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
def test_max_unpool(dtype):
    x = torch.randn(2, 3, 8, dtype=dtype)
    y, i = F.max_pool1d(x, 2, return_indices=True)
    check(lambda y: F.max_unpool1d(y, i if y.device.type == "cpu" else i.to(TPU), 2), y, grad=True)
    x = torch.randn(2, 3, 6, 8, dtype=dtype)
    y, i = F.max_pool2d(x, 3, 2, return_indices=True)
    check(lambda y: F.max_unpool2d(y, i.to(y.device), 3, 2, output_size=(6, 8)), y, grad=True)
    check(lambda y: F.max_unpool2d(y[0], i[0].to(y.device), 3, 2, output_size=(6, 8)), y, grad=True)
    x = torch.randn(1, 2, 4, 6, 4, dtype=dtype)
    y, i = F.max_pool3d(x, 2, return_indices=True)
    check(lambda y: F.max_unpool3d(y, i.to(y.device), 2), y, grad=True)


def test_max_unpool_errors():
    y = torch.randn(1, 2, 3, 3)
    both_raise(RuntimeError, lambda y, i: F.max_unpool2d(y, i, 2), y, torch.zeros(1, 2, 3, 3, dtype=torch.int32))
    both_raise(RuntimeError, lambda y, i: F.max_unpool2d(y, i, 2), y, torch.zeros(1, 2, 3, 2, dtype=torch.int64))


# --- distances -----------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0, 0.5, 1, 2, 3, float("inf")])
def test_cdist(p):
    a = torch.randn(2, 4, 3)
    b = torch.randn(5, 3)
    b[1] = a[0, 1]  # a zero distance
    check(lambda a, b: torch.cdist(a, b, p), a, b, grad=True)
    check(lambda a, b: torch.cdist(a.transpose(1, 2), b.t()[1:], p), a, torch.randn(4, 6), grad=True)


def test_cdist_errors():
    both_raise(RuntimeError, torch.cdist, torch.randn(3, 4), torch.randn(3, 5))
    both_raise(RuntimeError, torch.cdist, torch.randn(3), torch.randn(3, 3))
    both_raise(RuntimeError, lambda a, b: torch.cdist(a, b, -1.0), torch.randn(3, 3), torch.randn(3, 3))


@pytest.mark.parametrize("p", [0, 1.5, 2, float("inf")])
def test_pdist(p):
    x = torch.randn(6, 4)
    check(lambda x: F.pdist(x, p), x, grad=True)
    check(lambda x: F.pdist(x.t(), p), torch.randn(3, 5), grad=True)
    both_raise(RuntimeError, F.pdist, torch.randn(3))


# --- margin losses ---------------------------------------------------------------------------

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("p", [1, 2])
def test_multi_margin_loss(reduction, p):
    x = torch.randn(5, 4)
    t = torch.randint(0, 4, (5,))
    w = torch.rand(4)
    check(lambda x: F.multi_margin_loss(x, t.to(x.device), p=p, margin=0.7, reduction=reduction), x, grad=True)
    check(lambda x: F.multi_margin_loss(x.t(), t[:4].to(x.device), p=p, weight=w.to(x.device), reduction=reduction),
          torch.randn(4, 4), grad=True)
    check(lambda x: F.multi_margin_loss(x, t[0].to(x.device), reduction=reduction), torch.randn(4), grad=True)


def test_multi_margin_loss_errors():
    both_raise(RuntimeError, lambda x, t: torch.ops.aten.multi_margin_loss(x, t, 3), torch.randn(2, 3),
               torch.tensor([0, 1]))
    both_raise(RuntimeError, F.multi_margin_loss, torch.randn(2, 3), torch.tensor([0, 1, 2]))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_multilabel_margin_loss(reduction):
    x = torch.randn(4, 5)
    t = torch.tensor([[3, 0, -1, 1, 2], [1, 2, 3, 4, 0], [-1, 1, 2, 3, 4], [4, 4, 1, -1, 0]])
    check(lambda x: F.multilabel_margin_loss(x, t.to(x.device), reduction=reduction), x, grad=True)
    check(lambda x: F.multilabel_margin_loss(x.t()[:4], t.to(x.device), reduction=reduction), torch.randn(5, 4),
          grad=True)
    check(lambda x: F.multilabel_margin_loss(x, t[0].to(x.device), reduction=reduction), torch.randn(5), grad=True)
    both_raise(RuntimeError, F.multilabel_margin_loss, x, t[:3])


# --- grid_sample ------------------------------------------------------------------------------

GRID_2D = [("bilinear", "zeros", False), ("bilinear", "border", True), ("bilinear", "reflection", False),
           ("bilinear", "reflection", True), ("nearest", "zeros", True), ("nearest", "reflection", False),
           ("bicubic", "zeros", False), ("bicubic", "border", True), ("bicubic", "reflection", False),
           ("bicubic", "reflection", True)]


@pytest.mark.parametrize("mode,padding,align", GRID_2D)
def test_grid_sample_2d(mode, padding, align):
    x = torch.randn(2, 3, 5, 4)
    g = torch.rand(2, 3, 6, 2) * 2.6 - 1.3
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align), x, g, grad=True)


def test_grid_sample_2d_bf16_nearest():
    # Only nearest in bf16: CPU computes bf16 grid coordinates in bf16, so
    # interpolation weights differ from ours (f32) by more than bf16 tolerance.
    x = torch.randn(2, 3, 5, 4, dtype=torch.bfloat16)
    g = torch.rand(2, 3, 6, 2, dtype=torch.bfloat16) * 2.6 - 1.3
    check(lambda x, g: F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=False), x, g,
          grad=True)


@pytest.mark.parametrize("mode,padding,align", [("bilinear", "zeros", False), ("bilinear", "reflection", True),
                                                ("nearest", "border", False)])
def test_grid_sample_3d(mode, padding, align):
    x = torch.randn(1, 2, 3, 4, 5)
    g = torch.rand(1, 2, 3, 2, 3) * 2.6 - 1.3
    check(lambda x, g: F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align), x, g, grad=True)


def test_grid_sample_errors():
    both_raise(RuntimeError, lambda x, g: F.grid_sample(x, g, align_corners=False), torch.randn(1, 1, 3, 3),
               torch.randn(2, 2, 2, 2))
    both_raise(RuntimeError, lambda x, g: F.grid_sample(x, g, mode="bicubic", align_corners=False),
               torch.randn(1, 1, 3, 3, 3), torch.randn(1, 2, 2, 2, 3))


# --- antialiased interpolate ---------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("align", [False, True])
@pytest.mark.parametrize("size", [(3, 5), (9, 4)])
def test_interpolate_antialias(mode, align, size):
    x = torch.randn(2, 3, 6, 8)
    check(lambda x: F.interpolate(x, size=size, mode=mode, align_corners=align, antialias=True), x, grad=True)
    check(lambda x: F.interpolate(x.transpose(2, 3), scale_factor=0.6, mode=mode, antialias=True), x, grad=True)


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
