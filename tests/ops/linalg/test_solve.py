"""Solvers over given factors (triangular solves, Cholesky inverse/solve,
lu_unpack/lu_solve) and linalg.cross against PyTorch CPU: batched,
non-contiguous, out=, gradients and bad input (csrc/ops/linalg/solve.cc)."""
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


def test_cholesky_inverse_and_solve():
    L = torch.linalg.cholesky(spd(2, 4, 4))
    check(torch.cholesky_inverse, L, grad=True)
    check(lambda x: torch.cholesky_inverse(x, upper=True), L.mT.contiguous(), grad=True)
    b = torch.randn(3, 2, 4, 3)  # batch-broadcast against L
    check(torch.cholesky_solve, b, L, grad=True)
    check(lambda x, y: torch.cholesky_solve(x, y, upper=True), b, L.mT, grad=True)
    both_raise(RuntimeError, torch.cholesky_solve, torch.randn(3, 2), L[0])


# --- triangular solves -----------------------------------------------------------


@pytest.mark.parametrize("upper,transpose,unit", [(True, False, False), (False, True, False), (True, True, True)])
def test_triangular_solve(upper, transpose, unit):
    A = well_conditioned(2, 4, 4)
    b = torch.randn(3, 1, 4, 2)
    check(lambda x, y: torch.triangular_solve(x, y, upper=upper, transpose=transpose, unitriangular=unit)[0],
          b, A, grad=True)
    res = torch.triangular_solve(b.to(TPU), A.to(TPU), upper=upper)
    torch.testing.assert_close(res[1].cpu(), torch.triangular_solve(b, A, upper=upper)[1])


def test_triangular_solve_errors():
    A = torch.randn(3, 3)
    both_raise(RuntimeError, torch.triangular_solve, torch.randn(4, 2), A)
    both_raise(RuntimeError, torch.triangular_solve, torch.randn(3, 2), torch.randn(3, 2))
    both_raise(RuntimeError, torch.triangular_solve, torch.randn(3, 2).double(), A)


@pytest.mark.parametrize("left", [True, False])
@pytest.mark.parametrize("upper", [True, False])
def test_solve_triangular(left, upper):
    A = well_conditioned(2, 3, 3)
    B = torch.randn(2, 3, 5) if left else torch.randn(2, 5, 3)
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left), A, B, grad=True)
    check(lambda a, b: torch.linalg.solve_triangular(a, b, upper=upper, left=left, unitriangular=True), A, B)
    # Non-contiguous operands and out= into a view.
    check(lambda a, b: torch.linalg.solve_triangular(a.mT, b[..., ::1], upper=upper, left=left), A, B)
    out = torch.zeros(2, B.shape[1], 2 * B.shape[2], device=TPU)
    view = out[..., ::2]
    torch.linalg.solve_triangular(A.to(TPU), B.to(TPU), upper=upper, left=left, out=view)
    torch.testing.assert_close(view.cpu(), torch.linalg.solve_triangular(A, B, upper=upper, left=left))
    assert (out[..., 1::2].cpu() == 0).all()


def test_solve_triangular_errors():
    S = torch.randn(3, 3)
    both_raise(RuntimeError, lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), S, torch.randn(4, 2))
    both_raise(RuntimeError, lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), torch.randn(3, 2),
               torch.randn(3, 2))
    both_raise(NotImplementedError, lambda a, b: torch.linalg.solve_triangular(a, b, upper=True), S.long(),
               torch.ones(3, 2, dtype=torch.long))


# --- cross -------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64])
def test_cross(dtype):
    make = (lambda *s: torch.randn(*s).to(dtype)) if dtype.is_floating_point else (
        lambda *s: torch.randint(-9, 9, s, dtype=dtype))
    a, b = make(1, 4, 3), make(2, 1, 3)
    check(torch.linalg.cross, a, b, grad=dtype == torch.float32)
    c, d = make(3, 5), make(3, 5)
    check(lambda x, y: torch.cross(x, y, dim=0), c, d)
    check(lambda x, y: torch.linalg.cross(x.t(), y[:, :].t()), c, d)


def test_cross_out_and_errors():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    out = torch.empty(2, 6, device=TPU)
    torch.linalg.cross(a.to(TPU), b.to(TPU), out=out[:, 3:])
    torch.testing.assert_close(out[:, 3:].cpu(), torch.linalg.cross(a, b))
    both_raise(RuntimeError, torch.linalg.cross, torch.randn(3, 2), torch.randn(3, 2))
    both_raise(RuntimeError, torch.linalg.cross, torch.randn(3, 3), torch.randn(3))
    both_raise(RuntimeError, torch.linalg.cross, torch.randn(3), torch.randn(3).double())


def test_lu_unpack_and_solve():
    A = torch.randn(2, 4, 4)
    LU, piv = torch.linalg.lu_factor(A)
    check(torch.lu_unpack, LU, piv)
    check(lambda x, p: torch.lu_unpack(x, p, unpack_data=False)[0], LU, piv)
    B = torch.randn(3, 1, 4, 2)
    for left in (True, False):
        for adjoint in (False, True):
            rhs = B if left else B.mT
            check(lambda lu, p, b: torch.linalg.lu_solve(lu, p, b, left=left, adjoint=adjoint), LU, piv, rhs,
                  grad=left != adjoint)
    check(lambda lu, p, b: torch.lu_solve(b, lu, p), LU, piv, B[0])
    both_raise(RuntimeError, torch.linalg.lu_solve, LU, piv, torch.randn(2, 3, 2))
    both_raise(RuntimeError, torch.linalg.lu_solve, LU, piv, torch.randn(2, 4, 2).double())
    both_raise(RuntimeError, torch.linalg.lu_solve, LU, piv.long(), torch.randn(2, 4, 2))


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_out_forms_follow_cpu():
    # cholesky_inverse and solve_triangular, each declared once for its
    # functional and out= forms (ops/variants.h): out= is resized;
    # cholesky_inverse takes an out it can cast to, solve_triangular (as
    # CPU's kernel) only its own dtype.
    torch.manual_seed(0)
    A = spd(3, 3)
    L = torch.linalg.cholesky(A)
    B = torch.randn(3, 2)
    for shape in [(3, 3), (1,), (0,)]:
        check(lambda l, o: (torch.cholesky_inverse(l, out=o), o)[1], L, torch.empty(shape), atol=1e-4, rtol=1e-4)
    check(lambda l, o: (torch.cholesky_inverse(l, out=o), o)[1], L, torch.empty(0, dtype=torch.float64),
          atol=1e-4, rtol=1e-4)
    both_raise(RuntimeError, lambda l, o: torch.cholesky_inverse(l, out=o), L, torch.empty(0, dtype=torch.int64))
    check(lambda l, b, o: (torch.linalg.solve_triangular(l, b, upper=False, out=o), o)[1], L, B, torch.empty(0),
          atol=1e-4, rtol=1e-4)
    for dt in [torch.float64, torch.int64]:
        both_raise(RuntimeError, lambda l, b, o: torch.linalg.solve_triangular(l, b, upper=False, out=o), L, B,
                   torch.empty(0, dtype=dt))


@pytest.mark.parametrize("name", ["triangular_solve", "lu_unpack", "lu_unpack_pivots_only", "lu_solve"])
def test_results_layout_and_out_forms_like_cpu(name):
    # CPU's values and layouts; out= fills the given tensors, and an out of
    # another dtype raises, as CPU's structured kernels do.
    import warnings

    torch.manual_seed(0)
    A = torch.randn(2, 4, 4) + 4 * torch.eye(4)
    B = torch.randn(2, 4, 3)
    LU, piv = torch.linalg.lu_factor(A)
    fns = {
        "triangular_solve": (lambda a, b, lu, p, out=None: torch.triangular_solve(b, a, upper=False, out=out),
                             [torch.float32] * 2),
        "lu_unpack": (lambda a, b, lu, p, out=None: torch.lu_unpack(lu, p, out=out), [torch.float32] * 3),
        "lu_unpack_pivots_only": (lambda a, b, lu, p, out=None: torch.lu_unpack(lu, p, unpack_data=False, out=out),
                                  [torch.float32] * 3),
        "lu_solve": (lambda a, b, lu, p, out=None: (torch.linalg.lu_solve(lu, p, b, out=None if out is None
                                                                          else out[0]),),
                     [torch.float32]),
    }
    fn, dtypes = fns[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # triangular_solve's deprecation notice
        expected = fn(A, B, LU, piv)
        args = [t.to(TPU) for t in (A, B, LU, piv)]
        actual = fn(*args)
        for a, e in zip(actual, expected):
            assert a.stride() == e.stride(), (a.stride(), e.stride())
            torch.testing.assert_close(a.cpu(), e)
        outs = [torch.empty(0, dtype=d, device=TPU) for d in dtypes]
        fn(*args, out=outs if len(outs) > 1 else outs)
        for o, e in zip(outs, expected):
            torch.testing.assert_close(o.cpu(), e)
        for dev in ("cpu", TPU):
            with pytest.raises(RuntimeError):
                fn(*[t.to(dev) for t in (A, B, LU, piv)], out=[torch.empty(0, dtype=torch.float64, device=dev)
                                                               for _ in dtypes])
