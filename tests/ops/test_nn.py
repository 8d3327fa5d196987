"""NN ops: gelu, silu, softmax/log_softmax, layer_norm, dropout, nll_loss,
cross_entropy, mse/smooth_l1/huber, embedding and _foreach_*, against
PyTorch CPU."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check


def needs(*ops):
    """Skips until kernels owned by other op families are registered."""
    missing = [o for o in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{o}", "PrivateUse1")]
    return pytest.mark.skipif(bool(missing), reason=f"tpu kernels missing: {missing}")


FLOATS = [torch.float32, torch.bfloat16]


# --- activations -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gelu(dtype, approximate):
    x = torch.randn(4, 7, dtype=dtype) * 3
    check(lambda x: F.gelu(x, approximate=approximate), x, grad=True)
    check(lambda x: F.gelu(x.t()[1:], approximate=approximate), x, grad=True)


def test_gelu_out_inplace_errors():
    x = torch.randn(3, 5)
    out = torch.empty(0, device=TPU)
    torch._C._nn.gelu(x.to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), F.gelu(x))
    tx = x.to(TPU)
    torch._C._nn.gelu_(tx, approximate="tanh")
    torch.testing.assert_close(tx.cpu(), F.gelu(x, approximate="tanh"))
    both_raise(RuntimeError, lambda x: F.gelu(x, approximate="foo"), x)
    both_raise(NotImplementedError, F.gelu, torch.arange(3))


@pytest.mark.parametrize("dtype", FLOATS)
def test_silu(dtype):
    x = torch.randn(6, 5, dtype=dtype) * 4
    check(F.silu, x, grad=True)
    check(lambda x: F.silu(x[::2]), x, grad=True)
    tx = x.to(TPU)
    F.silu(tx, inplace=True)
    torch.testing.assert_close(tx.cpu(), F.silu(x))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dtype, dim):
    x = torch.randn(4, 5, 3, dtype=dtype)
    check(lambda x: torch.softmax(x, dim), x, grad=True)
    check(lambda x: torch.log_softmax(x, dim), x, grad=True)


def test_softmax_stable_and_views():
    # Without subtracting the max, exp(1000) overflows to inf.
    x = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -1002.0]])
    check(lambda x: torch.softmax(x, 1), x, grad=True)
    check(lambda x: torch.log_softmax(x, 1), x, grad=True)
    check(lambda x: torch.softmax(x.t(), 0), torch.randn(5, 4), grad=True)
    check(lambda x: torch.log_softmax(x[1:, ::2], -1), torch.randn(5, 8), grad=True)
    check(lambda x: torch.softmax(x, 0), torch.tensor(2.5), grad=True)
    # -inf logits (masked attention) give exact zeros
    check(lambda x: torch.softmax(x, -1), torch.tensor([[0.0, float("-inf"), 1.0]]))
    out = torch.empty(0, device=TPU)
    torch._softmax(x.to(TPU), 1, False, out=out)
    torch.testing.assert_close(out.cpu(), torch.softmax(x, 1))
    both_raise(IndexError, lambda x: torch.softmax(x, 2), x)


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


# --- dropout -------------------------------------------------------------------------

def test_dropout_identity():
    x = torch.randn(10, 10)
    check(lambda x: F.dropout(x, 0.0, training=True), x, grad=True)
    check(lambda x: F.dropout(x, 0.5, training=False), x, grad=True)
    tx = x.to(TPU)
    out, mask = torch.native_dropout(tx, 0.5, False)
    torch.testing.assert_close(out.cpu(), x)
    assert mask.cpu().all()


def test_dropout_statistics_and_grad():
    p = 0.3
    x = torch.randn(200, 100).abs() + 0.1  # nonzero, so zeros mark dropped elements
    tx = x.to(TPU).requires_grad_()
    y = F.dropout(tx, p, training=True)
    yc = y.detach().cpu()
    kept = yc != 0
    frac = kept.float().mean().item()
    # 20000 Bernoulli(0.7) draws: std of the mean is ~0.003.
    assert abs(frac - (1 - p)) < 0.02
    torch.testing.assert_close(yc[kept], x[kept] / (1 - p))
    y.backward(torch.ones_like(y))
    torch.testing.assert_close(tx.grad.cpu(), kept.float() / (1 - p))


def test_dropout_rng():
    x = torch.ones(1000, device=TPU)
    torch.manual_seed(123)
    a = F.dropout(x, 0.5).cpu()
    b = F.dropout(x, 0.5).cpu()
    torch.manual_seed(123)
    c = F.dropout(x, 0.5).cpu()
    assert torch.equal(a, c)
    assert not torch.equal(a, b)
    out, mask = torch.native_dropout(x, 1.0, True)
    assert not out.cpu().any() and not mask.cpu().any()
    bf = F.dropout(torch.ones(100, dtype=torch.bfloat16, device=TPU), 0.5).cpu()
    assert set(bf.unique().tolist()) <= {0.0, 2.0}


# --- losses --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss(dtype, reduction):
    x = torch.log_softmax(torch.randn(6, 5), 1).to(dtype)
    t = torch.tensor([0, 4, 2, 2, 1, 3])
    w = torch.rand(5, dtype=dtype) + 0.5
    check(lambda x: F.nll_loss(x, t.to(x.device), reduction=reduction), x, grad=True)
    # weight is captured, not an argument: nll_loss is not differentiable in it.
    check(lambda x: F.nll_loss(x, t.to(x.device), w.to(x.device), reduction=reduction, ignore_index=2), x, grad=True)
    # no batch dim
    check(lambda x: F.nll_loss(x, t[1].to(x.device), reduction=reduction), x[1], grad=True)


def test_nll_loss_ignore_and_errors():
    x = torch.log_softmax(torch.randn(4, 3), 1)
    x[0, 1] = float("-inf")  # ignored target's log-prob must not leak NaN
    t = torch.tensor([1, -100, 0, 2])
    check(lambda x: F.nll_loss(x, torch.tensor([1, 2, 0, 2], device=x.device), ignore_index=1), x, grad=True)
    check(lambda x: F.nll_loss(x, t.to(x.device)), x, grad=True)
    # all targets ignored: mean is 0/0 = nan on CPU too
    r = F.nll_loss(x.to(TPU), torch.full((4,), -100, device=TPU))
    torch.testing.assert_close(r.cpu(), F.nll_loss(x, torch.full((4,), -100)), equal_nan=True)
    both_raise(RuntimeError, F.nll_loss, x, t.int())
    both_raise(ValueError, F.nll_loss, x, t[:3])
    both_raise(RuntimeError, lambda x, t, w: F.nll_loss(x, t, w), x, t, torch.ones(4))
    out, tw = torch.ops.aten.nll_loss_forward(x.to(TPU), t.to(TPU), None, 2, -100)
    eo, etw = torch.ops.aten.nll_loss_forward(x, t, None, 2, -100)
    torch.testing.assert_close(out.cpu(), eo)
    torch.testing.assert_close(tw.cpu(), etw)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss2d(reduction):
    x = torch.log_softmax(torch.randn(2, 4, 3, 5), 1)
    t = torch.randint(0, 4, (2, 3, 5))
    t[0, 0, 0] = -100
    w = torch.rand(4) + 0.5
    check(lambda x: F.nll_loss(x, t.to(x.device), w.to(x.device), reduction=reduction), x, grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
def test_cross_entropy(dtype):
    x = torch.randn(8, 5, dtype=dtype)
    t = torch.randint(0, 5, (8,))
    check(lambda x: F.cross_entropy(x, t.to(x.device)), x, grad=True)
    check(lambda x: F.cross_entropy(x.t(), t[:5].to(x.device), reduction="sum"), x, grad=True)


@needs("sum.dim_IntList", "masked_fill_.Scalar", "mean.dim")
def test_cross_entropy_label_smoothing():
    x = torch.randn(8, 5)
    t = torch.randint(0, 5, (8,))
    t[2] = -100
    w = torch.rand(5) + 0.5
    check(lambda x: F.cross_entropy(x, t.to(x.device), label_smoothing=0.1), x, grad=True)
    check(lambda x: F.cross_entropy(x, t.to(x.device), w.to(x.device), label_smoothing=0.2, reduction="sum"), x,
          grad=True)


@needs("sum.dim_IntList", "mean.dim")
def test_cross_entropy_probabilities():
    x = torch.randn(4, 3)
    p = torch.softmax(torch.randn(4, 3), 1)
    check(F.cross_entropy, x, p, grad=True)


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_regression_losses(dtype, reduction):
    x, y = torch.randn(5, 4, dtype=dtype) * 2, torch.randn(5, 4, dtype=dtype) * 2
    check(lambda x, y: F.mse_loss(x, y, reduction=reduction), x, y, grad=True)
    check(lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.7), x, y, grad=True)
    check(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=1.3), x, y, grad=True)


def test_regression_losses_views_out_errors():
    x, y = torch.randn(4, 6), torch.randn(6, 4)
    check(lambda x, y: F.mse_loss(x.t(), y), x, y, grad=True)
    check(lambda x, y: F.smooth_l1_loss(x[:, ::2], y[::2].t()), x, y, grad=True)
    out = torch.empty(0, device=TPU)
    torch._C._nn.mse_loss(x.to(TPU), y.t().to(TPU), 0, out=out)
    torch.testing.assert_close(out.cpu(), F.mse_loss(x, y.t(), reduction="none"))
    both_raise(RuntimeError, lambda x, y: F.huber_loss(x, y, delta=-1.0), x, y.t())
    both_raise(RuntimeError, lambda x, y: F.mse_loss(x, y), x, y)


# --- embedding (index_select / embedding_dense_backward owned by indexing) -----------

@needs("index_select", "embedding_dense_backward")
def test_embedding():
    w = torch.randn(10, 4)
    idx = torch.tensor([[1, 2, 2], [0, 9, 1]])
    check(lambda w: F.embedding(idx.to(w.device), w), w, grad=True)
    check(lambda w: F.embedding(idx.to(w.device), w, padding_idx=2), w, grad=True)
    check(lambda w: F.embedding(idx.to(w.device), w, scale_grad_by_freq=True), w, grad=True)


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
