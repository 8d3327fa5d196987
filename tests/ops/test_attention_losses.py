"""scaled_dot_product_attention (math path) and the extra losses vs CPU."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, check

BF16 = dict(atol=2e-2, rtol=2e-2)  # bf16 matmul + softmax chains round a few ulps apart


# --- scaled_dot_product_attention ------------------------------------------------

@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_basic(causal):
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=causal), q, k, v, grad=True,
          atol=1e-5, rtol=1e-4)


def test_sdpa_masks_and_scale():
    q, k, v = torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4), torch.randn(2, 2, 5, 4)
    bmask = torch.rand(5, 5) > 0.3
    bmask[:, 0] = True  # no fully masked rows
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m, scale=0.3), q, k, v, bmask,
          grad=True, atol=1e-5, rtol=1e-4)
    amask = torch.randn(2, 1, 5, 5)
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, amask, grad=True,
          atol=1e-5, rtol=1e-4)


def test_sdpa_gqa_noncontig_bf16():
    q = torch.randn(1, 4, 3, 8)
    k = torch.randn(1, 2, 8, 3).transpose(-1, -2)  # non-contiguous
    v = torch.randn(1, 2, 3, 8)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), q, k, v, grad=True,
          atol=1e-5, rtol=1e-4)
    check(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True),
          q.bfloat16(), k[:, :1].expand(1, 4, 3, 8).bfloat16(), v[:, :1].expand(1, 4, 3, 8).bfloat16(), **BF16)


def test_sdpa_dropout_statistics_and_seed():
    q = torch.randn(1, 1, 64, 16, device=TPU)
    k = torch.randn(1, 1, 64, 16, device=TPU)
    v = torch.ones(1, 1, 64, 16, device=TPU)
    torch.manual_seed(0)
    a = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.manual_seed(0)
    b = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    torch.testing.assert_close(a.cpu(), b.cpu())
    # With v = 1 each output is (kept attention mass) / (1 - p): mean 1.
    assert abs(a.cpu().mean().item() - 1.0) < 0.1
    c = F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    assert not torch.equal(a.cpu(), c.cpu())
    qg = q.clone().requires_grad_()
    F.scaled_dot_product_attention(qg, k, v, dropout_p=0.3).sum().backward()
    assert qg.grad is not None and torch.isfinite(qg.grad.cpu()).all()


def test_sdpa_bad_shapes():
    q, k = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 5, 7)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError):
        F.scaled_dot_product_attention(q.to(TPU), k.to(TPU), k.to(TPU))


def test_isneginf_isposinf():
    x = torch.tensor([1.0, float("inf"), -float("inf"), float("nan"), 0.0])
    check(torch.isneginf, x)
    check(torch.isposinf, x[::2])
    check(torch.isneginf, torch.tensor([1, -3]))


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


def test_logsigmoid():
    x = torch.randn(6, 4) * 30
    check(F.logsigmoid, x, grad=True)
    check(F.logsigmoid, x[:, ::2].bfloat16(), grad=True)


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
