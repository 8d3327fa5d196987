"""scaled_dot_product_attention vs CPU: the fused path (one program forward,
one backward, csrc/ops/nn/attention.cc) and the composite math path it
leaves to (dropout, grouped-query heads, a mask that needs a gradient)."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, check

FUSED = "ScaledDotProductFusedAttentionOverrideableBackward0"

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


@pytest.mark.parametrize("norm_first", [False, True])
def test_transformer_encoder_inference_with_padding_mask_takes_the_composite_path(norm_first):
    # PyTorch offers its nested-tensor fast path to PrivateUse1 devices; tpu
    # runs the composite path instead (what CPU runs with the fast path off),
    # with the padded positions zeroed as CPU's nested path leaves them.
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True, norm_first=norm_first)
    enc = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=True).eval()
    mha = torch.nn.MultiheadAttention(16, 2, batch_first=True).eval()
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    with torch.no_grad():
        fast = enc(x, src_key_padding_mask=mask)  # CPU's fast path (nested; padding rows are zero)
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            ref = enc(x, src_key_padding_mask=mask)
            ref_attn = mha(x, x, x, key_padding_mask=mask)[0]
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
        enc.to(TPU)
        mha.to(TPU)
        got = enc(x.to(TPU), src_key_padding_mask=mask.to(TPU)).cpu()
        got_attn = mha(*(x.to(TPU),) * 3, key_padding_mask=mask.to(TPU))[0].cpu()
    assert torch.backends.mha.get_fastpath_enabled()
    keep = ~mask
    if enc.use_nested_tensor:  # norm_first layers never nest, on CPU either
        assert (fast[mask] == 0).all() and not (ref[mask] == 0).all()
    torch.testing.assert_close(got, fast, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got[keep], ref[keep], atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(got_attn, ref_attn, atol=1e-5, rtol=1e-4)
    # Where CPU does not nest (fast path off, training mode, a float mask that
    # is not left-aligned), tpu matches CPU's composite output there too.
    with torch.no_grad():
        torch.backends.mha.set_fastpath_enabled(False)
        try:
            torch.testing.assert_close(enc(x.to(TPU), src_key_padding_mask=mask.to(TPU)).cpu(), ref,
                                       atol=1e-5, rtol=1e-4)
        finally:
            torch.backends.mha.set_fastpath_enabled(True)
        ragged = torch.tensor([[False] * 5, [True, False, False, False, True]])
        enc.cpu()
        want = enc(x, src_key_padding_mask=ragged)
        got = enc.to(TPU)(x.to(TPU), src_key_padding_mask=ragged.to(TPU)).cpu()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
        fmask = torch.zeros(2, 5).masked_fill(mask, float("-inf"))
        enc.cpu()
        want = enc(x, src_key_padding_mask=fmask)
        got = enc.to(TPU)(x.to(TPU), src_key_padding_mask=fmask.to(TPU)).cpu()
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


# --- the fused path -----------------------------------------------------------


def grad_fn_name(q, k, v, **kw):
    qt, kt, vt = (t.to(TPU).requires_grad_() for t in (q, k, v))
    if kw.get("attn_mask") is not None:
        kw["attn_mask"] = kw["attn_mask"].to(TPU)
    return type(F.scaled_dot_product_attention(qt, kt, vt, **kw).grad_fn).__name__


def test_sdpa_fused_path_is_taken_where_it_applies():
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    assert grad_fn_name(q, k, v) == FUSED
    assert grad_fn_name(q, k, v, is_causal=True) == FUSED
    assert grad_fn_name(q, k, v, attn_mask=torch.rand(4, 6) > 0.5) == FUSED
    # Left to the math path:
    assert grad_fn_name(q, k, v, dropout_p=0.2) != FUSED
    assert grad_fn_name(q.double(), k.double(), v.double()) != FUSED
    assert grad_fn_name(q, k[:, :1], v[:, :1], enable_gqa=True) != FUSED
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel([SDPBackend.MATH]):
        assert grad_fn_name(q, k, v) != FUSED


def test_sdpa_fused_fully_masked_rows_and_float_mask_dtype():
    # A row with every key masked gives zeros (as the math path's
    # _safe_softmax) and no NaN in any gradient.
    q, k, v = torch.randn(1, 2, 4, 8), torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 8)
    m = torch.rand(4, 5) > 0.4
    m[2] = False
    m[0, 0] = True
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, m, grad=True,
          atol=1e-5, rtol=1e-4)
    fm = torch.zeros(4, 5)
    fm[1] = float("-inf")
    check(lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), q, k, v, fm, grad=True,
          atol=1e-5, rtol=1e-4)


def test_sdpa_fused_reads_heads_out_of_a_fused_qkv_buffer():
    # The GPT-style layout: q, k, v are strided views of one [B, T, 3D] buffer.
    B, T, H, Dh = 2, 6, 3, 4
    qkv = torch.randn(B, T, 3 * H * Dh)

    def attn(x):
        q, k, v = (t.view(B, T, H, Dh).transpose(1, 2) for t in x.split(H * Dh, dim=2))
        return F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(B, T, H * Dh)

    check(attn, qkv, grad=True, atol=1e-5, rtol=1e-4)
    check(attn, qkv.bfloat16(), grad=True, **BF16)


def test_sdpa_fused_is_two_programs():
    import torch_tpu

    q, k, v = (torch.randn(1, 2, 3, 4, device=TPU, requires_grad=True) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v).sum().backward()
    torch.tpu.synchronize()
    names = {r[0] for r in torch_tpu._C._compile_records()}
    assert "scaled_dot_product_attention" in names or "scaled_dot_product_attention_backward" in names
    torch_tpu._C._clear_compile_records()
    q2, k2, v2 = (torch.randn(1, 2, 3, 4, device=TPU, requires_grad=True) for _ in range(3))
    F.scaled_dot_product_attention(q2, k2, v2).sum().backward()
    torch.tpu.synchronize()
    # Same shapes: nothing compiles again.
    assert not [r for r in torch_tpu._C._compile_records() if r[0].startswith("scaled_dot")]


def test_flash_attention_for_cpu_runs_the_same_programs():
    # Code written against CPU's kernel calls it directly; on tpu it is the
    # same two programs (float32 here: bfloat16 gradients land 1-2 ulps from
    # CPU's, which rounds its own way, docs/op_coverage.md).
    op = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
    q, k, v = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    m = torch.randn(4, 6)
    check(lambda q, k, v: op(q, k, v, is_causal=True)[0], q, k, v, grad=True, atol=1e-5, rtol=1e-4)
    check(lambda q, k, v, m: op(q, k, v, attn_mask=m, scale=0.5), q, k, v, m, atol=1e-5, rtol=1e-4)
    with pytest.raises(NotImplementedError, match="no dropout"):
        op(q.to(TPU), k.to(TPU), v.to(TPU), dropout_p=0.1)
