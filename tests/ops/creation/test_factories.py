"""arange, linspace, logspace, eye, triu_indices/tril_indices,
_efficientzerotensor and the composite factories (full/zeros/ones/*_like)
against PyTorch CPU (csrc/ops/creation/factories.cc)."""
import pytest
import torch

from tests.helpers import TPU, check

DTYPES = [torch.float32, torch.bfloat16, torch.int32, torch.int64]


def _same(actual, expected, **tol):
    assert actual.device.type == "tpu"
    torch.testing.assert_close(actual.cpu(), expected, **tol)


@pytest.mark.parametrize("dtype", DTYPES)
def test_arange_dtypes(dtype):
    _same(torch.arange(10, dtype=dtype, device=TPU), torch.arange(10, dtype=dtype))
    _same(torch.arange(2, 17, 3, dtype=dtype, device=TPU), torch.arange(2, 17, 3, dtype=dtype))
    _same(torch.arange(10, -3, -2, dtype=dtype, device=TPU), torch.arange(10, -3, -2, dtype=dtype))


def test_arange_inferred_dtype_and_float_steps():
    for args in [(5,), (1, 4), (0.0, 1.0, 0.1), (-1.5, 2.25, 0.25), (1, 2.5, 0.5), (0, 1, 0.3)]:
        a = torch.arange(*args, device=TPU)
        e = torch.arange(*args)
        assert a.dtype == e.dtype
        _same(a, e)


def test_arange_runtime_scalars_share_executable():
    import torch_tpu

    torch.arange(3, 13, device=TPU)
    before = torch_tpu.debug.metrics()["compiles"]
    _same(torch.arange(7, 17, device=TPU), torch.arange(7, 17))
    assert torch_tpu.debug.metrics()["compiles"] == before


def test_arange_out_and_views():
    out = torch.empty(0, device=TPU)
    torch.arange(0, 5, out=out)
    _same(out, torch.arange(0, 5, dtype=torch.float32))
    big = torch.zeros(3, 6, device=TPU, dtype=torch.int64)
    torch.arange(6, out=big[1])
    exp = torch.zeros(3, 6, dtype=torch.int64)
    exp[1] = torch.arange(6)
    _same(big, exp)
    big = torch.zeros(4, 4, device=TPU)
    torch.arange(4, out=big[:, 1])  # non-contiguous out
    exp = torch.zeros(4, 4)
    exp[:, 1] = torch.arange(4)
    _same(big, exp)
    empty = torch.arange(3, 3, device=TPU)
    assert empty.shape == (0,)


def test_arange_errors():
    for args, exc in [((0, 10, 0), RuntimeError), ((0, 10, -1), RuntimeError),
                      ((0, float("inf")), RuntimeError)]:
        with pytest.raises(exc):
            torch.arange(*args)
        with pytest.raises(exc):
            torch.arange(*args, device=TPU)
    with pytest.raises(NotImplementedError):
        torch.arange(3, dtype=torch.bool)
    with pytest.raises(NotImplementedError):
        torch.arange(3, dtype=torch.bool, device=TPU)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linspace_dtypes(dtype):
    for start, end, steps in [(0, 10, 5), (-3, 7, 11), (10, 0, 7), (0.5, 10.7, 6), (2, 2, 1), (0, 1, 0)]:
        a = torch.linspace(start, end, steps, dtype=dtype, device=TPU)
        e = torch.linspace(start, end, steps, dtype=dtype)
        _same(a, e)


def test_linspace_float_precision_and_out():
    _same(torch.linspace(-1, 1, 1001, device=TPU), torch.linspace(-1, 1, 1001))
    big = torch.zeros(2, 5, device=TPU)
    torch.linspace(0, 1, 5, out=big[1])
    exp = torch.zeros(2, 5)
    exp[1] = torch.linspace(0, 1, 5)
    _same(big, exp)
    with pytest.raises(RuntimeError):
        torch.linspace(0, 1, -1, device=TPU)


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_eye(dtype):
    _same(torch.eye(4, dtype=dtype, device=TPU), torch.eye(4, dtype=dtype))
    _same(torch.eye(3, 5, dtype=dtype, device=TPU), torch.eye(3, 5, dtype=dtype))
    _same(torch.eye(5, 2, dtype=dtype, device=TPU), torch.eye(5, 2, dtype=dtype))
    assert torch.eye(0, device=TPU).shape == (0, 0)


def test_eye_out_and_errors():
    out = torch.empty(0, device=TPU)
    torch.eye(3, out=out)
    _same(out, torch.eye(3))
    big = torch.full((2, 3, 3), 7.0, device=TPU)
    torch.eye(3, out=big[1])
    exp = torch.full((2, 3, 3), 7.0)
    exp[1] = torch.eye(3)
    _same(big, exp)
    with pytest.raises(RuntimeError):
        torch.eye(-1, device=TPU)
    with pytest.raises(RuntimeError):
        torch.eye(3, -1, device=TPU)


@pytest.mark.parametrize("dtype", DTYPES + [torch.bool])
def test_full_zeros_ones(dtype):
    _same(torch.zeros(2, 3, dtype=dtype, device=TPU), torch.zeros(2, 3, dtype=dtype))
    _same(torch.ones(2, 3, dtype=dtype, device=TPU), torch.ones(2, 3, dtype=dtype))
    v = True if dtype == torch.bool else 5
    _same(torch.full((4,), v, dtype=dtype, device=TPU), torch.full((4,), v, dtype=dtype))


def test_like_and_new_factories():
    x = torch.randn(3, 4)
    check(lambda t: torch.zeros_like(t), x)
    check(lambda t: torch.ones_like(t), x)
    check(lambda t: torch.full_like(t, 2.5), x)
    check(lambda t: torch.ones_like(t, dtype=torch.int32), x)
    check(lambda t: t.new_zeros(2, 2), x)
    check(lambda t: t.new_ones(5), x)
    check(lambda t: t.new_full((2,), -1.0), x)
    check(lambda t: torch.zeros_like(t.t()), x)  # non-contiguous source
    assert torch.empty_like(x.to(TPU)).shape == (3, 4)
    _same(torch.full((2, 2), 1.5, device=TPU), torch.full((2, 2), 1.5))
    # full infers the dtype from the fill value
    assert torch.full((2,), 3, device=TPU).dtype == torch.int64
    assert torch.full((2,), True, device=TPU).dtype == torch.bool


def _same_exact(actual, expected):
    assert actual.device.type == "tpu"
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual.cpu(), expected, rtol=0, atol=0)


# --- triu_indices / tril_indices ------------------------------------------------------------

@pytest.mark.parametrize("op", [torch.triu_indices, torch.tril_indices])
def test_tri_indices(op):
    for row, col, off in [(4, 3, 0), (4, 3, 1), (3, 4, -1), (5, 5, 2), (1, 7, -3), (6, 2, -10), (3, 3, 10),
                          (0, 3, 0), (3, 0, 0), (3, 3, -(2**40)), (3, 3, 2**40)]:
        expected = op(row, col, off)
        _same_exact(op(row, col, off, device=TPU), expected)
    _same_exact(op(4, 5, 1, dtype=torch.int32, device=TPU), op(4, 5, 1, dtype=torch.int32))


@pytest.mark.parametrize("op", [torch.triu_indices, torch.tril_indices])
def test_tri_indices_bad(op):
    with pytest.raises(NotImplementedError):
        op(3, 3, dtype=torch.float32, device=TPU)
    with pytest.raises(NotImplementedError):
        op(3, 3, dtype=torch.int16, device=TPU)
    with pytest.raises(RuntimeError):
        op(-1, 3, device=TPU)
    with pytest.raises(RuntimeError):
        op(3, -1, device=TPU)


# --- logspace ------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_logspace(dtype):
    for start, end, steps, base in [(0, 3, 4, 10.0), (-1.0, 2.0, 7, 2.0), (1, 1, 1, 10.0), (0, 1, 0, 10.0)]:
        e = torch.logspace(start, end, steps, base=base, dtype=dtype)
        a = torch.logspace(start, end, steps, base=base, dtype=dtype, device=TPU)
        torch.testing.assert_close(a.cpu(), e)
    out = torch.empty(2, dtype=dtype, device=TPU)
    torch.logspace(0, 2, 5, out=out.resize_(0))
    torch.testing.assert_close(out.cpu(), torch.logspace(0, 2, 5, dtype=dtype))


# --- _efficientzerotensor -------------------------------------------------------------

def test_efficientzerotensor():
    z = torch._efficientzerotensor((2, 3), device=TPU)
    assert z.shape == (2, 3) and z.device.type == "tpu"
    assert torch.all(z.cpu() == 0)
