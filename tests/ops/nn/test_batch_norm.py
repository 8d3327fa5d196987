"""Normalization: batch_norm (train/eval, running stats), group_norm and
instance_norm, forward and backward, against PyTorch CPU
(csrc/ops/nn/batch_norm.cc)."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check, to_tpu

FLOATS = [torch.float32, torch.bfloat16]


def on(x, *ts):
    """Copies of running-stat tensors on x's device (they must not require grad)."""
    return [t.clone().to(x.device) for t in ts]


def assert_close(actual, expected, **tol):
    torch.testing.assert_close(actual.cpu(), expected, **tol)


# --- batch norm -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(6, 3), (4, 3, 5), (2, 3, 4, 5)])
def test_batch_norm_train_updates_running_stats(dtype, shape):
    x = torch.randn(*shape, dtype=dtype) * 2 + 1
    w, b = torch.randn(3, dtype=dtype), torch.randn(3, dtype=dtype)
    rm, rv = torch.randn(3, dtype=dtype), torch.rand(3, dtype=dtype) + 0.5
    trm, trv = rm.to(TPU), rv.to(TPU)
    check(lambda x, w, b: F.batch_norm(x, *on(x, rm, rv), w, b, training=True, momentum=0.3), x, w, b, grad=True)
    # check() ran on clones; rerun to see the in-place running-stat updates.
    crm, crv = rm.clone(), rv.clone()
    F.batch_norm(x, crm, crv, w, b, training=True, momentum=0.3)
    F.batch_norm(x.to(TPU), trm, trv, w.to(TPU), b.to(TPU), training=True, momentum=0.3)
    tol = dict(atol=1e-2, rtol=1.6e-2) if dtype == torch.bfloat16 else {}
    assert_close(trm, crm, **tol)
    assert_close(trv, crv, **tol)  # unbiased variance, like CPU


@pytest.mark.parametrize("dtype", FLOATS)
def test_batch_norm_eval(dtype):
    x = torch.randn(4, 3, 5, dtype=dtype)
    rm, rv = torch.randn(3), torch.rand(3) + 0.5  # float stats with a bf16 input: "mixed type"
    w, b = torch.randn(3), torch.randn(3)
    check(lambda x, w, b: F.batch_norm(x, *on(x, rm, rv), w, b, training=False, eps=1e-3), x, w, b, grad=True)
    trm = rm.to(TPU)
    F.batch_norm(x.to(TPU), trm, rv.to(TPU), training=False)
    assert_close(trm, rm)  # untouched in eval


def test_batch_norm_module_train_eval_noncontiguous():
    torch.manual_seed(0)
    m = nn.BatchNorm2d(4, momentum=0.2)
    tm = nn.BatchNorm2d(4, momentum=0.2).to(TPU)
    tm.load_state_dict(m.state_dict())
    base = torch.randn(3, 5, 4, 6)
    for _ in range(2):
        bc = base.clone().requires_grad_()
        bt = base.to(TPU).requires_grad_()
        yc, yt = m(bc.permute(0, 2, 1, 3)), tm(bt.permute(0, 2, 1, 3))  # non-contiguous NCHW views
        assert_close(yt.detach(), yc.detach())
        g = torch.randn_like(yc)
        yc.backward(g)
        yt.backward(g.to(TPU))
        assert_close(bt.grad, bc.grad)
    assert_close(tm.running_mean, m.running_mean)
    assert_close(tm.running_var, m.running_var)
    assert int(tm.num_batches_tracked) == int(m.num_batches_tracked) == 2
    assert_close(tm.weight.grad, m.weight.grad)
    assert_close(tm.bias.grad, m.bias.grad)
    m.eval()
    tm.eval()
    check(lambda x: (tm if x.device.type == "tpu" else m)(x.permute(0, 2, 1, 3)[:, :, 1:]), base, grad=True)


def test_batch_norm_no_running_stats_and_no_affine():
    m = nn.BatchNorm1d(3, affine=False, track_running_stats=False)
    check(lambda x: m(x), torch.randn(5, 3, 7), grad=True)
    # Cumulative moving average (momentum=None).
    c = nn.BatchNorm1d(3, momentum=None)
    t = nn.BatchNorm1d(3, momentum=None).to(TPU)
    x = torch.randn(8, 3)
    for _ in range(3):
        c(x)
        t(x.to(TPU))
    assert_close(t.running_mean, c.running_mean)
    assert_close(t.running_var, c.running_var)


def test_native_batch_norm_ops():
    x, w, b = torch.randn(4, 3, 2, 2), torch.randn(3), torch.randn(3)
    rm, rv = torch.zeros(3), torch.ones(3)
    check(lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, True, 0.1, 1e-5), x, w, b, rm, rv)
    check(lambda x, w, b, rm, rv: torch.native_batch_norm(x, w, b, rm, rv, False, 0.1, 1e-5)[0], x, w, b, rm, rv)
    ev = torch.native_batch_norm(x.to(TPU), w.to(TPU), b.to(TPU), rm.to(TPU), rv.to(TPU), False, 0.1, 1e-5)
    assert ev[1].shape == (0,) and ev[2].shape == (0,)
    check(lambda x, w, b: torch.ops.aten._native_batch_norm_legit.no_stats(x, w, b, True, 0.1, 1e-5), x, w, b)
    check(lambda x, w, b, rm, rv: torch.ops.aten._native_batch_norm_legit_no_training(x, w, b, rm, rv, 0.1, 1e-5),
          x, w, b, rm, rv)
    crm, crv, trm, trv = rm.clone(), rv.clone(), rm.to(TPU), rv.to(TPU)
    ec = torch.ops.aten._batch_norm_with_update(x, w, b, crm, crv, 0.1, 1e-5)
    et = torch.ops.aten._batch_norm_with_update(*to_tpu([x, w, b]), trm, trv, 0.1, 1e-5)
    for a, e in zip(et[:3], ec[:3]):
        assert_close(a, e)
    assert et[3].shape == (0,) and et[3].dtype == torch.uint8
    assert_close(trm, crm)
    assert_close(trv, crv)
    g = torch.randn_like(x)
    args = (g, x, w, crm, crv, ec[1], ec[2], True, 1e-5, [True, True, True])
    for a, e in zip(torch.ops.aten.batch_norm_backward(*to_tpu(args), et[3]),
                    torch.ops.aten.batch_norm_backward(*args, ec[3])):
        assert_close(a, e)
    for train in (True, False):
        args = (g, x, w, rm, rv, ec[1], ec[2], train, 1e-5, [True, True, True])
        for a, e in zip(torch.ops.aten.native_batch_norm_backward(*to_tpu(args)),
                        torch.ops.aten.native_batch_norm_backward(*args)):
            assert_close(a, e)
    crm, crv, trm, trv = rm.clone(), rv.clone(), rm.to(TPU), rv.to(TPU)
    e = torch.batch_norm_update_stats(x, crm, crv, 0.2)
    a = torch.batch_norm_update_stats(x.to(TPU), trm, trv, 0.2)
    assert_close(a[0], e[0])
    assert_close(a[1], e[1])
    assert_close(trm, crm)
    assert_close(trv, crv)


def test_batch_norm_double_backward():
    x = torch.randn(4, 3, 5, dtype=torch.float32)
    w = torch.randn(3)

    def f(x, w):
        y = F.batch_norm(x, None, None, w, None, training=True)
        (gx,) = torch.autograd.grad((y ** 2).sum(), x, create_graph=True)
        return gx.sum() + (gx * gx).sum()

    check(f, x, w, grad=True, atol=1e-4, rtol=1e-4)  # second-order sums: looser than default


def test_batch_norm_errors():
    x = torch.randn(4, 3, 5)
    both_raise(RuntimeError, lambda x, rm, rv: F.batch_norm(x, rm, rv, training=True), x, torch.zeros(4),
               torch.ones(4))
    both_raise(RuntimeError, lambda x, w: F.batch_norm(x, None, None, w, training=True), x, torch.ones(2))
    both_raise(ValueError, lambda x: F.batch_norm(x, None, None, training=True), torch.randn(1, 3))
    both_raise(NotImplementedError, lambda x: torch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
               torch.ones(3, 3, dtype=torch.int32))
    both_raise(RuntimeError, lambda x: torch.native_batch_norm(x, None, None, None, None, True, 0.1, 1e-5),
               torch.ones(0, 3))


# --- group / instance norm -------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,groups", [((2, 6, 5), 3), ((3, 4, 2, 3), 2), ((2, 4), 2), ((1, 6, 2, 2, 2), 1)])
def test_group_norm(dtype, shape, groups):
    c = shape[1]
    x = torch.randn(*shape, dtype=dtype) * 3 + 1
    w, b = torch.randn(c, dtype=dtype), torch.randn(c, dtype=dtype)
    check(lambda x, w, b: F.group_norm(x, groups, w, b, eps=1e-4), x, w, b, grad=True)
    check(lambda x: F.group_norm(x, groups), x, grad=True)


def test_group_norm_mixed_noncontiguous_native():
    x = torch.randn(3, 5, 4, 6).transpose(1, 2)  # [3, 4, 5, 6] non-contiguous
    w, b = torch.randn(4), torch.randn(4)
    check(lambda x, w, b: F.group_norm(x, 2, w, b), x, w, b, grad=True)
    check(lambda x, w, b: F.group_norm(x, 2, w, b), x.bfloat16(), w, b, grad=True)  # mixed bf16/f32
    x = x.contiguous()  # CPU's native_group_norm wants contiguous input
    out = check(lambda x, w, b: torch.native_group_norm(x, w, b, 3, 4, 30, 2, 1e-5), x, w, b)
    assert out[1].shape == (3, 2)
    g = torch.randn(3, 4, 5, 6)
    mean, rstd = torch.native_group_norm(x, w, b, 3, 4, 30, 2, 1e-5)[1:]
    args = (g, x, mean, rstd, w, 3, 4, 30, 2, [True, True, True])
    for a, e in zip(torch.ops.aten.native_group_norm_backward(*to_tpu(args)),
                    torch.ops.aten.native_group_norm_backward(*args)):
        assert_close(a, e)
    m, tm = nn.GroupNorm(2, 4), nn.GroupNorm(2, 4).to(TPU)
    check(lambda x: tm(x) if x.device.type == "tpu" else m(x), x, grad=True)


def test_group_norm_errors():
    x = torch.randn(2, 6, 4)
    both_raise(RuntimeError, lambda x: F.group_norm(x, 4), x)
    both_raise(RuntimeError, lambda x, w: F.group_norm(x, 3, w), x, torch.ones(5))
    both_raise(RuntimeError, lambda x, b: F.group_norm(x, 3, None, b), x, torch.ones(7))


@pytest.mark.parametrize("dtype", FLOATS)
def test_instance_norm(dtype):
    x = torch.randn(2, 3, 4, 5, dtype=dtype)
    w, b = torch.randn(3, dtype=dtype), torch.randn(3, dtype=dtype)
    check(lambda x, w, b: F.instance_norm(x, weight=w, bias=b), x, w, b, grad=True)
    # With running stats (track_running_stats): updated from the batch mean of per-instance stats.
    rm, rv = torch.zeros(3), torch.ones(3)
    trm, trv = rm.to(TPU), rv.to(TPU)
    xf = x.float()
    F.instance_norm(xf, rm, rv, use_input_stats=True, momentum=0.2)
    F.instance_norm(xf.to(TPU), trm, trv, use_input_stats=True, momentum=0.2)
    assert_close(trm, rm)
    assert_close(trv, rv)
    check(lambda x, rm, rv: F.instance_norm(x, rm, rv, use_input_stats=False), xf, rm, rv)
    m, tm = nn.InstanceNorm1d(3, affine=True), nn.InstanceNorm1d(3, affine=True).to(TPU)
    check(lambda x: tm(x) if x.device.type == "tpu" else m(x), torch.randn(4, 3, 7), grad=True)
