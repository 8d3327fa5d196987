"""linalg.matrix_exp vs CPU (csrc/ops/linalg/matrix_exp.cc)."""
import pytest
import torch

from tests.helpers import both_raise, check

TPU = torch.device("tpu")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("shape,scale", [((4, 4), 0.3), ((3, 5, 5), 2.0), ((2, 3, 3), 30.0), ((1, 1), 1.0),
                                         ((2, 2, 6, 6), 1e-9)], ids=["small", "batch", "scaled", "1x1", "tiny"])
def test_matrix_exp_matches_cpu(dtype, shape, scale):
    # "scaled": norms of about 50, so each matrix squares a different number
    # of times (the per-matrix count of the squaring loop).
    torch.manual_seed(0)
    a = (torch.randn(*shape, dtype=torch.float64) * scale).to(dtype)
    if scale == 30.0:
        a[1] *= 0.01
    # Relative to the result's size: entries of exp(A) span many orders.
    big = torch.linalg.matrix_exp(a.double()).abs().amax().item()
    tol = dict(rtol=1e-5, atol=1e-6 * big) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-12 * big)
    check(torch.linalg.matrix_exp, a, **tol)
    check(torch.matrix_exp, a, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_matrix_exp_backward_matches_cpu(dtype):
    torch.manual_seed(0)
    a = torch.randn(2, 4, 4, dtype=dtype) * 0.7
    tol = dict(rtol=1e-4, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-9, atol=1e-10)
    check(torch.linalg.matrix_exp, a, grad=True, **tol)


def test_matrix_exp_of_a_skew_symmetric_matrix_is_orthogonal():
    # What parametrizations.orthogonal relies on: exp(S - S^T) is a rotation.
    torch.manual_seed(0)
    s = torch.randn(5, 5, device=TPU)
    q = torch.linalg.matrix_exp(s - s.mT).cpu()
    torch.testing.assert_close(q @ q.mT, torch.eye(5), rtol=0, atol=1e-5)


def test_matrix_exp_bfloat16_computes_in_float32():
    # CPU's bfloat16 kernel overflows to inf on this input; tpu computes in
    # float32 and rounds, so the reference is CPU's float32 result rounded.
    torch.manual_seed(0)
    a = (torch.randn(4, 4) * 0.3).to(torch.bfloat16)
    got = torch.linalg.matrix_exp(a.to(TPU)).cpu()
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, torch.linalg.matrix_exp(a.float()).to(torch.bfloat16))


def test_matrix_exp_out_and_empty():
    a = torch.randn(3, 3)
    out = torch.empty(0, device=TPU)
    torch.ops.aten.linalg_matrix_exp.out(a.to(TPU), out=out)  # no Python out= form; the ATen one
    torch.testing.assert_close(out.cpu(), torch.linalg.matrix_exp(a))
    assert torch.linalg.matrix_exp(torch.empty(3, 0, 0, device=TPU)).shape == (3, 0, 0)
    # A transposed input gives a contiguous result; out= of another dtype is CPU's error.
    assert torch.linalg.matrix_exp(a.to(TPU).t()).stride() == torch.linalg.matrix_exp(a.t()).stride()
    both_raise(RuntimeError, lambda x, o: torch.ops.aten.linalg_matrix_exp.out(x, out=o), a,
               torch.empty(0, dtype=torch.float64))


def test_matrix_exp_bad_input_raises_as_cpu():
    both_raise(RuntimeError, torch.linalg.matrix_exp, torch.randn(2, 3))
    both_raise(RuntimeError, torch.linalg.matrix_exp, torch.randn(3))
    both_raise(RuntimeError, torch.linalg.matrix_exp, torch.ones(2, 2, dtype=torch.int64))


def test_orthogonal_parametrization_trains_as_on_cpu():
    # torch.nn.utils.parametrizations.orthogonal uses matrix_exp (and, for
    # other maps, householder products): a module with it trains on tpu.
    def run(dev):
        torch.manual_seed(0)
        lin = torch.nn.utils.parametrizations.orthogonal(torch.nn.Linear(4, 4), orthogonal_map="matrix_exp").to(dev)
        opt = torch.optim.SGD(lin.parameters(), lr=0.1)
        x = torch.randn(8, 4).to(dev)
        for _ in range(3):
            loss = lin(x).square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return lin.weight.detach().cpu()

    torch.testing.assert_close(run(TPU), run("cpu"), rtol=1e-4, atol=1e-5)
