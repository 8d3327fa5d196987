"""Padding (F.pad: constant, reflect, replicate, circular), forward and
backward, against PyTorch CPU (csrc/ops/nn/padding.cc)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


# --- padding --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int32, torch.int64, torch.bool])
def test_constant_pad(dtype):
    x = (torch.randn(2, 3, 4) * 5).to(dtype)
    v = True if dtype == torch.bool else 2
    check(lambda x: F.pad(x, (1, 2), value=v), x)
    check(lambda x: F.pad(x, (1, 2, 0, 1, 3, 0), value=v), x)
    check(lambda x: F.pad(x, (-1, 2, 1, -2)), x)  # negative pads crop
    check(lambda x: F.pad(x.transpose(0, 2)[1:], (2, 2)), x)


def test_constant_pad_grad_and_edges():
    x = torch.randn(3, 4, 5)
    check(lambda x: F.pad(x, (1, -2, -1, 3), value=-1.5), x, grad=True)
    check(lambda x: F.pad(x, (-5, 2)), x, grad=True)  # input cropped away entirely
    check(lambda x: F.pad(x, (0, 0)), x, grad=True)
    check(lambda x: F.pad(x, (1, 1)), torch.randn(2, 0))
    check(lambda x: F.pad(x, (1, 1), value=0.5), torch.randn(2, 3).bfloat16(), grad=True)
    both_raise(RuntimeError, lambda x: F.pad(x, (1, 2, 3)), x)
    both_raise(RuntimeError, lambda x: F.pad(x, (1,) * 8), x)
    both_raise(RuntimeError, lambda x: F.pad(x, (-3, -3)), x)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_reflect_replicate(mode, nd):
    shape = {1: (2, 3, 6), 2: (2, 3, 5, 6), 3: (1, 2, 4, 5, 6)}[nd]
    pads = {1: (2, 3), 2: (1, 3, 2, 0), 3: (3, 1, 0, 2, 1, 2)}[nd]
    x = torch.randn(*shape)
    check(lambda x: F.pad(x, pads, mode=mode), x, grad=True)
    check(lambda x: F.pad(x[0], pads, mode=mode), x, grad=True)  # no-batch form
    crop = tuple(-1 if i == 0 else p for i, p in enumerate(pads))  # negative pad crops here too
    check(lambda x: F.pad(x.transpose(-1, -2).contiguous().transpose(-1, -2), crop, mode=mode), x, grad=True)
    # bf16: CPU accumulates the gradient of a padded element (up to 2**nd
    # contributions) in bf16, we in f32, so CPU's result is off by a few bf16
    # ulps: tolerance 4 ulps at |x| ~ 2 instead of the default.
    check(lambda x: F.pad(x, pads, mode=mode), x.bfloat16(), grad=True, atol=4e-2, rtol=2e-2)


@pytest.mark.parametrize("nd", [1, 3])
def test_circular(nd):
    # Composite in ATen (slices + cat): many small programs, so one check each.
    shape = {1: (2, 3, 6), 3: (1, 2, 4, 5, 6)}[nd]
    pads = {1: (2, -1), 3: (3, 1, 0, 2, 1, 2)}[nd]
    check(lambda x: F.pad(x, pads, mode="circular"), torch.randn(*shape), grad=True)


def test_reflect_replicate_large_pads_ints_out():
    x = torch.randn(1, 2, 3, 4)
    check(lambda x: F.pad(x, (3, 3, 2, 2), mode="reflect"), x, grad=True)  # pad = size - 1
    check(lambda x: F.pad(x, (7, 5, 6, 9), mode="replicate"), x, grad=True)  # pad beyond size
    xi = torch.randint(-9, 9, (2, 3, 5), dtype=torch.int32)
    check(lambda x: F.pad(x, (2, 1), mode="reflect"), xi)
    check(lambda x: F.pad(x, (2, 1), mode="replicate"), xi.long())
    out = torch.zeros(2, 3, 16, device=TPU)
    torch._C._nn.reflection_pad1d(xi.float().to(TPU), [1, 2], out=out[:, :, ::2])
    torch.testing.assert_close(out[:, :, ::2].cpu(), torch._C._nn.reflection_pad1d(xi.float(), [1, 2]))
    g = torch.randn(2, 3, 8)
    for op in (torch.ops.aten.reflection_pad1d_backward, torch.ops.aten.replication_pad1d_backward):
        torch.testing.assert_close(op(g.to(TPU), xi.float().to(TPU), [1, 2]).cpu(), op(g, xi.float(), [1, 2]))
    m = nn.ReflectionPad2d(2)
    check(m, torch.randn(1, 2, 4, 4), grad=True)


def test_pad_errors():
    x = torch.randn(1, 2, 3, 4)
    both_raise(RuntimeError, lambda x: F.pad(x, (4, 0), mode="reflect"), x)  # pad >= size
    both_raise(RuntimeError, lambda x: F.pad(x, (0, 0, 3, 0), mode="reflect"), x)
    both_raise(RuntimeError, lambda x: F.pad(x, (-3, -2), mode="replicate"), x)  # empty output
    both_raise(NotImplementedError, lambda x: F.pad(x, (1, 1), mode="reflect"), x.bool())
    both_raise(RuntimeError, lambda x: torch._C._nn.reflection_pad2d(x, [1, 1]), x)
    both_raise(RuntimeError, lambda x: torch._C._nn.replication_pad2d(x, [1, 1, 1, 1]), torch.randn(2, 0, 3, 3))
    g = torch.randn(1, 2, 3, 5)
    both_raise(RuntimeError, lambda g, x: torch.ops.aten.reflection_pad2d_backward(g, x, [1, 1, 1, 1]), g, x)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_channels_last_layout_and_out_dtype_like_cpu(mode):
    # Results keep a channels-last input's layout, and gradients the input's,
    # as on CPU; out= and grad_input= must have the right dtype.
    for x, pad in ((torch.randn(2, 3, 6, 7).to(memory_format=torch.channels_last), (1, 2, 2, 1)),
                   (torch.randn(2, 3, 4, 5, 6).to(memory_format=torch.channels_last_3d), (1, 1, 2, 1, 1, 2))):
        xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
        e, a = F.pad(xc, pad, mode=mode), F.pad(xt, pad, mode=mode)
        assert a.stride() == e.stride(), (a.stride(), e.stride())
        torch.testing.assert_close(a.cpu(), e.detach())
        g = torch.randn(e.shape)
        e.backward(g)
        a.backward(g.to(TPU))
        assert xt.grad.stride() == xc.grad.stride(), (xt.grad.stride(), xc.grad.stride())
        torch.testing.assert_close(xt.grad.cpu(), xc.grad)
    name = "reflection_pad2d" if mode == "reflect" else "replication_pad2d"
    fwd, bwd = getattr(torch.ops.aten, name).out, getattr(torch.ops.aten, name + "_backward").grad_input
    x, g = torch.randn(1, 2, 5, 6), torch.randn(1, 2, 8, 9)
    check(lambda t, o: (fwd(t, [1, 2, 2, 1], out=o), o)[1], x, torch.empty(0))
    check(lambda u, t, o: (bwd(u, t, [1, 2, 2, 1], grad_input=o), o)[1], g, x, torch.empty(0))
    wrong = dict(dtype=torch.float64)
    both_raise(RuntimeError, lambda t: fwd(t, [1, 2, 2, 1], out=torch.empty(0, device=t.device, **wrong)), x)
    both_raise(RuntimeError, lambda u, t: bwd(u, t, [1, 2, 2, 1], grad_input=torch.empty(0, device=t.device, **wrong)),
               g, x)
