"""torch.amp on tpu: autocast op policies (CUDA's lists), bfloat16 default,
GradScaler and its two kernels."""
import copy
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from helpers import TPU

BF16_TOL = dict(atol=1e-2, rtol=1.6e-2)


def test_default_dtype_is_bfloat16():
    assert torch.get_autocast_dtype("tpu") == torch.bfloat16
    assert torch.amp.is_autocast_available("tpu")
    a = torch.randn(4, 4, device=TPU)
    with torch.autocast("tpu"):
        assert torch.is_autocast_enabled("tpu")
        assert (a @ a).dtype == torch.bfloat16
    assert (a @ a).dtype == torch.float32


def _mm_args():
    g = torch.Generator().manual_seed(0)
    r = lambda *s: torch.randn(*s, generator=g)  # noqa: E731
    return r


# Ops on both CPU's and CUDA's autocast lists: tpu must produce what CPU
# autocast(bfloat16) produces, in dtype and (to bf16 precision) in value.
def _shared_cases():
    r = _mm_args()
    tgt = torch.tensor([1, 0, 3, 2])
    return {
        "mm": (torch.mm, (r(4, 8), r(8, 3))),
        "bmm": (torch.bmm, (r(2, 4, 8), r(2, 8, 3))),
        "addmm": (torch.addmm, (r(4, 3), r(4, 8), r(8, 3))),
        "baddbmm": (torch.baddbmm, (r(2, 4, 3), r(2, 4, 8), r(2, 8, 3))),
        "addbmm": (torch.addbmm, (r(4, 3), r(2, 4, 8), r(2, 8, 3))),
        "matmul": (torch.matmul, (r(3, 4, 8), r(8, 5))),
        "linear": (F.linear, (r(4, 8), r(3, 8), r(3))),
        "mse_loss": (F.mse_loss, (r(4, 5), r(4, 5))),
        "smooth_l1_loss": (F.smooth_l1_loss, (r(4, 5), r(4, 5))),
        "huber_loss": (F.huber_loss, (r(4, 5), r(4, 5))),
        "nll_loss": (lambda x: F.nll_loss(x, tgt.to(x.device)), (r(4, 5),)),
        "cross_entropy": (lambda x: F.cross_entropy(x, tgt.to(x.device)), (r(4, 5),)),
        "prod": (torch.prod, (r(6) * 0.5 + 1,)),
    }


@pytest.mark.parametrize("in_dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("name", sorted(_shared_cases()))
def test_policy_matches_cpu_autocast(name, in_dtype):
    fn, args = _shared_cases()[name]
    args = [a.to(in_dtype) for a in args]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = fn(*args)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        actual = fn(*[a.to(TPU) for a in args])
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype, (name, actual.dtype, expected.dtype)
    torch.testing.assert_close(actual.cpu(), expected, **BF16_TOL)


# CUDA-only policies (CPU autocast leaves these ops alone): float32 for
# precision-sensitive ops even on bfloat16 inputs. Values are checked
# against CPU computing in float32.
def _fp32_cases():
    r = _mm_args()
    return {
        "softmax": lambda x: torch.softmax(x, -1),
        "log_softmax": lambda x: F.log_softmax(x, -1),
        "sum": torch.sum,
        "sum_dim": lambda x: x.sum(1),
        "cumsum": lambda x: torch.cumsum(x, 1),
        "exp": torch.exp,
        "log": torch.log,
        "pow": lambda x: torch.pow(x, 2),
        "rsqrt": torch.rsqrt,
        "layer_norm": lambda x: F.layer_norm(x, (x.shape[-1],)),
        "logsumexp": lambda x: torch.logsumexp(x, 1),
        "vector_norm": lambda x: torch.linalg.vector_norm(x),
        "norm": lambda x: x.norm(),
        "norm_dim": lambda x: x.norm(dim=1),
    }, r(4, 6).bfloat16()


@pytest.mark.parametrize("name", sorted(_fp32_cases()[0]))
def test_fp32_policy(name):
    cases, x = _fp32_cases()
    fn = cases[name]
    if name in ("log", "rsqrt"):
        x = x.abs() + 1  # in their domain (bf16, before the op)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        actual = fn(x.to(TPU))
    assert actual.dtype == torch.float32, name
    expected = fn(x.float())
    torch.testing.assert_close(actual.cpu(), expected, atol=1e-5, rtol=1e-5)


def test_promote_policy():
    a = torch.randn(5)
    b = torch.randn(5).bfloat16()
    c = torch.randn(5)
    with torch.autocast("tpu", dtype=torch.bfloat16):
        out = torch.addcmul(a.to(TPU), b.to(TPU), c.to(TPU), value=0.5)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.cpu(), torch.addcmul(a, b.float(), c, value=0.5))


def test_untouched_ops_and_float16():
    x = torch.randn(4, 4, device=TPU)
    with torch.autocast("tpu", dtype=torch.float16):
        assert (x @ x).dtype == torch.float16
        assert torch.relu(x).dtype == torch.float32  # not on any list: falls through
        assert (x + x).dtype == torch.float32
    # Integer matmuls are never cast.
    i = torch.ones(3, 3, dtype=torch.int64, device=TPU)
    with torch.autocast("tpu"):
        assert (i @ i).dtype == torch.int64


def test_binary_cross_entropy_is_banned():
    p = torch.rand(4, device=TPU)
    with torch.autocast("tpu"):
        with pytest.raises(RuntimeError, match="unsafe to autocast"):
            F.binary_cross_entropy(p, p)


def test_mlp_forward_backward_matches_cpu_autocast():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8))
    x = torch.randn(20, 16)
    y = torch.randint(0, 8, (20,))
    res = {}
    for dev in ("cpu", "tpu"):
        m = copy.deepcopy(model).to(dev)
        with torch.autocast(dev, dtype=torch.bfloat16):
            h = m[1](m[0](x.to(dev)))
            logits = m[2](h)
            loss = F.cross_entropy(logits, y.to(dev))
        assert h.dtype == torch.bfloat16 and logits.dtype == torch.bfloat16
        assert loss.dtype == torch.float32
        loss.backward()
        res[dev] = [loss.detach().cpu(), logits.detach().cpu()] + [p.grad.cpu() for p in m.parameters()]
        assert all(p.grad.dtype == torch.float32 for p in m.parameters())
    for a, e in zip(res["tpu"], res["cpu"]):
        torch.testing.assert_close(a, e, **BF16_TOL)


# --- GradScaler -------------------------------------------------------------------


def test_unscale_kernel_matches_cpu():
    torch.manual_seed(0)
    gs = [torch.randn(5, 3), torch.randn(7).bfloat16(), torch.randn(2, 2)[:, :1]]
    for bad in (None, float("inf"), float("nan")):
        res = {}
        for dev in ("cpu", TPU):
            ts = [g.clone().to(dev) for g in gs]
            if bad is not None:
                ts[1][3] = bad
            found = torch.zeros((), device=dev)
            torch._amp_foreach_non_finite_check_and_unscale_(ts, found, torch.full((), 0.25, device=dev))
            res[str(dev)] = (found.cpu(), [t.cpu() for t in ts])
        assert res["tpu"][0].item() == res["cpu"][0].item() == (0.0 if bad is None else 1.0)
        for a, e in zip(res["tpu"][1], res["cpu"][1]):
            torch.testing.assert_close(a, e, equal_nan=True)


def test_update_scale_kernel_matches_cpu():
    seq = [0.0, 0.0, 1.0, 0.0, 0.0, 0.0]
    res = {}
    for dev in ("cpu", TPU):
        scale = torch.full((), 1024.0, device=dev)
        tracker = torch.zeros((), dtype=torch.int32, device=dev)
        hist = []
        for f in seq:
            torch._amp_update_scale_(scale, tracker, torch.full((), f, device=dev), 2.0, 0.5, 2)
            hist.append((scale.item(), tracker.item()))
        res[str(dev)] = hist
    assert res["tpu"] == res["cpu"]
    # Growth that would overflow float32 keeps the old scale.
    scale = torch.full((), 3e38, device=TPU)
    tracker = torch.ones((), dtype=torch.int32, device=TPU)
    torch._amp_update_scale_(scale, tracker, torch.zeros((), device=TPU), 2.0, 0.5, 2)
    assert scale.item() == pytest.approx(3e38) and tracker.item() == 0


def _scaler_run(dev, opt_fn, inf_steps, steps=6):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 16), nn.Tanh(), nn.Linear(16, 4)).to(dev)
    opt = opt_fn(model.parameters())
    scaler = torch.amp.GradScaler(dev, init_scale=2.0**10, growth_interval=2)
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(16, 8, generator=g).to(dev), torch.randn(16, 4, generator=g).to(dev)
    scales = []
    for i in range(steps):
        opt.zero_grad()
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = F.mse_loss(model(x).float(), y)
        scaler.scale(loss).backward()
        if i in inf_steps:
            model[0].weight.grad[0, 0] = float("inf")
        before = [p.detach().clone() for p in model.parameters()]
        scaler.step(opt)
        scaler.update()
        if i in inf_steps:  # skipped: parameters untouched
            for b, p in zip(before, model.parameters()):
                assert torch.equal(b.cpu(), p.detach().cpu())
        scales.append(scaler.get_scale())
    return [p.detach().cpu() for p in model.parameters()], scales


@pytest.mark.parametrize("opt", ["sgd", "adam_fused", "adamw_foreach"])
def test_grad_scaler_matches_cpu_and_skips_inf_steps(opt):
    opt_fn = {
        "sgd": lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
        "adam_fused": lambda ps: torch.optim.Adam(ps, lr=1e-2, fused=True),
        "adamw_foreach": lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=True),
    }[opt]
    tpu_params, tpu_scales = _scaler_run("tpu", opt_fn, inf_steps={1, 4})
    cpu_params, cpu_scales = _scaler_run("cpu", opt_fn, inf_steps={1, 4})
    assert tpu_scales == cpu_scales
    assert tpu_scales[1] == tpu_scales[0] / 2  # backoff on the inf step
    assert math.isfinite(tpu_scales[-1])
    for a, e in zip(tpu_params, cpu_params):
        torch.testing.assert_close(a, e, **BF16_TOL)  # bf16 autocast forward
