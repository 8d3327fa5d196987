"""Losses against PyTorch CPU (csrc/ops/nn/loss.cc): nll_loss / nll_loss2d,
cross_entropy, mse/smooth_l1/huber, binary_cross_entropy (and with
logits), kl_div and cosine_embedding_loss."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check


def needs(*ops):
    """Skips until kernels owned by other op families are registered."""
    missing = [o for o in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{o}", "PrivateUse1")]
    return pytest.mark.skipif(bool(missing), reason=f"tpu kernels missing: {missing}")


FLOATS = [torch.float32, torch.bfloat16]


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
    # The out= form (.output): both results resized, a castable dtype taken,
    # as on CPU.
    for red in (0, 1):
        o, w = torch.empty(0, dtype=torch.float64, device=TPU), torch.empty(5, device=TPU)
        r = torch.ops.aten.nll_loss_forward.output(x.to(TPU), t.to(TPU), None, red, -100, output=o, total_weight=w)
        assert r[0] is o and r[1] is w
        eo, etw = torch.ops.aten.nll_loss_forward(x, t, None, red, -100)
        torch.testing.assert_close(o.cpu(), eo.double())
        assert w.shape == etw.shape
        torch.testing.assert_close(w.cpu(), etw)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_nll_loss2d(reduction):
    x = torch.log_softmax(torch.randn(2, 4, 3, 5), 1)
    t = torch.randint(0, 4, (2, 3, 5))
    t[0, 0, 0] = -100
    w = torch.rand(4) + 0.5
    check(lambda x: F.nll_loss(x, t.to(x.device), w.to(x.device), reduction=reduction), x, grad=True)
    o, tw = torch.empty(0, device=TPU), torch.empty(0, device=TPU)
    red = {"none": 0, "mean": 1, "sum": 2}[reduction]
    torch.ops.aten.nll_loss2d_forward.output(x.to(TPU), t.to(TPU), w.to(TPU), red, -100, output=o, total_weight=tw)
    eo, etw = torch.ops.aten.nll_loss2d_forward(x, t, w, red, -100)
    torch.testing.assert_close(o.cpu(), eo)
    torch.testing.assert_close(tw.cpu(), etw)


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


# --- binary cross entropy ----------------------------------------------------------

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bce(reduction):
    x = torch.rand(4, 5) * 0.98 + 0.01
    t = torch.rand(4, 5)
    w = torch.rand(5)
    check(lambda x, t: F.binary_cross_entropy(x, t, reduction=reduction), x, t, grad=True)
    # weight is not differentiable (CPU raises too), so it is closed over
    check(lambda x, t: F.binary_cross_entropy(x, t, weight=w[:, None].to(x.device), reduction=reduction), x.t(),
          t.t(), grad=True)


def test_bce_edges_bf16_and_errors():
    x = torch.tensor([0.0, 1.0, 0.5, 1.0])
    t = torch.tensor([0.0, 1.0, 1.0, 0.0])
    check(lambda x, t: F.binary_cross_entropy(x, t, reduction="none"), x, t)  # logs clamped at -100
    check(lambda x, t: F.binary_cross_entropy(x, t), (torch.rand(8) * 0.9 + 0.05).bfloat16(), torch.rand(8).bfloat16())
    with pytest.raises(ValueError):
        F.binary_cross_entropy(x.to(TPU), torch.rand(3, device=TPU))
    with pytest.raises(RuntimeError):
        torch.ops.aten.binary_cross_entropy(x.to(TPU), torch.rand(3, device=TPU))


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_bce_with_logits(reduction):
    x = torch.randn(4, 3) * 5
    t = torch.rand(4, 3)
    check(lambda x, t: F.binary_cross_entropy_with_logits(x, t, reduction=reduction), x, t, grad=True)
    pw, w = torch.rand(3) * 3, torch.rand(4, 1)
    # weight / pos_weight are not differentiable (CPU raises too), so they are closed over.
    check(lambda x, t: F.binary_cross_entropy_with_logits(x, t, weight=w.to(x.device), pos_weight=pw.to(x.device),
                                                          reduction=reduction), x, t, grad=True)


# --- smooth_l1 / huber / kl_div / cosine_embedding / cross_entropy -----------------

@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_smooth_l1_huber(reduction):
    x, y = torch.randn(5, 4) * 2, torch.randn(5, 4) * 2
    check(lambda x, y: F.smooth_l1_loss(x, y, reduction=reduction, beta=0.5), x, y, grad=True)
    check(lambda x, y: F.huber_loss(x, y, reduction=reduction, delta=1.5), x.t(), y.t(), grad=True)


@pytest.mark.parametrize("log_target", [False, True])
@pytest.mark.parametrize("reduction", ["batchmean", "sum", "none"])
def test_kl_div(log_target, reduction):
    x = torch.randn(3, 5).log_softmax(-1)
    t = torch.randn(3, 5).softmax(-1)
    if log_target:
        t = t.log()
    check(lambda x, t: F.kl_div(x, t, reduction=reduction, log_target=log_target), x, t, grad=True)


def test_cosine_embedding_loss():
    a, b = torch.randn(6, 4), torch.randn(6, 4)
    y = torch.tensor([1, -1, 1, -1, 1, -1])
    for red in ["none", "mean", "sum"]:
        check(lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=0.2, reduction=red), a, b, y, grad=True,
              atol=1e-5, rtol=1e-4)


def test_cross_entropy_variants():
    x = torch.randn(6, 5)
    t = torch.tensor([0, 4, 2, -100, 1, 3])
    w = torch.rand(5)
    check(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.2), x, t, grad=True)
    # class weights are not differentiable, so they are closed over
    check(lambda x, t: F.cross_entropy(x, t, weight=w.to(x.device), label_smoothing=0.1), x, t, grad=True)
    check(lambda x, t: F.cross_entropy(x, t, ignore_index=2, reduction="sum"), x, t.clamp(min=0), grad=True)
    check(lambda x, t: F.cross_entropy(x, t, weight=w.to(x.device), ignore_index=2, reduction="none"), x.t().t(),
          t.clamp(min=0), grad=True)
    probs = torch.randn(6, 5).softmax(-1)
    check(lambda x, p: F.cross_entropy(x, p, label_smoothing=0.1), x, probs, grad=True)
    x4 = torch.randn(2, 3, 4, 4)
    t4 = torch.randint(0, 3, (2, 4, 4))
    check(lambda x, t: F.cross_entropy(x, t, label_smoothing=0.05), x4, t4, grad=True)
    check(lambda x, t: F.cross_entropy(x, t), x.bfloat16(), t.clamp(min=0))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("tensor_lengths", [False, True])
def test_ctc_loss_matches_cpu(reduction, tensor_lengths):
    torch.manual_seed(0)
    T, N, C = 12, 3, 6
    log_probs = torch.randn(T, N, C).log_softmax(2)
    targets = torch.randint(1, C, (N, 5))
    il, tl = [12, 10, 8], [5, 3, 4]
    if tensor_lengths:
        il, tl = torch.tensor(il), torch.tensor(tl)

    def run(lp, tg, dev):
        lp = lp.detach().to(dev).requires_grad_()
        move = (lambda v: v.to(dev)) if tensor_lengths else (lambda v: v)
        loss = F.ctc_loss(lp, tg.to(dev), move(il), move(tl), reduction=reduction, zero_infinity=True)
        loss.sum().backward()
        return loss.detach().cpu(), lp.grad.cpu()

    loss_c, grad_c = run(log_probs, targets, "cpu")
    loss_t, grad_t = run(log_probs, targets, TPU)
    torch.testing.assert_close(loss_t, loss_c)
    torch.testing.assert_close(grad_t, grad_c)


A = torch.ops.aten
# Each loss and loss backward in its out= form: fn(x, target, grad, out).
OUT_FORMS = {
    "mse": lambda x, t, g, o: A.mse_loss(x, t, 0, out=o),
    "mse_backward": lambda x, t, g, o: A.mse_loss_backward(g, x, t, 0, grad_input=o),
    "smooth_l1": lambda x, t, g, o: A.smooth_l1_loss(x, t, 1, 0.5, out=o),
    "smooth_l1_backward": lambda x, t, g, o: A.smooth_l1_loss_backward(g, x, t, 0, 0.5, grad_input=o),
    "huber": lambda x, t, g, o: A.huber_loss(x, t, 2, 0.7, out=o),
    "huber_backward": lambda x, t, g, o: A.huber_loss_backward(g, x, t, 0, 0.7, grad_input=o),
    "bce": lambda x, t, g, o: A.binary_cross_entropy(x.sigmoid(), t.sigmoid(), None, 0, out=o),
    "bce_backward": lambda x, t, g, o: A.binary_cross_entropy_backward(g, x.sigmoid(), t.sigmoid(), None, 1,
                                                                       grad_input=o),
    "nll_backward": lambda x, t, g, o: A.nll_loss_backward(g[0, 0], x, (t[:, 0] > 0).long(), None, 1, -100,
                                                           torch.ones((), device=x.device) * 3, grad_input=o),
}


@pytest.mark.parametrize("name", sorted(OUT_FORMS))
def test_loss_out_forms(name):
    # Into an out of the result's shape, and into an empty one, resized
    # (except binary_cross_entropy, whose CPU kernel leaves an empty out
    # empty), against CPU; an integer out raises as on CPU.
    fn = OUT_FORMS[name]
    x, t, g = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    shape = fn(x, t, g, torch.empty(3, 4)).shape
    for size in [shape] + ([] if name.startswith("bce") else [(0,)]):
        want = fn(x, t, g, torch.empty(size))
        got = fn(x.to(TPU), t.to(TPU), g.to(TPU), torch.empty(size, device=TPU))
        torch.testing.assert_close(got.cpu(), want)
    both_raise(RuntimeError, lambda x, t, g, o: fn(x, t, g, o), x, t, g, torch.empty(shape, dtype=torch.long))
