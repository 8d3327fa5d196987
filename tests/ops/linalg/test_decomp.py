"""QR (geqrf, householder_product, linalg.qr, ormqr), eigh and SVD (and
what composes them: pinv, matrix_rank, cond, svdvals, nuclear norm, lstsq)
against PyTorch CPU.

QR follows LAPACK's sign convention, so it is compared entry for entry.
Eigen/singular vectors are only defined up to sign, so those compare
gauge-invariant quantities: |V|, reconstructions, and gradients of
functions that do not depend on the signs."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check


def needs(*ops):
    missing = [o for o in ops if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{o}", "PrivateUse1")]
    return pytest.mark.skipif(bool(missing), reason=f"tpu kernels missing: {missing}")


def well_conditioned(*shape, seed=0):
    """Random matrices with distinct singular values in [1, 2]: vectors are
    then well defined (up to sign) and float32 results agree closely."""
    g = torch.Generator().manual_seed(seed)
    *batch, m, n = shape
    k = min(m, n)
    u, _ = torch.linalg.qr(torch.randn(*batch, m, m, generator=g))
    v, _ = torch.linalg.qr(torch.randn(*batch, n, n, generator=g))
    s = torch.linspace(2, 1, k) if k > 0 else torch.zeros(0)
    return (u[..., :, :k] * s) @ v[..., :k, :]


def symmetric(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = shape[-1]
    q, _ = torch.linalg.qr(torch.randn(*shape, generator=g))
    w = torch.linspace(-2, 3, n)
    return (q * w) @ q.mT


# ---- QR -------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (2, 3, 1, 4), (0, 3)])
def test_geqrf(shape):
    a = torch.randn(*shape)
    check(torch.geqrf, a)


def test_geqrf_noncontiguous_and_out():
    a = torch.randn(6, 5)
    check(torch.geqrf, a.t())
    check(torch.geqrf, a[1:, ::2])
    ta, tt = torch.empty(0, device=TPU), torch.empty(0, device=TPU)
    torch.geqrf(a.to(TPU), out=(ta, tt))
    ea, et = torch.geqrf(a)
    torch.testing.assert_close(ta.cpu(), ea)
    torch.testing.assert_close(tt.cpu(), et)


@pytest.mark.parametrize("shape,k", [((5, 3), 2), ((2, 6, 4), 4), ((5, 3), 0), ((0, 3, 2), 2)])
def test_householder_product(shape, k):
    a = torch.randn(*shape)
    tau = torch.rand(*shape[:-2], k) + 0.5
    # Arbitrary tau makes the reflectors non-orthogonal, so entries grow to
    # ~10 and rounding of the k chained updates differs from LAPACK's blocked
    # order at ~1e-5 relative (the OpInfo harness also uses 1e-4).
    check(torch.linalg.householder_product, a, tau, grad=k > 0 and a.numel() > 0, atol=1e-4, rtol=1e-4)


def test_householder_product_of_geqrf_is_q():
    a = torch.randn(3, 6, 4)
    t = a.to(TPU)
    q = torch.linalg.householder_product(*torch.geqrf(t))
    torch.testing.assert_close(q.cpu(), torch.linalg.qr(a).Q, atol=1e-5, rtol=1e-5)
    out = torch.empty(3, 6, 8, device=TPU)[..., ::2]  # out= into a strided view
    torch.linalg.householder_product(*torch.geqrf(t), out=out)
    torch.testing.assert_close(out.cpu(), torch.linalg.qr(a).Q, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("mode", ["reduced", "complete", "r"])
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5), (3, 0)])
def test_linalg_qr(mode, shape):
    a = torch.randn(*shape)
    check(lambda x: torch.linalg.qr(x, mode=mode), a)


@needs("linalg_solve_triangular")
@pytest.mark.parametrize("shape", [(5, 3), (2, 3, 5)])
def test_linalg_qr_grad(shape):
    a = well_conditioned(*shape)
    # One output carrying both factors: check() backpropagates each output
    # separately, and Q and R share one graph.
    def qr_flat(x):
        q, r = torch.linalg.qr(x)
        return torch.cat([q.flatten(-2), r.flatten(-2)], -1)

    check(qr_flat, a, grad=True)


def test_linalg_qr_noncontiguous_and_out():
    a = torch.randn(6, 5)
    check(torch.linalg.qr, a.t())
    check(torch.linalg.qr, a[1:, ::2])
    q = torch.empty(5, 10, device=TPU)[:, ::2]
    r = torch.empty(5, 5, device=TPU)
    torch.linalg.qr(a.t().to(TPU), out=(q, r))
    eq, er = torch.linalg.qr(a.t())
    torch.testing.assert_close(q.cpu(), eq)
    torch.testing.assert_close(r.cpu(), er)


@pytest.mark.parametrize("left,transpose", [(True, True), (False, False)])
def test_ormqr(left, transpose):
    a = torch.randn(2, 5, 3)
    c = torch.randn(2, 5, 4) if left else torch.randn(2, 4, 5)
    a_, tau = torch.geqrf(a)
    check(lambda x, t, y: torch.ormqr(x, t, y, left=left, transpose=transpose), a_, tau, c, grad=True)


def test_qr_bad_input():
    both_raise(RuntimeError, lambda x: torch.linalg.qr(x, mode="foo"), torch.randn(3, 3))
    both_raise(RuntimeError, torch.linalg.qr, torch.randn(3))
    both_raise(RuntimeError, torch.linalg.qr, torch.ones(3, 3, dtype=torch.int64))
    both_raise(NotImplementedError, torch.linalg.qr, torch.ones(3, 3, dtype=torch.bfloat16))
    both_raise(RuntimeError, torch.geqrf, torch.randn(3))
    both_raise(NotImplementedError, torch.geqrf, torch.ones(3, 3, dtype=torch.int32))
    both_raise(RuntimeError, torch.linalg.householder_product, torch.randn(2, 3), torch.randn(2))
    both_raise(RuntimeError, torch.linalg.householder_product, torch.randn(4, 3), torch.randn(4))
    both_raise(RuntimeError, torch.linalg.householder_product, torch.randn(2, 4, 3), torch.randn(3, 2))
    both_raise(RuntimeError, torch.ormqr, torch.randn(4, 3), torch.randn(3), torch.randn(5, 2))


# ---- eigh -------------------------------------------------------------------

def _eigh_invariants(out):
    w, v = out
    return w, v.abs(), (v * w.unsqueeze(-2)) @ v.mT


@pytest.mark.parametrize("shape,uplo", [((4, 4), "L"), ((1, 1), "U"), ((2, 2, 3, 3), "U"), ((0, 3, 3), "L")])
def test_eigh(shape, uplo):
    a = symmetric(*shape) if 0 not in shape else torch.randn(*shape)
    # Only the `uplo` triangle may be read: garble the other one.
    garbled = a + (torch.randn(*shape).triu(1) if uplo == "L" else torch.randn(*shape).tril(-1))
    check(lambda x: _eigh_invariants(torch.linalg.eigh(x, UPLO=uplo)), garbled, atol=1e-5, rtol=1e-5)
    check(lambda x: torch.linalg.eigvalsh(x, UPLO=uplo), garbled, atol=1e-5, rtol=1e-5)


def test_eigh_grad():
    a = symmetric(2, 4, 4)
    check(lambda x: torch.linalg.eigvalsh(x + x.mT), a, grad=True, atol=1e-4, rtol=1e-4)
    # Gauge-invariant function of the eigenvectors.
    check(lambda x: torch.linalg.eigh(x + x.mT)[1].abs(), a, grad=True, atol=1e-4, rtol=1e-4)


def test_eigh_noncontiguous_and_out():
    a = symmetric(5, 5)
    check(lambda x: torch.linalg.eigvalsh(x), a.t())
    w = torch.empty(10, device=TPU)[::2]
    v = torch.empty(5, 5, device=TPU)
    torch.linalg.eigh(a.to(TPU), out=(w, v))
    torch.testing.assert_close(w.cpu(), torch.linalg.eigvalsh(a), atol=1e-5, rtol=1e-5)


def test_eigh_bad_input():
    both_raise(RuntimeError, torch.linalg.eigh, torch.randn(3, 4))
    both_raise(RuntimeError, lambda x: torch.linalg.eigh(x, UPLO="X"), torch.randn(3, 3))
    both_raise(RuntimeError, torch.linalg.eigh, torch.randn(3))
    both_raise(NotImplementedError, torch.linalg.eigh, torch.ones(3, 3, dtype=torch.int64))
    both_raise(NotImplementedError, torch.linalg.eigh, torch.ones(3, 3, dtype=torch.bfloat16))


def test_hermitian_composites():
    a = symmetric(3, 4, 4)
    check(lambda x: torch.linalg.pinv(x, hermitian=True), a, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda x: torch.linalg.matrix_rank(x, hermitian=True), a)


# ---- SVD --------------------------------------------------------------------

def _svd_invariants(out):
    u, s, vh = out
    k = s.shape[-1]
    return s, u[..., :k].abs(), vh[..., :k, :].abs(), (u[..., :k] * s.unsqueeze(-2)) @ vh[..., :k, :]


@pytest.mark.parametrize("shape,full", [((5, 3), True), ((3, 5), True), ((2, 2, 3, 4), False), ((4, 4), False), ((0, 3), True)])
def test_svd(shape, full):
    a = well_conditioned(*shape)
    check(lambda x: _svd_invariants(torch.linalg.svd(x, full_matrices=full)), a, atol=1e-5, rtol=1e-5)
    # Complete bases are orthonormal.
    u, s, vh = torch.linalg.svd(a.to(TPU), full_matrices=full)
    eye = torch.eye(u.shape[-1]).expand(u.shape[:-2] + (u.shape[-1],) * 2)
    torch.testing.assert_close((u.mT @ u).cpu(), eye, atol=1e-5, rtol=1e-5)
    eye = torch.eye(vh.shape[-2]).expand(vh.shape[:-2] + (vh.shape[-2],) * 2)
    torch.testing.assert_close((vh @ vh.mT).cpu(), eye, atol=1e-5, rtol=1e-5)
    check(torch.linalg.svdvals, a, atol=1e-5, rtol=1e-5)


def test_svd_grad():
    a = well_conditioned(2, 5, 3)
    check(torch.linalg.svdvals, a, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda x: torch.linalg.svd(x, full_matrices=False)[0].abs(), a, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda x: (lambda u, s, vh: u @ vh)(*torch.linalg.svd(x, full_matrices=False)), a, grad=True,
          atol=1e-4, rtol=1e-4)


def test_svd_noncontiguous_and_out():
    a = well_conditioned(6, 5)
    check(torch.linalg.svdvals, a.t(), atol=1e-5, rtol=1e-5)
    check(torch.linalg.svdvals, a[1:, ::2], atol=1e-5, rtol=1e-5)
    s = torch.empty(10, device=TPU)[::2]
    torch.linalg.svdvals(a.to(TPU), out=s)
    torch.testing.assert_close(s.cpu(), torch.linalg.svdvals(a), atol=1e-5, rtol=1e-5)


def test_svd_composites():
    a = well_conditioned(2, 5, 3)
    check(torch.linalg.pinv, a, grad=True, atol=1e-4, rtol=1e-4)
    check(torch.pinverse, a, grad=True, atol=1e-4, rtol=1e-4)
    check(torch.linalg.matrix_rank, a)
    check(torch.linalg.cond, a, grad=True, atol=1e-4, rtol=1e-4)
    check(lambda x: torch.linalg.matrix_norm(x, "nuc"), a, grad=True, atol=1e-4, rtol=1e-4)
    # Rank-deficient: pinv and rank only use the nonzero singular values.
    lowrank = a[..., :2] @ a[..., :2, :]
    check(torch.linalg.pinv, lowrank, atol=1e-4, rtol=1e-4)
    check(torch.linalg.matrix_rank, lowrank)


def test_svd_bad_input():
    both_raise(RuntimeError, torch.linalg.svd, torch.randn(3))
    both_raise(RuntimeError, torch.linalg.svd, torch.ones(3, 3, dtype=torch.int64))
    both_raise(NotImplementedError, torch.linalg.svd, torch.ones(3, 3, dtype=torch.bfloat16))
    both_raise(RuntimeError, lambda x: torch.linalg.svd(x, driver="gesvd"), torch.randn(3, 3))


# ---- lstsq ------------------------------------------------------------------

@pytest.mark.parametrize("driver,m", [("gels", 4), ("gels", 2), ("gelsy", 3), ("gelsd", 4), ("gelss", 2)])
def test_lstsq(driver, m):
    a = well_conditioned(2, m, 3)
    b = torch.randn(2, m, 2)
    check(lambda x, y: torch.linalg.lstsq(x, y, driver=driver), a, b, atol=1e-4, rtol=1e-4)


def test_lstsq_grad_vector_broadcast():
    a = well_conditioned(4, 3)
    check(lambda x, y: torch.linalg.lstsq(x, y).solution, a, torch.randn(4, 2), grad=True, atol=1e-4, rtol=1e-4)
    check(lambda x, y: torch.linalg.lstsq(x, y, driver="gels"), a, torch.randn(4), atol=1e-4, rtol=1e-4)
    check(lambda x, y: torch.linalg.lstsq(x, y, driver="gelsd"), well_conditioned(2, 4, 3), torch.randn(1, 4, 2),
          atol=1e-4, rtol=1e-4)


def test_lstsq_bad_input():
    a = torch.randn(3, 3)
    both_raise(RuntimeError, lambda x, y: torch.linalg.lstsq(x, y, driver="foo"), a, a)
    both_raise(RuntimeError, torch.linalg.lstsq, a, torch.randn(4, 2))
    both_raise(RuntimeError, torch.linalg.lstsq, torch.ones(3, 3, dtype=torch.int64), torch.ones(3, 3, dtype=torch.int64))


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_householder_and_ormqr_out_forms_follow_cpu():
    # Each declared once for its functional and out= forms (ops/variants.h):
    # out= of any size is resized; as on CPU, householder_product writes
    # into any dtype it casts to and ormqr only into its own.
    torch.manual_seed(0)
    a, tau = torch.geqrf(torch.randn(5, 3))
    c = torch.randn(5, 2)
    for shape in [(5, 3), (1,), (0,)]:
        check(lambda x, t, o: (torch.linalg.householder_product(x, t, out=o), o)[1], a, tau, torch.empty(shape),
              atol=1e-4, rtol=1e-4)
        check(lambda x, t, y, o: (torch.ormqr(x, t, y, out=o), o)[1], a, tau, c, torch.empty(shape),
              atol=1e-4, rtol=1e-4)
    check(lambda x, t, o: (torch.linalg.householder_product(x, t, out=o), o)[1], a, tau,
          torch.empty(0, dtype=torch.float64), atol=1e-4, rtol=1e-4)
    both_raise(RuntimeError, lambda x, t, o: torch.linalg.householder_product(x, t, out=o), a, tau,
               torch.empty(0, dtype=torch.int64))
    both_raise(RuntimeError, lambda x, t, y, o: torch.ormqr(x, t, y, out=o), a, tau, c,
               torch.empty(0, dtype=torch.float64))


@pytest.mark.parametrize("name", ["geqrf", "qr", "qr_complete", "qr_r", "eigh", "eigvalsh", "svd", "svd_full",
                                  "svdvals"])
def test_results_layout_and_out_forms_like_cpu(name):
    # CPU's layouts (LAPACK's column-major factors), shapes and values (up to
    # the factorizations' sign freedom, which the products below remove);
    # out= of another dtype raises, as on CPU.
    torch.manual_seed(0)
    A = torch.randn(2, 5, 3)
    S = torch.randn(2, 4, 4)
    S = S + S.mT
    aten = torch.ops.aten
    fns = {
        "geqrf": (A, lambda a: torch.geqrf(a), lambda a, o: torch.geqrf(a, out=o)),
        "qr": (A, lambda a: torch.linalg.qr(a), lambda a, o: torch.linalg.qr(a, out=o)),
        "qr_complete": (A, lambda a: torch.linalg.qr(a, mode="complete"),
                        lambda a, o: torch.linalg.qr(a, mode="complete", out=o)),
        "qr_r": (A, lambda a: torch.linalg.qr(a, mode="r"), lambda a, o: torch.linalg.qr(a, mode="r", out=o)),
        "eigh": (S, lambda a: aten._linalg_eigh(a), lambda a, o: aten._linalg_eigh.eigenvalues(
            a, eigenvalues=o[0], eigenvectors=o[1])),
        "eigvalsh": (S, lambda a: aten._linalg_eigh(a, "L", False), lambda a, o: aten._linalg_eigh.eigenvalues(
            a, "L", False, eigenvalues=o[0], eigenvectors=o[1])),
        "svd": (A, lambda a: aten._linalg_svd(a), lambda a, o: aten._linalg_svd.U(a, U=o[0], S=o[1], Vh=o[2])),
        "svd_full": (A, lambda a: aten._linalg_svd(a, True), lambda a, o: aten._linalg_svd.U(
            a, True, U=o[0], S=o[1], Vh=o[2])),
        "svdvals": (A, lambda a: aten._linalg_svd(a, False, False), lambda a, o: aten._linalg_svd.U(
            a, False, False, U=o[0], S=o[1], Vh=o[2])),
    }
    x, fn, fn_out = fns[name]
    expected, actual = fn(x), fn(x.to(TPU))
    for a, e in zip(actual, expected):
        assert a.shape == e.shape and a.stride() == e.stride(), (a.shape, a.stride(), e.shape, e.stride())
    outs = [torch.empty(0, device=TPU) for _ in expected]
    fn_out(x.to(TPU), outs)
    for o, a in zip(outs, actual):
        torch.testing.assert_close(o.cpu(), a.cpu())  # the out= form computes what the functional one does
    # geqrf's out= takes any dtype its result casts to (CPU casts); the others need the input's.
    wrong = torch.int32 if name == "geqrf" else torch.float64
    messages = []
    for dev in ("cpu", TPU):
        with pytest.raises(RuntimeError) as e:
            fn_out(x.to(dev), [torch.empty(0, dtype=wrong, device=dev) for _ in expected])
        messages.append(str(e.value).split("\n")[0])
    assert messages[0] == messages[1], messages
    if name == "geqrf":
        outs = [torch.empty(0, dtype=torch.float64, device=TPU) for _ in expected]
        fn_out(x.to(TPU), outs)
        for o, e in zip(outs, fn(x.double())):
            torch.testing.assert_close(o.cpu(), e, atol=1e-5, rtol=1e-5)  # float32 factors against float64 ones
