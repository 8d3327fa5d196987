"""Dense factorizations (Cholesky, LU) and what is read off them (inv, solve,
det/slogdet) against PyTorch CPU: batched, non-contiguous, out=, gradients
and bad input (csrc/ops/linalg/factor.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check

torch.manual_seed(0)


def spd(*shape):
    x = torch.randn(*shape)
    n = shape[-1]
    return x @ x.mT + n * torch.eye(n)


def well_conditioned(*shape):
    n = shape[-1]
    return torch.randn(*shape) + n * torch.eye(n)


# --- Cholesky ------------------------------------------------------------------


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(upper):
    a = spd(3, 4, 4)
    check(lambda x: torch.linalg.cholesky(x, upper=upper), a, grad=True)
    # Only one triangle is read, as in LAPACK.
    junk = a + torch.triu(torch.randn(4, 4), 1)
    check(lambda x: torch.linalg.cholesky(x, upper=False), junk)


def test_cholesky_ex_info_and_views():
    a = spd(2, 5, 5)
    a[1, 2, 2] = -100.0  # breaks down at the third pivot
    res = check(lambda x: torch.linalg.cholesky_ex(x)[1], a)
    assert res.dtype == torch.int32
    big = spd(6, 6)
    check(lambda x: torch.linalg.cholesky(x[1:, 1:]), big)
    check(lambda x: torch.linalg.cholesky(x.mT), big)
    out = torch.empty(10, 10, device=TPU)
    torch.linalg.cholesky(big.to(TPU), out=out[:6, ::2][:, :3].contiguous())  # resize path
    o = torch.empty(6, 6, device=TPU)
    torch.linalg.cholesky(big.to(TPU), out=o)
    torch.testing.assert_close(o.cpu(), torch.linalg.cholesky(big))


def test_cholesky_errors():
    both_raise(RuntimeError, torch.linalg.cholesky, torch.randn(3, 2))
    both_raise(RuntimeError, torch.linalg.cholesky, torch.ones(3, 3, dtype=torch.long))
    both_raise(RuntimeError, torch.linalg.cholesky, torch.randn(3))
    both_raise(torch.linalg.LinAlgError, torch.linalg.cholesky, -torch.eye(3))


# --- LU family ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 5, 5), (5, 3), (2, 3, 6)])
def test_lu_factor_matches_lapack(shape):
    A = torch.randn(*shape)
    LU, piv = torch.linalg.lu_factor(A)
    tLU, tpiv = torch.linalg.lu_factor(A.to(TPU))
    assert tpiv.dtype == torch.int32
    torch.testing.assert_close(tpiv.cpu(), piv)
    torch.testing.assert_close(tLU.cpu(), LU)
    check(lambda x: torch.linalg.lu(x), A, grad=False)
    check(lambda x: sum(t.sum() for t in torch.linalg.lu(x)[1:]), A, grad=len(shape) == 2)


def test_lu_ties_and_singular():
    # Equal magnitudes: the first row wins, as idamax picks.
    A = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 5.0, 1.0], [1.0, 0.0, 2.0]])
    check(lambda x: torch.linalg.lu_factor(x), A)
    S = torch.tensor([[0.0, 1.0, 2.0], [0.0, 3.0, 4.0], [0.0, 5.0, 7.0]])
    res = check(lambda x: torch.linalg.lu_factor_ex(x), S)
    assert res[2].item() == 1
    both_raise(RuntimeError, torch.linalg.lu_factor, torch.ones(3, 3))
    both_raise(RuntimeError, torch.linalg.lu_factor, torch.randn(3))


# --- inv / solve / det -----------------------------------------------------------------


def test_inv():
    A = well_conditioned(3, 4, 4)
    check(torch.linalg.inv, A, grad=True)
    check(lambda x: torch.linalg.inv(x.mT), A, grad=True)  # the non-transposed LU path
    check(lambda x: torch.linalg.inv_ex(x), A)
    check(lambda x: torch.linalg.matrix_power(x, -2), A[0], grad=True)
    out = torch.empty(4, 4, device=TPU)
    torch.linalg.inv(A[0].to(TPU), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.inv(A[0]))


def test_inv_errors():
    both_raise(RuntimeError, torch.linalg.inv, torch.randn(3, 2))
    both_raise(RuntimeError, torch.linalg.inv, torch.ones(3, 3, dtype=torch.long))
    both_raise(torch.linalg.LinAlgError, torch.linalg.inv, torch.zeros(3, 3))
    res = check(lambda x: torch.linalg.inv_ex(x)[1], torch.zeros(2, 3, 3))
    assert (res.cpu() == 1).all()


def test_solve():
    A = well_conditioned(2, 4, 4)
    check(torch.linalg.solve, A, torch.randn(3, 2, 4, 2), grad=True)
    check(torch.linalg.solve, A[0], torch.randn(4), grad=True)  # vector rhs
    check(torch.linalg.solve, A, torch.randn(2, 4))  # batched vector rhs
    check(lambda a, b: torch.linalg.solve(a, b, left=False), A, torch.randn(2, 3, 4), grad=True)
    check(lambda a, b: torch.linalg.solve(a.mT, b), A, torch.randn(4, 1))
    check(lambda a, b: torch.linalg.tensorsolve(a, b), torch.randn(2, 3, 6) + torch.eye(6).reshape(2, 3, 6),
          torch.randn(2, 3))
    check(torch.linalg.tensorinv, torch.randn(4, 2, 2, 4) + 4 * torch.eye(8).reshape(4, 2, 2, 4))


def test_solve_errors():
    S = torch.randn(3, 3)
    both_raise(RuntimeError, torch.linalg.solve, S, torch.randn(4))
    both_raise(RuntimeError, torch.linalg.solve, torch.randn(3, 2), torch.randn(3))
    both_raise(RuntimeError, torch.linalg.solve, S, torch.randn(3).double())
    both_raise(torch.linalg.LinAlgError, torch.linalg.solve, torch.zeros(3, 3), torch.randn(3))


def test_det_slogdet():
    A = torch.randn(3, 4, 4)
    check(torch.linalg.det, A, grad=True)
    check(lambda x: torch.linalg.det(x.mT), A)
    check(lambda x: torch.linalg.slogdet(x)[1], A, grad=True)
    check(lambda x: torch.linalg.slogdet(x)[0], A)
    check(torch.logdet, spd(2, 3, 3), grad=True)
    check(torch.linalg.det, torch.zeros(2, 3, 3))
    check(torch.linalg.det, torch.randn(2, 0, 0))
    both_raise(RuntimeError, torch.linalg.det, torch.randn(3, 2))
    both_raise(RuntimeError, torch.linalg.det, torch.ones(3, 3, dtype=torch.long))


def test_out_dtype_errors_read_as_cpus():
    # A factorization's out= of the wrong dtype raises CPU's message
    # ("dtype float, but got double", "dtype int, but got long int").
    a = torch.eye(3) * 2
    outs = [
        (lambda x, o: torch.linalg.cholesky_ex(x, out=o), [((3, 3), torch.float64), ((), torch.int32)]),
        (lambda x, o: torch.linalg.cholesky_ex(x, out=o), [((3, 3), torch.float32), ((), torch.int64)]),
        (lambda x, o: torch.linalg.lu_factor_ex(x, out=o),
         [((3, 3), torch.float64), ((3,), torch.int32), ((), torch.int32)]),
    ]
    for fn, specs in outs:
        with pytest.raises(RuntimeError) as cpu:
            fn(a, tuple(torch.empty(s, dtype=d) for s, d in specs))
        with pytest.raises(RuntimeError, match=f"^{cpu.value}$"):
            fn(a.to(TPU), tuple(torch.empty(s, dtype=d, device=TPU) for s, d in specs))


@pytest.mark.parametrize("name", ["cholesky_ex", "lu_factor_ex", "lu", "solve_ex", "solve_ex_vector", "inv_ex",
                                  "det", "slogdet"])
def test_results_layout_and_out_forms_like_cpu(name):
    # Results have CPU's values and layouts (column-major where CPU's are),
    # the out= forms fill the given tensors, and an out of another dtype
    # raises, as CPU's structured kernels do.
    A = spd(2, 4, 4).mT  # a transposed input, which det/slogdet factor differently
    B = torch.randn(2, 4, 3)
    L = torch.linalg
    fns = {
        "cholesky_ex": (lambda a, b, out=None: L.cholesky_ex(a, out=out), [a.dtype for a in L.cholesky_ex(A)]),
        "lu_factor_ex": (lambda a, b, out=None: L.lu_factor_ex(a, out=out), [a.dtype for a in L.lu_factor_ex(A)]),
        "lu": (lambda a, b, out=None: L.lu(a[:, :, :3], out=out), [A.dtype] * 3),
        "solve_ex": (lambda a, b, out=None: L.solve_ex(a, b, out=out), [a.dtype for a in L.solve_ex(A, B)]),
        "solve_ex_vector": (lambda a, b, out=None: L.solve_ex(a, b[..., 0], out=out),
                            [a.dtype for a in L.solve_ex(A, B[..., 0])]),
        "inv_ex": (lambda a, b, out=None: L.inv_ex(a, out=out), [a.dtype for a in L.inv_ex(A)]),
        "det": (lambda a, b, out=None: torch.ops.aten._linalg_det(a) if out is None
                else torch.ops.aten._linalg_det.result(a, result=out[0], LU=out[1], pivots=out[2]),
                [a.dtype for a in torch.ops.aten._linalg_det(A)]),
        "slogdet": (lambda a, b, out=None: torch.ops.aten._linalg_slogdet(a) if out is None
                    else torch.ops.aten._linalg_slogdet.sign(a, sign=out[0], logabsdet=out[1], LU=out[2],
                                                              pivots=out[3]),
                    [a.dtype for a in torch.ops.aten._linalg_slogdet(A)]),
    }
    fn, dtypes = fns[name]
    expected, actual = fn(A, B), fn(A.to(TPU), B.to(TPU))
    for a, e in zip(actual, expected):
        assert a.stride() == e.stride(), (a.stride(), e.stride())
        torch.testing.assert_close(a.cpu(), e)
    outs = [torch.empty(0, dtype=d, device=TPU) for d in dtypes]
    fn(A.to(TPU), B.to(TPU), out=outs)
    for o, e in zip(outs, expected):
        torch.testing.assert_close(o.cpu(), e)
    wrong = [torch.empty(0, dtype=torch.float64 if d != torch.float64 else torch.float32) for d in dtypes]
    for dev in ("cpu", TPU):
        with pytest.raises(RuntimeError):
            fn(A.to(dev), B.to(dev), out=[w.to(dev) for w in wrong])
