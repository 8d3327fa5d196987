"""Complex dtypes (complex64/complex128) on tpu against CPU: conversions,
views, polar/angle and elementwise ops (csrc/ops/pointwise/complex.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def crand(*shape, dtype=torch.complex64):
    return torch.randn(*shape, dtype=dtype)


FLOATS = [torch.float32, torch.bfloat16]


# --- types, copies, views ------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_roundtrip_and_strided(dtype):
    x = crand(4, 6, dtype=dtype)
    t = x.to(TPU)
    assert t.dtype == dtype
    torch.testing.assert_close(t.cpu(), x, atol=0, rtol=0)
    torch.testing.assert_close(t.t().cpu(), x.t(), atol=0, rtol=0)
    torch.testing.assert_close(t[1:, ::2].cpu(), x[1:, ::2], atol=0, rtol=0)
    # Writes into a strided view of a complex storage.
    t2 = t.clone()
    t2[:, 1::2] = torch.zeros(4, 3, dtype=dtype, device=TPU)
    x2 = x.clone()
    x2[:, 1::2] = 0
    torch.testing.assert_close(t2.cpu(), x2, atol=0, rtol=0)


def test_chalf_is_rejected():
    with pytest.raises(TypeError):
        torch.zeros(3, dtype=torch.complex32, device=TPU)


def test_conversions():
    x = rand(3, 5)
    check(lambda t: t.to(torch.complex64), x)
    check(lambda t: t.cfloat(), x)
    check(lambda t: t.cdouble(), x)
    check(lambda t: t.int().to(torch.complex64), x)
    check(lambda t: t.to(torch.float32), crand(3, 5))  # keeps the real part (CPU warns)
    check(lambda t: t.to(torch.complex128), crand(3, 5))
    check(lambda t: torch.full((2, 3), 1.5 - 2j, device=t.device), x)
    check(lambda t: torch.zeros(3, 5, dtype=torch.complex64, device=t.device) + t, x)


def test_view_as_real_aliases():
    x = crand(3, 4)
    t = x.to(TPU)
    r = torch.view_as_real(t)
    assert r.shape == (3, 4, 2) and r.dtype == torch.float32
    torch.testing.assert_close(r.cpu(), torch.view_as_real(x), atol=0, rtol=0)
    r[:, :, 1] = 0  # writes through to the complex storage
    x2 = x.clone()
    torch.view_as_real(x2)[:, :, 1] = 0
    torch.testing.assert_close(t.cpu(), x2, atol=0, rtol=0)
    torch.testing.assert_close(t.real.cpu(), x2.real, atol=0, rtol=0)
    torch.testing.assert_close(t.imag.cpu(), x2.imag, atol=0, rtol=0)
    # Non-contiguous view_as_real (last dim of the complex view strided).
    check(lambda u: torch.view_as_real(u[:, 1::2]), x)


def test_view_as_complex():
    x = rand(3, 4, 2)
    check(torch.view_as_complex, x)
    t = x.to(TPU)
    c = torch.view_as_complex(t)
    c.mul_(2)
    torch.testing.assert_close(t.cpu(), x * 2)
    both_raise(RuntimeError, torch.view_as_complex, rand(3, 3))


def test_complex_polar():
    a, b = rand(4, 5), rand(4, 5)
    check(torch.complex, a, b)
    check(torch.complex, a, b[:1])  # broadcast
    check(torch.polar, a.abs(), b)
    check(lambda u, v: torch.complex(u.t(), v.t()), a, b)
    both_raise(RuntimeError, torch.complex, a, b.double())
    both_raise(RuntimeError, torch.complex, a.int(), b.int())


def test_conj_and_real_imag():
    x = crand(4, 5)
    check(lambda t: t.conj(), x)
    check(lambda t: t.conj().resolve_conj(), x)
    check(lambda t: torch.conj_physical(t), x)
    check(lambda t: t.conj() * 2, x)
    check(lambda t: t.conj().imag, x)
    check(lambda t: t.real + t.imag, x)
    check(lambda t: t.conj().clone(), x)
    check(lambda t: t.conj().to(torch.complex128), x)


def test_elementwise():
    x, y = crand(4, 5), crand(4, 5)
    check(lambda a, b: a + b, x, y)
    check(lambda a, b: a - 2 * b, x, y)
    check(lambda a, b: a * b, x, y)
    check(lambda a, b: a / b, x, y)
    check(lambda a: -a, x)
    check(lambda a: a.abs(), x)
    check(lambda a: a.angle(), x)
    check(lambda a: a.sgn(), x)
    check(lambda a: a.exp(), x)
    check(lambda a: a.sum(0), x)
    check(lambda a: a.sum(), x)
    check(lambda a, b: torch.cat([a, b], 1), x, y)
    check(lambda a: a.t().reshape(-1), x)
    check(lambda a: a * 1.5, x)
    check(lambda a, b: a * b, x, rand(4, 5))
    check(lambda a: a == a.conj(), x)
    check(lambda a: torch.angle(a), rand(6))


@pytest.mark.parametrize("fn", [
    lambda t: t.max(), lambda t: t.amax(), lambda t: t.min(), lambda t: t.amin(),
    lambda t: t.clamp(0, 1), lambda t: torch.maximum(t, t), lambda t: torch.minimum(t, t),
    lambda t: t.max(0), lambda t: t.argmax(), lambda t: t < t, lambda t: t >= t,
], ids=["max", "amax", "min", "amin", "clamp", "maximum", "minimum", "max_dim", "argmax", "lt", "ge"])
def test_complex_is_unordered(fn):
    # Ordering ops refuse complex input with CPU's exception type (XLA would
    # order complex numbers lexicographically instead).
    x = torch.randn(3, dtype=torch.cfloat)
    with pytest.raises(Exception) as cpu_err:
        fn(x)
    with pytest.raises(Exception) as tpu_err:
        fn(x.to("tpu"))
    assert type(tpu_err.value) is cpu_err.type, (tpu_err.value, cpu_err.value)


# --- angle ----------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_angle(dtype):
    x = (torch.randn(10) * 3).to(dtype)
    if dtype.is_floating_point:
        x[1] = 0.0
    check(torch.angle, x, grad=dtype.is_floating_point)
    if dtype.is_floating_point:
        n = torch.tensor([float("nan"), -1.0], dtype=dtype)
        torch.testing.assert_close(torch.angle(n.to(TPU)).cpu(), torch.angle(n), equal_nan=True)


def test_out_and_inplace_forms():
    a, b, x = rand(4, 5), rand(4, 5), crand(4, 5)
    for fn in (torch.complex, torch.polar):
        check(lambda u, v, o: (fn(u, v, out=o), o)[1], a, b, torch.empty(0, dtype=torch.complex64))
        # A strided out= is written through; another complex dtype is refused, as on CPU.
        check(lambda u, v, o: (fn(u, v, out=o[:, ::2]), o)[1], a, b, torch.zeros(4, 10, dtype=torch.complex64))
        both_raise(RuntimeError, lambda u, v: fn(u, v, out=torch.empty(0, dtype=torch.complex128, device=u.device)),
                   a, b)
    check(lambda t, o: (torch.conj_physical(t, out=o), o)[1], x, torch.empty(0, dtype=torch.complex64))
    check(lambda t: t.clone().conj_physical_(), x)
    check(lambda t: t.clone().conj_physical_(), a)  # real: unchanged
    check(lambda t, o: (torch.angle(t, out=o), o)[1], x, torch.empty(0))
    check(lambda t, o: (torch.angle(t, out=o), o)[1], torch.arange(-2, 3), torch.empty(0, dtype=torch.float64))
    check(lambda t: torch.angle(t.t()), x)
