"""Resampling (F.interpolate: nearest, nearest-exact, linear, bilinear,
trilinear, bicubic), forward and backward, against PyTorch CPU
(csrc/ops/nn/upsample.cc)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

# --- interpolate ------------------------------------------------------------------

SHAPES = {1: (2, 3, 5), 2: (2, 3, 5, 4), 3: (1, 2, 3, 4, 5)}
LINEAR = {1: "linear", 2: "bilinear", 3: "trilinear"}


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.6),
                                dict(size=7), dict(scale_factor=2.3, recompute_scale_factor=True)])
def test_interpolate_nearest(nd, kw):
    x = torch.randn(*SHAPES[nd])
    for mode in ["nearest", "nearest-exact"]:
        check(lambda x: F.interpolate(x, mode=mode, **kw), x, grad=True)


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(scale_factor=1.7), dict(scale_factor=0.45),
                                dict(size=1)])
def test_interpolate_linear(nd, kw):
    x = torch.randn(*SHAPES[nd])
    for align_corners in [False, True]:
        check(lambda x: F.interpolate(x, mode=LINEAR[nd], align_corners=align_corners, **kw), x, grad=True)


@pytest.mark.parametrize("kw", [dict(scale_factor=2), dict(scale_factor=1.3), dict(scale_factor=0.5),
                                dict(size=(7, 3)), dict(size=(1, 9))])
def test_interpolate_bicubic(kw):
    # Taps past the border read the edge pixel (clamped), A = -0.75.
    x = torch.randn(2, 3, 5, 4)
    for align_corners in [False, True]:
        check(lambda x: F.interpolate(x, mode="bicubic", align_corners=align_corners, **kw), x, grad=True)


@pytest.mark.parametrize("mode", ["nearest", "bilinear", "bicubic", "nearest-exact"])
def test_interpolate_bf16_noncontiguous_and_channels_last(mode):
    x = torch.randn(2, 6, 4, 5)
    ac = dict(align_corners=False) if mode in ("bilinear", "bicubic") else {}
    check(lambda x: F.interpolate(x, scale_factor=1.5, mode=mode, **ac), x.bfloat16(), grad=True)
    check(lambda x: F.interpolate(x[:, ::2].transpose(2, 3), size=(3, 7), mode=mode, **ac), x, grad=True)
    check(lambda x: F.interpolate(x.contiguous(memory_format=torch.channels_last), scale_factor=2, mode=mode, **ac),
          x, grad=True)


def test_interpolate_uint8_nearest_and_modules():
    x = torch.randint(0, 255, (1, 2, 3, 4), dtype=torch.uint8)
    check(lambda x: F.interpolate(x, scale_factor=2.5, mode="nearest"), x)
    check(lambda x: F.interpolate(x, size=(5, 5), mode="nearest-exact"), x)
    up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    check(up, torch.randn(1, 2, 3, 3), grad=True)
    check(nn.UpsamplingNearest2d(scale_factor=3), torch.randn(1, 2, 2, 3), grad=True)


def test_upsample_out_and_backward_ops():
    x = torch.randn(2, 3, 4, 5)
    big = torch.zeros(2, 3, 8, 20, device=TPU)
    out = big[:, :, :, ::2]  # out= into a strided view
    torch._C._nn.upsample_bilinear2d(x.to(TPU), [8, 10], False, None, None, out=out)
    torch.testing.assert_close(out.cpu(), torch._C._nn.upsample_bilinear2d(x, [8, 10], False, None, None))
    assert big[:, :, :, 1::2].abs().sum().item() == 0
    g = torch.randn(2, 3, 8, 10)
    for op, args in [(torch.ops.aten.upsample_bilinear2d_backward, ([8, 10], [2, 3, 4, 5], True, None, None)),
                     (torch.ops.aten.upsample_bicubic2d_backward, ([8, 10], [2, 3, 4, 5], False, 2.0, 2.0)),
                     (torch.ops.aten.upsample_nearest2d_backward, ([8, 10], [2, 3, 4, 5], None, None)),
                     (torch.ops.aten._upsample_nearest_exact2d_backward, ([8, 10], [2, 3, 4, 5], 2.0, 2.0))]:
        torch.testing.assert_close(op(g.to(TPU), *args).cpu(), op(g, *args))
    gi = torch.empty(0, device=TPU)
    torch.ops.aten.upsample_nearest1d_backward.grad_input(g[0].to(TPU), [10], [3, 8, 4], None, grad_input=gi)
    torch.testing.assert_close(gi.cpu(), torch.ops.aten.upsample_nearest1d_backward(g[0], [10], [3, 8, 4], None))


def test_interpolate_empty_batch_and_errors():
    check(lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), torch.randn(0, 3, 4, 4))
    x = torch.randn(1, 2, 4, 4)
    both_raise(NotImplementedError, lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"),
               x.to(torch.int32))
    both_raise(NotImplementedError, lambda x: F.interpolate(x, scale_factor=2), x.to(torch.int64))
    both_raise(RuntimeError, lambda x: torch._C._nn.upsample_nearest2d(x, [0, 3], None, None), x)
    both_raise(RuntimeError, lambda x: torch._C._nn.upsample_nearest2d(x, [3], None, None), x)
    both_raise(RuntimeError, lambda x: torch._C._nn.upsample_bilinear2d(x, [3, 3], False, None, None),
               torch.randn(2, 4, 4))
    both_raise(ValueError, lambda x: F.interpolate(x, size=(3, 3), scale_factor=2), x)
    g = torch.randn(1, 2, 5, 5)
    both_raise(RuntimeError, lambda g: torch.ops.aten.upsample_nearest2d_backward(g, [6, 6], [1, 2, 4, 4]), g)


@pytest.mark.parametrize("mode,kw", [("nearest", {}), ("nearest-exact", {}), ("bilinear", {}), ("bicubic", {}),
                                     ("bilinear", {"antialias": True}), ("bicubic", {"antialias": True}),
                                     ("trilinear", {}), ("nearest", {"3d": True})])
def test_channels_last_results_and_gradients_keep_cpus_layout(mode, kw):
    # CPU's upsample kernels keep a channels-last input's layout, and their
    # backward the gradient's; so does tpu.
    kw = dict(kw)
    three_d = kw.pop("3d", False) or mode == "trilinear"
    if three_d:
        x = torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d)
        size = (3, 7, 4)
    else:
        x = torch.randn(2, 3, 6, 7).to(memory_format=torch.channels_last)
        size = (4, 9)
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    e = F.interpolate(xc, size=size, mode=mode, **kw)
    a = F.interpolate(xt, size=size, mode=mode, **kw)
    assert a.stride() == e.stride(), (a.stride(), e.stride())
    torch.testing.assert_close(a.cpu(), e.detach())
    g = torch.randn(e.shape).to(memory_format=torch.channels_last_3d if three_d else torch.channels_last)
    e.backward(g)
    a.backward(g.to(TPU))
    assert xt.grad.stride() == xc.grad.stride(), (xt.grad.stride(), xc.grad.stride())
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)


def test_out_forms_refuse_another_dtype_like_cpu():
    x = torch.randn(1, 2, 5, 6)
    A = torch.ops.aten
    for fn in (lambda t, o: A.upsample_bilinear2d.out(t, [3, 4], False, None, None, out=o),
               lambda t, o: A._upsample_bilinear2d_aa.out(t, [3, 4], False, None, None, out=o),
               lambda t, o: A.upsample_nearest2d.out(t, [3, 4], None, None, out=o)):
        check(lambda t, o: (fn(t, o), o)[1], x, torch.empty(0))
        both_raise(RuntimeError, lambda t: fn(t, torch.empty(0, dtype=torch.float64, device=t.device)), x)
    g = torch.randn(1, 2, 3, 4)
    bwd = A._upsample_bicubic2d_aa_backward.grad_input
    check(lambda t, o: (bwd(t, [3, 4], [1, 2, 5, 6], False, None, None, grad_input=o), o)[1], g, torch.empty(0))
    both_raise(RuntimeError, lambda t: bwd(t, [3, 4], [1, 2, 5, 6], False, None, None,
                                           grad_input=torch.empty(0, dtype=torch.float64, device=t.device)), g)
