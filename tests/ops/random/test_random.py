"""Random ops on the tpu generator, multinomial, cauchy_ and geometric_
included (csrc/ops/random/random.cc). The stream differs from CPU's, so
these check distributions statistically (10k+ samples, bounds several
standard errors wide) plus determinism under seeding and generator state."""
import math

import pytest
import torch

from tests.helpers import TPU, both_raise

N = 20000


def _stats(x):
    x = x.cpu().double()
    return x.mean().item(), x.std().item()


# For N samples the mean's standard error is sigma/sqrt(N) (~0.007 for
# sigma=1); the bounds below are ~6 standard errors.

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float64])
def test_rand_uniform(dtype):
    x = torch.rand(N, dtype=dtype, device=TPU)
    assert x.dtype == dtype and x.device.type == "tpu"
    c = x.cpu()
    assert c.min() >= 0 and c.max() <= 1
    if dtype != torch.bfloat16:  # bf16 rounding can reach 1.0 exactly
        assert c.max() < 1
    m, s = _stats(x)
    assert abs(m - 0.5) < 0.02
    assert abs(s - 1 / math.sqrt(12)) < 0.02
    assert c.unique().numel() > (200 if dtype == torch.bfloat16 else N // 2)


def test_uniform_range_and_views():
    x = torch.empty(N, device=TPU).uniform_(-3, 5)
    c = x.cpu()
    assert c.min() >= -3 and c.max() < 5
    m, _ = _stats(x)
    assert abs(m - 1) < 0.15
    # in place into a strided view leaves the other elements alone
    base = torch.zeros(100, 4, device=TPU)
    base[:, 1::2].uniform_(1, 2)
    c = base.cpu()
    assert (c[:, 0::2] == 0).all()
    assert ((c[:, 1::2] >= 1) & (c[:, 1::2] < 2)).all()
    with pytest.raises(RuntimeError):
        torch.empty(3, device=TPU).uniform_(2, 1)
    with pytest.raises(NotImplementedError):
        torch.empty(3, dtype=torch.long, device=TPU).uniform_()


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_randn(dtype):
    x = torch.randn(N, dtype=dtype, device=TPU)
    assert x.dtype == dtype
    m, s = _stats(x)
    assert abs(m) < 0.05
    assert abs(s - 1) < 0.05
    c = x.cpu().float()
    assert torch.isfinite(c).all()
    # ~68% within one sigma
    frac = (c.abs() < 1).float().mean().item()
    assert abs(frac - 0.6827) < 0.02


def test_normal_variants():
    x = torch.empty(N, device=TPU).normal_(3.0, 2.0)
    m, s = _stats(x)
    assert abs(m - 3) < 0.1 and abs(s - 2) < 0.1
    mean = torch.zeros(2, N // 2, device=TPU)
    mean[1] = 10.0
    y = torch.normal(mean, 0.5)
    assert y.shape == mean.shape
    c = y.cpu()
    assert abs(c[0].mean().item()) < 0.05 and abs(c[1].mean().item() - 10) < 0.05
    assert abs(c[1].std().item() - 0.5) < 0.05
    std = torch.full((N,), 3.0, device=TPU)
    z = torch.normal(1.0, std)
    m, s = _stats(z)
    assert abs(m - 1) < 0.15 and abs(s - 3) < 0.15
    w = torch.normal(torch.zeros(N, device=TPU), torch.full((1,), 2.0, device=TPU))
    m, s = _stats(w)
    assert w.shape == (N,) and abs(m) < 0.1 and abs(s - 2) < 0.1
    f = torch.normal(2.0, 0.1, size=(N,), device=TPU)
    m, s = _stats(f)
    assert abs(m - 2) < 0.01 and abs(s - 0.1) < 0.01
    out = torch.empty(N, device=TPU)
    torch.normal(torch.zeros(N, device=TPU), 1.0, out=out)
    assert abs(_stats(out)[1] - 1) < 0.05
    with pytest.raises(RuntimeError):
        torch.empty(3, device=TPU).normal_(0, -1)
    with pytest.raises(RuntimeError):
        torch.normal(torch.zeros(3, device=TPU), -1.0)
    with pytest.raises(NotImplementedError):
        torch.empty(3, dtype=torch.long, device=TPU).normal_()


def test_randn_grad_free_and_like():
    x = torch.randn(4, 5, device=TPU, requires_grad=True)
    assert x.requires_grad and x.is_leaf
    assert torch.randn_like(x).shape == (4, 5)
    assert torch.rand_like(x).device.type == "tpu"


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.float32, torch.uint8])
def test_randint_bounds(dtype):
    x = torch.randint(-5 if dtype != torch.uint8 else 0, 7, (N,), dtype=dtype, device=TPU)
    c = x.cpu()
    lo = -5 if dtype != torch.uint8 else 0
    assert c.min() == lo and c.max() == 6
    counts = torch.bincount((c.long() - lo))
    expected = N / (7 - lo)
    assert (counts.double() - expected).abs().max() < 6 * math.sqrt(expected)


def test_random_variants():
    x = torch.empty(N, dtype=torch.int64, device=TPU).random_(10)
    c = x.cpu()
    assert c.min() == 0 and c.max() == 9
    b = torch.empty(N, dtype=torch.bool, device=TPU).random_().cpu()
    assert 0.45 < b.float().mean().item() < 0.55
    i8 = torch.empty(N, dtype=torch.int8, device=TPU).random_().cpu()
    assert i8.min() >= 0 and i8.max() == 127
    f = torch.empty(N, device=TPU).random_().cpu()
    assert f.min() >= 0 and f.max() <= 2 ** 24 and (f == f.round()).all()
    big = torch.empty(N, dtype=torch.int64, device=TPU).random_(-(2 ** 62), 2 ** 62).cpu()
    assert big.min() >= -(2 ** 62) and big.max() < 2 ** 62
    assert (big < 0).float().mean().item() > 0.4  # spread over the range
    full = torch.empty(N, dtype=torch.int64, device=TPU).random_(-(2 ** 63), None).cpu()
    assert (full < 0).any() and (full > 0).any()
    f2 = torch.empty(N, dtype=torch.int64, device=TPU).random_(100, None).cpu()
    assert f2.min() >= 100
    with pytest.raises(RuntimeError):
        torch.empty(3, device=TPU).random_(5, 2)
    with pytest.raises(RuntimeError):
        torch.empty(3, dtype=torch.int8, device=TPU).random_(0, 1000)


@pytest.mark.parametrize("p", [0.0, 0.2, 0.5, 1.0])
def test_bernoulli_float(p):
    x = torch.empty(N, device=TPU).bernoulli_(p).cpu()
    assert ((x == 0) | (x == 1)).all()
    assert abs(x.mean().item() - p) < 0.02


def test_bernoulli_tensor_and_functional():
    p = torch.empty(2, N // 2, device=TPU)
    p[0] = 0.1
    p[1] = 0.9
    y = torch.bernoulli(p).cpu()
    assert y.dtype == torch.float32 and y.shape == (2, N // 2)
    assert abs(y[0].mean().item() - 0.1) < 0.02 and abs(y[1].mean().item() - 0.9) < 0.02
    # p broadcast to self, self of another dtype
    z = torch.empty(N, 2, dtype=torch.int64, device=TPU).bernoulli_(torch.tensor([0.0, 1.0], device=TPU)).cpu()
    assert (z[:, 0] == 0).all() and (z[:, 1] == 1).all()
    # 0-dim cpu p works as a scalar
    s = torch.empty(N, device=TPU).bernoulli_(torch.tensor(0.3)).cpu()
    assert abs(s.mean().item() - 0.3) < 0.02
    q = torch.bernoulli(torch.full((N,), 0.5, device=TPU), 0.25).cpu()
    assert abs(q.mean().item() - 0.25) < 0.02
    out = torch.empty(0, device=TPU)
    torch.bernoulli(torch.full((N,), 0.7, device=TPU), out=out)
    assert abs(out.cpu().mean().item() - 0.7) < 0.02
    with pytest.raises(RuntimeError):
        torch.empty(3, device=TPU).bernoulli_(1.5)
    with pytest.raises(RuntimeError):
        torch.empty(3, device=TPU).bernoulli_(torch.rand(4, device=TPU))


def test_dropout_train_mode_uses_bernoulli():
    x = torch.ones(N, device=TPU)
    try:
        y = torch.nn.functional.dropout(x, 0.25, training=True).cpu()
    except NotImplementedError:
        pytest.skip("native_dropout is not implemented yet")
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.75) < 0.02
    assert torch.allclose(y[y != 0], torch.tensor(1 / 0.75))


def test_exponential_and_log_normal():
    x = torch.empty(N, device=TPU).exponential_(2.0).cpu()
    assert (x >= 0).all() and torch.isfinite(x).all()
    assert abs(x.mean().item() - 0.5) < 0.03
    with pytest.raises(RuntimeError):
        torch.empty(3, device=TPU).exponential_(-1)
    with pytest.raises(RuntimeError):
        torch.empty(3, dtype=torch.long, device=TPU).exponential_()
    ln = torch.empty(N, device=TPU).log_normal_(0.0, 0.5).cpu()
    assert (ln > 0).all()
    assert abs(ln.log().mean().item()) < 0.03 and abs(ln.log().std().item() - 0.5) < 0.03


def test_randperm():
    for n in [1, 5, 1000]:
        p = torch.randperm(n, device=TPU)
        assert p.dtype == torch.int64 and p.device.type == "tpu"
        assert torch.equal(p.cpu().sort().values, torch.arange(n))
    p = torch.randperm(1000, device=TPU, dtype=torch.int32).cpu()
    assert torch.equal(p.sort().values, torch.arange(1000, dtype=torch.int32))
    assert not torch.equal(p, torch.arange(1000, dtype=torch.int32))
    assert torch.randperm(0, device=TPU).shape == (0,)
    with pytest.raises(RuntimeError):
        torch.randperm(300, dtype=torch.int8, device=TPU)


# --- seeding and state ---------------------------------------------------------------

def _draw():
    return torch.cat([torch.rand(100, device=TPU).cpu(), torch.randn(100, device=TPU).cpu(),
                      torch.randint(0, 1000, (100,), device=TPU).cpu().float()])


def test_manual_seed_reproducible_and_calls_differ():
    torch.manual_seed(1234)
    a = _draw()
    torch.manual_seed(1234)
    b = _draw()
    assert torch.equal(a, b)
    torch.manual_seed(4321)
    c = _draw()
    assert not torch.equal(a, c)
    x = torch.rand(1000, device=TPU).cpu()
    y = torch.rand(1000, device=TPU).cpu()
    assert not torch.equal(x, y)
    # successive streams must not be shifted copies of each other
    for k in range(1, 8):
        assert not torch.equal(x[k:], y[:-k])
        assert not torch.equal(y[k:], x[:-k])
    assert abs(torch.corrcoef(torch.stack([x, y]))[0, 1].item()) < 0.15


def test_tpu_seed_functions():
    torch.tpu.manual_seed(7)
    assert torch.tpu.initial_seed() == 7
    a = torch.rand(10, device=TPU).cpu()
    torch.tpu.manual_seed_all(7)
    assert torch.equal(torch.rand(10, device=TPU).cpu(), a)


def test_rng_state_roundtrip():
    torch.manual_seed(0)
    state = torch.tpu.get_rng_state()
    a = torch.randn(50, device=TPU).cpu()
    torch.rand(3, device=TPU)
    torch.tpu.set_rng_state(state)
    b = torch.randn(50, device=TPU).cpu()
    assert torch.equal(a, b)


def test_explicit_generator():
    g = torch.Generator(device="tpu")
    g.manual_seed(99)
    a = torch.rand(100, device=TPU, generator=g).cpu()
    torch.rand(5, device=TPU)  # the default generator doesn't affect g
    g.manual_seed(99)
    b = torch.rand(100, device=TPU, generator=g).cpu()
    assert torch.equal(a, b)
    g2 = torch.Generator(device="tpu").manual_seed(99)
    assert torch.equal(torch.empty(100, device=TPU).uniform_(generator=g2).cpu(), a)
    st = g.get_state()
    n1 = torch.randn(10, device=TPU, generator=g).cpu()
    g.set_state(st)
    assert torch.equal(torch.randn(10, device=TPU, generator=g).cpu(), n1)
    with pytest.raises(RuntimeError):
        torch.rand(3, device=TPU, generator=torch.Generator())  # a CPU generator


def test_random_ops_share_one_executable_across_seeds():
    import torch_tpu

    torch.rand(333, device=TPU)
    before = torch_tpu.debug.metrics()["compiles"]
    for s in range(3):
        torch.manual_seed(s)
        torch.rand(333, device=TPU)
    assert torch_tpu.debug.metrics()["compiles"] == before


# --- multinomial ----------------------------------------------------------------------


def test_multinomial_with_replacement():
    p = torch.tensor([[0.1, 0.0, 0.6, 0.3], [1.0, 1.0, 0.0, 2.0]], device=TPU)
    torch.manual_seed(1)
    s = torch.multinomial(p, 4000, replacement=True)
    torch.manual_seed(1)
    s2 = torch.multinomial(p, 4000, replacement=True)
    assert torch.equal(s.cpu(), s2.cpu())
    assert s.shape == (2, 4000) and s.dtype == torch.long
    s = s.cpu()
    for r in range(2):
        freq = torch.bincount(s[r], minlength=4).double() / 4000
        expect = (p[r] / p[r].sum()).cpu().double()
        assert (freq - expect).abs().max() < 0.03
        assert freq[p[r].cpu() == 0].sum() == 0


def test_multinomial_without_replacement():
    p = torch.tensor([0.5, 0.0, 0.2, 0.3], device=TPU)
    s = torch.multinomial(p, 3)
    assert sorted(s.cpu().tolist()) == [0, 2, 3]  # all non-zero categories, each once
    torch.manual_seed(3)
    firsts = torch.multinomial(p.expand(3000, 4), 1).cpu().flatten()
    freq = torch.bincount(firsts, minlength=4).double() / 3000
    assert (freq - torch.tensor([0.5, 0.0, 0.2, 0.3], dtype=torch.double)).abs().max() < 0.03
    rows = torch.multinomial(torch.ones(5, 6, device=TPU), 6).cpu()
    assert all(sorted(r.tolist()) == list(range(6)) for r in rows)


def test_multinomial_errors():
    p = torch.ones(3, device=TPU)
    with pytest.raises(RuntimeError):
        torch.multinomial(p, 4)
    with pytest.raises(RuntimeError):
        torch.multinomial(p, 0)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.ones(2, 2, 2, device=TPU), 1)
    with pytest.raises(RuntimeError):
        torch.multinomial(torch.ones(3, dtype=torch.long, device=TPU), 1)


# --- random samplers -------------------------------------------------------------------

BAD_SAMPLER_ARGS = {
    "bernoulli_p": lambda d: torch.empty(3, device=d).bernoulli_(2.0),
    "cauchy_sigma": lambda d: torch.empty(3, device=d).cauchy_(0, -1),
    "exponential_lambda": lambda d: torch.empty(3, device=d).exponential_(-1),
    "geometric_p": lambda d: torch.empty(3, device=d).geometric_(0),
    "log_normal_std": lambda d: torch.empty(3, device=d).log_normal_(0, -1),
    "normal_std": lambda d: torch.empty(3, device=d).normal_(0, -1),
    "random_range": lambda d: torch.empty(3, device=d).random_(5, 2),
    "uniform_range": lambda d: torch.empty(3, device=d).uniform_(2, 1),
    "dropout_p": lambda d: torch.nn.functional.dropout(torch.ones(3, device=d), p=1.5),
}


@pytest.mark.parametrize("case", BAD_SAMPLER_ARGS)
def test_bad_sampler_arguments_raise_cpus_error(case):
    # The same exception type and the same message as CPU, word for word.
    fn = BAD_SAMPLER_ARGS[case]
    with pytest.raises(Exception) as cpu:
        fn("cpu")
    with pytest.raises(type(cpu.value)) as tpu:
        fn(TPU)
    assert str(tpu.value) == str(cpu.value)


def test_cauchy_geometric():
    torch.manual_seed(0)
    c = torch.empty(4000, device=TPU).cauchy_(1.0, 2.0).cpu()
    assert torch.isfinite(c).all()
    assert abs(c.median().item() - 1.0) < 0.3
    g = torch.empty(4000, device=TPU).geometric_(0.25).cpu()
    assert (g >= 1).all() and torch.all(g == g.round())
    assert abs(g.mean().item() - 4.0) < 0.4
    gi = torch.empty(100, dtype=torch.int64, device=TPU).geometric_(0.5).cpu()
    assert (gi >= 1).all()
    b = torch.empty(10, dtype=torch.bfloat16, device=TPU).cauchy_()
    assert b.dtype == torch.bfloat16
    both_raise(RuntimeError, lambda x: x.geometric_(1.5), torch.empty(3))
    both_raise(RuntimeError, lambda x: x.cauchy_(0.0, -1.0), torch.empty(3))


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_normal_out_forms_follow_cpu():
    # normal(Tensor, float) and normal(Tensor, Tensor) with out=: out takes
    # the result's shape; a wrong dtype is CPU's error.
    mean = torch.zeros(2, 300)
    std = torch.full((300,), 2.0)
    for args in [(mean, 2.0), (mean, std)]:
        out = torch.empty(1, device=TPU)
        torch.normal(*[a.to(TPU) if isinstance(a, torch.Tensor) else a for a in args], out=out)
        assert out.shape == (2, 300)
        assert abs(out.cpu().std().item() - 2.0) < 0.15
        both_raise(RuntimeError, lambda o, *a: torch.normal(*a, out=o), torch.empty(0, dtype=torch.int64), *args)


def test_multinomial_and_normal_out_forms():
    # out= forms: the same draws as the functional form under the same seed;
    # multinomial's out= must be int64, as on CPU.
    p = torch.tensor([[0.1, 0.6, 0.3], [0.5, 0.5, 0.0]], device=TPU)
    torch.manual_seed(7)
    expected = torch.multinomial(p, 5, replacement=True).cpu()
    out = torch.empty(0, dtype=torch.long, device=TPU)
    torch.manual_seed(7)
    assert torch.multinomial(p, 5, replacement=True, out=out) is out
    torch.testing.assert_close(out.cpu(), expected)
    for dev in ("cpu", TPU):
        with pytest.raises(RuntimeError):
            torch.multinomial(p.to(dev), 2, out=torch.empty(0, dtype=torch.int32, device=dev))
    std = torch.tensor([0.5, 1.0, 2.0], device=TPU)
    torch.manual_seed(3)
    expected = torch.normal(1.0, std).cpu()
    o = torch.empty(0, device=TPU)
    torch.manual_seed(3)
    assert torch.normal(1.0, std, out=o) is o
    torch.testing.assert_close(o.cpu(), expected)


# Every sampler that fills a tensor, in its three forms: (in-place call,
# functional op, out= op), each taking the tensor and the same arguments.
A = torch.ops.aten
FILLS = {
    "uniform": (lambda t: t.uniform_(2, 3), lambda t: A.uniform(t, 2, 3), lambda t, o: A.uniform.out(t, 2, 3, out=o)),
    "normal": (lambda t: t.normal_(1, 2), lambda t: A.normal_functional(t, 1, 2),
               lambda t, o: A.normal.out(t, 1, 2, out=o)),
    "log_normal": (lambda t: t.log_normal_(0, 0.5), lambda t: A.log_normal(t, 0, 0.5),
                   lambda t, o: A.log_normal.out(t, 0, 0.5, out=o)),
    "exponential": (lambda t: t.exponential_(2), lambda t: A.exponential(t, 2),
                    lambda t, o: A.exponential.out(t, 2, out=o)),
    "cauchy": (lambda t: t.cauchy_(), lambda t: A.cauchy(t), lambda t, o: A.cauchy.out(t, out=o)),
    "geometric": (lambda t: t.geometric_(0.3), lambda t: A.geometric(t, 0.3),
                  lambda t, o: A.geometric.out(t, 0.3, out=o)),
    "random": (lambda t: t.random_(), lambda t: A.random(t), lambda t, o: A.random.out(t, out=o)),
    "random.from": (lambda t: t.random_(3, 9), lambda t: getattr(A.random, "from")(t, 3, 9),
                    lambda t, o: A.random.from_out(t, 3, 9, out=o)),
    "random.to": (lambda t: t.random_(9), lambda t: A.random.to(t, 9), lambda t, o: A.random.to_out(t, 9, out=o)),
    "bernoulli.p": (lambda t: t.bernoulli_(0.3), lambda t: A.bernoulli.p(t, 0.3),
                    lambda t, o: A.bernoulli.float_out(t, 0.3, out=o)),
    "bernoulli.Tensor": (lambda t: t.bernoulli_(torch.full((7,), 0.3, device=t.device)),
                         lambda t: A.bernoulli.Tensor(t, torch.full((7,), 0.3, device=t.device)),
                         lambda t, o: A.bernoulli.Tensor_out(t, torch.full((7,), 0.3, device=t.device), out=o)),
}


@pytest.mark.parametrize("name", FILLS)
@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
def test_fill_forms_draw_the_same_values(name):
    # The functional and out= forms draw exactly what the in-place form draws
    # under the same seed, with self's shape, dtype and layout (a transposed
    # self gives a transposed result, as empty_like does on CPU); out= of
    # another dtype is CPU's error.
    inplace, functional, out_form = FILLS[name]
    self = torch.zeros(7, 300, device=TPU).t()
    torch.manual_seed(11)
    expected = inplace(self.clone().t().contiguous().t()).cpu()
    torch.manual_seed(11)
    r = functional(self)
    assert r.shape == self.shape and r.dtype == self.dtype and r.stride() == self.stride()
    torch.testing.assert_close(r.cpu(), expected, rtol=0, atol=0)
    assert (self.cpu() == 0).all()  # the functional form leaves self alone
    o = torch.empty(0, device=TPU)
    torch.manual_seed(11)
    assert out_form(self, o) is o
    assert o.shape == self.shape
    torch.testing.assert_close(o.cpu(), expected, rtol=0, atol=0)
    both_raise(RuntimeError, out_form, torch.zeros(7, 300).t(), torch.empty(0, dtype=torch.float64))


@pytest.mark.parametrize("name", ["uniform", "normal", "log_normal", "exponential", "cauchy"])
def test_fill_forms_reject_integer_self_as_cpu(name):
    inplace, functional, out_form = FILLS[name]
    x = torch.zeros(3, dtype=torch.int64)
    for fn in (inplace, functional):
        with pytest.raises(Exception) as cpu:
            fn(x.clone())
        with pytest.raises(type(cpu.value)) as tpu:
            fn(x.to(TPU))
        assert str(tpu.value) == str(cpu.value)


def test_bernoulli_of_probabilities_out_takes_any_dtype():
    # bernoulli(p, out=) writes the 0/1 draws into an out of any dtype, as on
    # CPU; an integer p is CPU's NotImplementedError.
    p = torch.full((N,), 0.3, device=TPU)
    for dtype in (torch.int64, torch.bool, torch.float64):
        o = torch.empty(0, dtype=dtype, device=TPU)
        assert torch.bernoulli(p, out=o) is o
        assert o.dtype == dtype and o.shape == (N,)
        assert abs(o.cpu().double().mean().item() - 0.3) < 0.02
    both_raise(NotImplementedError, torch.bernoulli, torch.ones(3, dtype=torch.int64))
    both_raise(NotImplementedError, lambda t, q: t.bernoulli_(q), torch.zeros(3), torch.ones(3, dtype=torch.int64))
