"""Pooling (max with indices, average, adaptive average/max; 1-3 spatial
dims) forward and backward against PyTorch CPU, including ceil_mode, padding
and odd sizes."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


def distinct(*shape, dtype=torch.float32):
    """Values without ties, so argmax positions (and max gradients) are unique."""
    n = 1
    for s in shape:
        n *= s
    return (torch.randperm(n).float() / 7 - n / 14).reshape(shape).to(dtype)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2), stride=(2, 3), padding=(1, 1), dilation=(2, 1), ceil_mode=True),
])
def test_max_pool2d(dtype, kw):
    x = distinct(2, 3, 11, 10, dtype=dtype)
    check(lambda x: F.max_pool2d(x, return_indices=True, **kw), x, grad=True)
    check(lambda x: F.max_pool2d(x, **kw), x[0], grad=True)  # unbatched


def test_max_pool1d_3d():
    check(lambda x: F.max_pool1d(x, 3, 2, 1, ceil_mode=True, return_indices=True), distinct(2, 3, 12), grad=True)
    check(lambda x: F.max_pool3d(x, (2, 3, 2), stride=(1, 2, 2), padding=(1, 1, 0), return_indices=True),
          distinct(2, 2, 5, 7, 6), grad=True)
    check(lambda x: F.max_pool3d(x, 3, stride=2, dilation=(1, 2, 1), ceil_mode=True, return_indices=True),
          distinct(1, 2, 7, 9, 8), grad=True)


def test_max_pool_ties_nan_int():
    x = torch.tensor([[[[1., 1., 0., 2.], [2., 1., float("nan"), 2.], [0., 0., 0., 0.], [3., 3., 3., 3.]]]])
    ev, ei = F.max_pool2d(x, 2, 1, return_indices=True)
    av, ai = F.max_pool2d(x.to(TPU), 2, 1, return_indices=True)
    torch.testing.assert_close(av.cpu(), ev, equal_nan=True)
    torch.testing.assert_close(ai.cpu(), ei)
    check(lambda x: F.max_pool2d(x, 2, 1, return_indices=True), torch.full((1, 1, 3, 3), float("-inf")))
    xi = torch.randint(-5, 5, (2, 3, 7, 6), dtype=torch.int32)
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), xi)
    check(lambda x: F.max_pool3d(x, 2, return_indices=True), xi.long().unsqueeze(0))
    # Ties share the gradient the way CPU routes it (to the first max).
    check(lambda x: F.max_pool2d(x, 2, 1), torch.ones(1, 2, 4, 5), grad=True)


def test_max_pool_noncontiguous():
    x = distinct(2, 4, 9, 9).to(memory_format=torch.channels_last)
    check(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), x, grad=True)
    check(lambda x: F.max_pool2d(x[:, 1:, ::2], 2, return_indices=True), distinct(2, 4, 12, 7), grad=True)
    x3 = distinct(1, 3, 4, 6, 6).to(memory_format=torch.channels_last_3d)
    check(lambda x: F.max_pool3d(x, 2, return_indices=True), x3, grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(3, 2), stride=2, padding=(1, 1), ceil_mode=True),
    dict(kernel_size=(3, 2), stride=2, padding=(1, 1), ceil_mode=True, count_include_pad=False),
    dict(kernel_size=3, stride=2, divisor_override=4, ceil_mode=True),
])
def test_avg_pool2d(dtype, kw):
    x = torch.randn(2, 3, 11, 10, dtype=dtype)
    check(lambda x: F.avg_pool2d(x, **kw), x, grad=True)


def test_avg_pool1d_3d_int():
    check(lambda x: F.avg_pool1d(x, 4, 3, 2, ceil_mode=True, count_include_pad=False), torch.randn(2, 3, 13),
          grad=True)
    x = torch.randn(2, 2, 5, 7, 6)
    check(lambda x: F.avg_pool3d(x, (2, 3, 3), stride=(1, 2, 2), padding=(1, 1, 0), ceil_mode=True), x, grad=True)
    check(lambda x: F.avg_pool3d(x, 3, stride=2, padding=1, count_include_pad=False, divisor_override=5), x,
          grad=True)
    check(lambda x: F.avg_pool2d(x, 3, 2, 1), torch.randint(-50, 50, (2, 3, 7, 8)))
    check(lambda x: F.avg_pool2d(x, 3, 2), torch.randn(2, 6, 9, 9).to(memory_format=torch.channels_last), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_avg_pool(dtype):
    x = torch.randn(2, 3, 11, 10, dtype=dtype)
    check(lambda x: F.adaptive_avg_pool2d(x, (4, 5)), x, grad=True)  # ragged x even windows
    if dtype == torch.float32:
        check(lambda x: F.adaptive_avg_pool2d(x, (1, 1)), x, grad=True)
        check(lambda x: F.adaptive_avg_pool2d(x, (None, 7)), x[0], grad=True)
        check(lambda x: F.adaptive_avg_pool1d(x, 4), torch.randn(2, 3, 9), grad=True)
        check(lambda x: F.adaptive_avg_pool3d(x, (2, 3, 4)), torch.randn(2, 2, 5, 7, 6), grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_max_pool(dtype):
    x = distinct(2, 3, 11, 10, dtype=dtype)
    check(lambda x: F.adaptive_max_pool2d(x, (4, 5), return_indices=True), x, grad=True)
    if dtype == torch.float32:
        check(lambda x: F.adaptive_max_pool2d(x, 13, return_indices=True), x[0], grad=True)  # upsampling
        check(lambda x: F.adaptive_max_pool1d(x, 4, return_indices=True), distinct(2, 3, 9), grad=True)
        check(lambda x: F.adaptive_max_pool3d(x, (2, 3, 4), return_indices=True), distinct(2, 2, 5, 7, 6), grad=True)


def test_adaptive_noncontiguous():
    x = torch.randn(2, 4, 9, 8).to(memory_format=torch.channels_last)
    check(lambda x: F.adaptive_avg_pool2d(x, 3), x, grad=True)
    check(lambda x: F.adaptive_max_pool2d(x, (2, 5)), x, grad=True)


def test_pool_out_variants():
    x = distinct(2, 3, 8, 8)
    out = torch.empty(2, 3, 6, 6, device=TPU)[:, :, ::2, ::2]  # a strided view
    idx = torch.empty(0, dtype=torch.long, device=TPU)
    torch.ops.aten.max_pool2d_with_indices.out(x.to(TPU), [2, 2], [2, 2], [0, 0], [1, 1], False, out=out, indices=idx)
    eo, ei = torch.ops.aten.max_pool2d_with_indices(x, [2, 2], [2, 2], [0, 0], [1, 1], False)
    torch.testing.assert_close(out.cpu(), eo)
    torch.testing.assert_close(idx.cpu(), ei)
    o2 = torch.empty(0, device=TPU)
    torch._C._nn.avg_pool2d(x.to(TPU), 3, 2, 1, out=o2)
    torch.testing.assert_close(o2.cpu(), F.avg_pool2d(x, 3, 2, 1))


def test_pool_bad_args():
    x = torch.randn(2, 3, 8, 8)
    both_raise(RuntimeError, lambda x: F.max_pool2d(x, 3, padding=2), x)  # pad > k/2
    both_raise(RuntimeError, lambda x: F.max_pool2d(x, 10), x)  # output too small
    both_raise(RuntimeError, lambda x: F.max_pool2d(x, 2, stride=0), x)
    both_raise(RuntimeError, lambda x: F.avg_pool2d(x, 2, divisor_override=0), x)
    both_raise(RuntimeError, lambda x: F.avg_pool2d(x, 20), x)
    both_raise(RuntimeError, lambda x: F.max_pool2d(x, 2), torch.randn(3, 8))  # rank
    both_raise(RuntimeError, lambda x: F.adaptive_avg_pool2d(x, (2, 2)), torch.randn(2, 0, 4))
    both_raise(RuntimeError, lambda x: F.adaptive_max_pool2d(x, (2, 2, 2)), x)
    both_raise(RuntimeError, lambda x: F.max_pool3d(x, 2), x[0, 0])
    both_raise(NotImplementedError, lambda x: F.max_pool2d(x, 2), x.bool())
    both_raise(NotImplementedError, lambda x: F.avg_pool2d(x, 2), x.int())
    both_raise(NotImplementedError, lambda x: F.adaptive_max_pool2d(x, 2), x.long())


@pytest.mark.parametrize("fn", [
    lambda x: F.max_pool2d(x, 2, return_indices=True),
    lambda x: F.avg_pool2d(x, 3, 2, 1),
    lambda x: F.adaptive_avg_pool2d(x, 3),
    lambda x: F.adaptive_max_pool2d(x, (2, 3), return_indices=True),
    lambda x: F.max_pool3d(x[None], 2, return_indices=True),
    lambda x: F.avg_pool3d(x[None], 2),
    lambda x: F.adaptive_avg_pool3d(x[None], 2),
], ids=["max2d", "avg2d", "adaptive_avg2d", "adaptive_max2d", "max3d", "avg3d", "adaptive_avg3d"])
def test_pool_results_and_gradients_keep_cpus_layout(fn):
    # A channels-last input gives channels-last results on CPU (the layout
    # ATen's meta kernels choose), and the same on tpu; so do the gradients.
    x = distinct(2, 3, 8, 7).to(memory_format=torch.channels_last)
    xc, xt = x.clone().requires_grad_(), x.to(TPU).requires_grad_()
    expected, actual = fn(xc), fn(xt)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for a, e in zip(actual, expected):
        assert a.stride() == e.stride(), (a.stride(), e.stride())
        torch.testing.assert_close(a.cpu(), e.detach())
    g = torch.randn_like(expected[0])
    expected[0].backward(g)
    actual[0].backward(g.to(TPU))
    assert xt.grad.stride() == xc.grad.stride(), (xt.grad.stride(), xc.grad.stride())
    torch.testing.assert_close(xt.grad.cpu(), xc.grad)


def test_pool_two_result_out_forms():
    from tests.helpers import check_pair_out

    x = distinct(2, 3, 8, 8)
    dts = (torch.float32, torch.long)
    check_pair_out(lambda a, out: torch.ops.aten.max_pool2d_with_indices.out(
        a, [2, 2], [2, 2], [0, 0], [1, 1], False, out=out[0], indices=out[1]), x, dts)
    check_pair_out(lambda a, out: torch.ops.aten.max_pool3d_with_indices.out(
        a[None], [2, 2, 2], [1, 2, 2], [1, 0, 0], [1, 1, 1], True, out=out[0], indices=out[1]), x, dts)
    check_pair_out(lambda a, out: torch._C._nn.adaptive_max_pool2d(a, (3, 5), out=out), x, dts)
    check_pair_out(lambda a, out: torch._C._nn.adaptive_max_pool3d(a, (2, 3, 5), out=out), x, dts)
    # A bad rank fails in the op's checks, with CPU's error type, before any out= check.
    both_raise(RuntimeError, lambda a: torch.ops.aten.max_pool2d_with_indices.out(
        a, [2, 2], [2, 2], [0, 0], [1, 1], False, out=torch.empty(0), indices=torch.empty(0, dtype=torch.long)),
        torch.randn(3, 8))


@pytest.mark.parametrize("name", ["avg_pool2d_backward", "max_pool2d_with_indices_backward",
                                  "adaptive_max_pool2d_backward"])
def test_pool_backward_grad_input_forms(name):
    # The backward kernels' out= forms, as autograd's double backward and
    # functionalization call them: CPU's values, and CPU's error for an out
    # of the wrong dtype.
    x = distinct(2, 3, 8, 8)

    def call(dev, out):
        xd = x.to(dev)
        if name == "avg_pool2d_backward":
            g = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)).to(dev)
            return torch.ops.aten.avg_pool2d_backward.grad_input(g, xd, [3, 3], [2, 2], [1, 1], False, True, None,
                                                                 grad_input=out)
        if name == "max_pool2d_with_indices_backward":
            _, i = torch.ops.aten.max_pool2d_with_indices(xd, [2, 2], [2, 2], [0, 0], [1, 1], False)
            g = torch.randn(2, 3, 4, 4, generator=torch.Generator().manual_seed(0)).to(dev)
            return torch.ops.aten.max_pool2d_with_indices_backward.grad_input(
                g, xd, [2, 2], [2, 2], [0, 0], [1, 1], False, i, grad_input=out)
        _, i = torch.ops.aten.adaptive_max_pool2d(xd, [3, 5])
        g = torch.randn(2, 3, 3, 5, generator=torch.Generator().manual_seed(0)).to(dev)
        return torch.ops.aten.adaptive_max_pool2d_backward.grad_input(g, xd, i, grad_input=out)

    out_c, out_t = torch.empty(0), torch.empty(0, device=TPU)
    assert call("cpu", out_c) is out_c and call(TPU, out_t) is out_t
    torch.testing.assert_close(out_t.cpu(), out_c)
    with pytest.raises(RuntimeError):
        call("cpu", torch.empty(0, dtype=torch.float64))
    with pytest.raises(RuntimeError):
        call(TPU, torch.empty(0, dtype=torch.float64, device=TPU))
