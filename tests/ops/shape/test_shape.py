"""Shape ops against PyTorch CPU (csrc/ops/shape/shape.cc): cat/stack,
flip/roll/repeat, triu/tril, unfold's gradient, channel_shuffle and
pixel_shuffle."""
import pytest
import torch
import torch.nn.functional as F

from tests.helpers import TPU, both_raise, check

DTYPES = [torch.float32, torch.bfloat16, torch.int32, torch.int64, torch.bool]


def rand(*shape, dtype=torch.float32):
    if dtype == torch.bool:
        return torch.rand(*shape) > 0.5
    if dtype.is_floating_point:
        return torch.randn(*shape).to(dtype)
    return torch.randint(-10, 10, shape, dtype=dtype)


FLOATS = [torch.float32, torch.bfloat16]


# --- cat / stack / flip / roll / repeat / triu / tril ---------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_cat_dtypes(dtype):
    check(lambda a, b: torch.cat([a, b], 1), rand(2, 3, dtype=dtype), rand(2, 2, dtype=dtype))


def test_cat_grad_promote_and_empty():
    check(lambda a, b: torch.cat([a, b]), torch.randn(2, 3), torch.randn(1, 3), grad=True)
    check(lambda a, b: torch.cat([a, b], -1), torch.randn(2, 3), torch.randint(0, 5, (2, 2)))
    check(lambda a, b, c: torch.cat([a, b, c]), torch.randn(2, 3), torch.empty(0), torch.randn(1, 3))
    check(lambda a, b: torch.cat([a.t(), b[1:]]), torch.randn(3, 2), torch.randn(3, 3))


def test_cat_out_into_view_and_errors():
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    big = torch.zeros(4, 5)
    big[:, 1:4] = torch.cat([a, b])
    tbig = torch.zeros(4, 5, device=TPU)
    torch.cat([a.to(TPU), b.to(TPU)], out=tbig[:, 1:4])
    torch.testing.assert_close(tbig.cpu(), big)
    with pytest.raises(RuntimeError):
        torch.cat([torch.randn(2, 3).to(TPU), torch.randn(2, 4).to(TPU)])
    with pytest.raises(IndexError):
        torch.cat([torch.randn(2, 3).to(TPU)], 3)


def test_stack():
    check(lambda a, b: torch.stack([a, b], 1), torch.randn(2, 3), torch.randn(2, 3), grad=True)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_flip_roll_repeat(dtype):
    x = rand(3, 4, dtype=dtype)
    check(lambda a: a.flip(0, 1), x)
    check(lambda a: a[:, ::2].flip(-1), x)
    check(lambda a: a.roll(1, 0), x)
    check(lambda a: a.roll((2, -1), (1, 0)), x)
    check(lambda a: a.roll(5), x)
    check(lambda a: a.repeat(2, 1, 3), x)


def test_flip_roll_grad():
    check(lambda a: a.flip(1).roll(1, 0), torch.randn(3, 4), grad=True)
    with pytest.raises(RuntimeError):
        torch.randn(3).to(TPU).flip(0, 0)


@pytest.mark.parametrize("dtype", DTYPES)
def test_triu_tril(dtype):
    x = rand(2, 4, 5, dtype=dtype)
    for k in (-1, 0, 2):
        check(lambda a: a.triu(k), x)
        check(lambda a: a.tril(k), x)
    check(lambda a: a.t().tril(), rand(5, 4, dtype=dtype))


def test_triu_tril_inplace_out_grad():
    check(lambda a: a.clone().triu_(1), torch.randn(4, 4), grad=True)
    check(lambda a: a.clone().tril_(-1), torch.randn(4, 4))
    x = torch.randn(3, 3)
    big = torch.zeros(3, 6)
    torch.tril(x, out=big[:, ::2])
    tbig = torch.zeros(3, 6, device=TPU)
    torch.tril(x.to(TPU), out=tbig[:, ::2])
    torch.testing.assert_close(tbig.cpu(), big)
    with pytest.raises(RuntimeError):
        torch.randn(3).to(TPU).triu()


# --- pixel_shuffle (composite) --------------------------------------------------------

def test_pixel_shuffle():
    x = torch.randn(2, 8, 3, 3)
    check(lambda x: F.pixel_shuffle(x, 2), x, grad=True)
    check(lambda x: F.pixel_unshuffle(x, 3), torch.randn(1, 2, 6, 9), grad=True)
    check(lambda x: F.pixel_shuffle(x, 2), x.transpose(2, 3).bfloat16())
    with pytest.raises(RuntimeError):
        F.pixel_shuffle(torch.randn(1, 3, 2, 2, device=TPU), 2)


# --- unfold backward -----------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_unfold_grad(dtype):
    x = torch.randn(4, 9, 3).to(dtype)
    for dim, size, step in [(1, 3, 2), (1, 2, 3), (0, 4, 1), (-1, 1, 1), (1, 9, 1)]:
        check(lambda x: x.unfold(dim, size, step), x, grad=True)
        check(lambda x: torch.unfold_copy(x, dim, size, step), x, grad=True)
    check(lambda x: x.unfold(0, 1, 1), torch.tensor(1.5).to(dtype), grad=True)
    check(lambda x: x.unfold(0, 2, 2), torch.randn(6, 4).t().to(dtype), grad=True)


# --- channel_shuffle -----------------------------------------------------

@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.bool])
def test_channel_shuffle(dtype):
    x = (torch.randn(2, 6, 3, 2) * 5).to(dtype)
    check(lambda x: F.channel_shuffle(x, 3), x, grad=dtype.is_floating_point)
    check(lambda x: F.channel_shuffle(x.transpose(2, 3), 2), x, grad=dtype.is_floating_point)
    both_raise(RuntimeError, lambda x: F.channel_shuffle(x, 4), x)


def test_flip_roll_triu_results_take_cpus_layout():
    # flip keeps self's layout (CPU allocates empty_like(self)); roll and
    # triu/tril give contiguous results.
    x = torch.randn(3, 4).t()
    for fn in (lambda a: a.flip(0), lambda a: a.flip(0, 1), lambda a: a.roll(1, 0), lambda a: a.triu(),
               lambda a: a.tril(1)):
        e, a = fn(x), fn(x.to(TPU))
        assert a.stride() == e.stride(), (a.stride(), e.stride())
        torch.testing.assert_close(a.cpu(), e)
    # In place on a transposed view writes through the view.
    check(lambda a: (a.t().triu_(1), a)[1], torch.randn(4, 4))
    check(lambda a: (a[:, 1:].tril_(), a)[1], torch.randn(4, 5))
    both_raise(RuntimeError, lambda a: a.triu_(), torch.randn(4))
