"""Indexing ops against PyTorch CPU (csrc/ops/index/indexing.cc): index_select,
gather/scatter, index_add/copy/fill, embedding, masked ops, nonzero and
nonzero_static, advanced indexing, one_hot, and the TORCH_TPU_DEBUG_CHECKS
bounds checks."""
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


# --- index_select / gather / scatter ----------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_index_select(dtype):
    x = rand(4, 5, dtype=dtype)
    idx = torch.tensor([3, 0, 0, 2])
    check(lambda a, i: a.index_select(0, i), x, idx)
    check(lambda a, i: a.index_select(1, i), x, idx.int())
    check(lambda a, i: a[1:, ::2].index_select(-1, i), x, torch.tensor([2, 1]))


def test_index_select_grad_out_errors():
    check(lambda a, i: a.index_select(0, i), torch.randn(4, 3), torch.tensor([1, 1, 3]), grad=True)
    x, idx = torch.randn(4, 3), torch.tensor([2, 0])
    big = torch.zeros(4, 3)
    torch.index_select(x, 0, idx, out=big[1:3])
    tbig = torch.zeros(4, 3, device=TPU)
    torch.index_select(x.to(TPU), 0, idx.to(TPU), out=tbig[1:3])
    torch.testing.assert_close(tbig.cpu(), big)
    with pytest.raises(IndexError):
        x.to(TPU).index_select(0, torch.tensor([[0]], device=TPU))
    both_raise(RuntimeError, lambda a, i: a.index_select(0, i), x, torch.tensor([0.0]))  # CPU's type


@pytest.mark.parametrize("dtype", DTYPES)
def test_gather_scatter_dtypes(dtype):
    x = rand(3, 4, dtype=dtype)
    idx = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    check(lambda a, i: a.gather(0, i), x, idx)
    check(lambda a, i: a.gather(1, i[:, :3]), x, idx)
    src = rand(2, 4, dtype=dtype)
    uniq = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 1]])
    check(lambda a, i, s: a.scatter(0, i, s), x, uniq, src)
    check(lambda a, i: a.scatter(1, i, 1), x, torch.tensor([[0, 3], [3, 0]]))


def test_gather_scatter_grad():
    idx = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]])
    check(lambda a, i: a.gather(0, i), torch.randn(3, 4), idx, grad=True)
    check(lambda a, i: a.t().gather(1, i[:, :3]), torch.randn(4, 3), idx, grad=True)
    check(lambda a, i, s: a.scatter_add(0, i, s), torch.randn(3, 4), idx, torch.randn(2, 4), grad=True)
    check(lambda a, i, s: a.scatter(0, i, s), torch.randn(3, 4), torch.tensor([[0, 1, 2, 0]]), torch.randn(1, 4),
          grad=True)


def test_scatter_reduce_variants():
    idx = torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0], [0, 0, 0, 0]])
    x, s = torch.randn(3, 4), torch.randn(3, 4)
    check(lambda a, i, s: a.scatter(0, i, s, reduce="add"), x, idx, s)
    check(lambda a, i, s: a.scatter(0, i, s, reduce="multiply"), x, idx, s)
    check(lambda a, i: a.scatter(0, i, 2.0, reduce="multiply"), x, idx)
    check(lambda a, i, s: a.clone().scatter_add_(0, i, s), x, idx, s)
    for red in ("sum", "prod", "mean", "amax", "amin"):
        for inc in (True, False):
            check(lambda a, i, s: a.scatter_reduce(0, i, s, red, include_self=inc), x, idx, s)
    xi, si = torch.randint(-9, 9, (3, 4)), torch.randint(-9, 9, (3, 4))
    for red in ("sum", "mean", "amax"):
        check(lambda a, i, s: a.scatter_reduce(0, i, s, red, include_self=False), xi, idx, si)
    check(lambda a, i, s: a.scatter_add(0, i, s), xi, idx, si)
    with pytest.raises(RuntimeError):
        x.to(TPU).scatter(0, idx.to(TPU), s.to(TPU), reduce="max")


def test_gather_errors_and_out_of_range():
    x = torch.randn(3).to(TPU)
    with pytest.raises(RuntimeError):
        x.gather(0, torch.tensor([0.0], device=TPU))
    with pytest.raises(RuntimeError):
        x.gather(0, torch.tensor([[0]], device=TPU))
    # Out of range without debug checks: clamped / dropped, never a crash.
    x.gather(0, torch.tensor([7], device=TPU)).cpu()
    x.clone().scatter_(0, torch.tensor([7], device=TPU), 1.0).cpu()
    x.index_select(0, torch.tensor([7], device=TPU)).cpu()


def test_debug_checks_subprocess():
    import os
    import subprocess
    import sys
    code = """
import torch, pytest
x = torch.randn(3).to("tpu")
for f, exc, msg in [
    (lambda: x.gather(0, torch.tensor([5], device='tpu')), RuntimeError, 'index 5 is out of bounds for dimension 0 with size 3'),
    (lambda: x[torch.tensor([5], device='tpu')], IndexError, 'index 5 is out of bounds for dimension 0 with size 3'),
    (lambda: x[torch.tensor([-4], device='tpu')], IndexError, 'index -4 is out of bounds'),
    (lambda: x.index_select(0, torch.tensor([3], device='tpu')), IndexError, 'index out of range in self'),
    (lambda: torch.nn.functional.embedding(torch.tensor([7], device='tpu'), torch.randn(3, 2).to("tpu")), IndexError, 'index out of range in self'),
    (lambda: torch.nn.functional.cross_entropy(torch.ones(2, 3, device='tpu'), torch.tensor([0, 5], device='tpu')), IndexError, 'Target 5 is out of bounds.'),
    (lambda: torch.nn.functional.nll_loss(torch.ones(2, 3, 4, 4, device='tpu'), torch.full((2, 4, 4), -2, device='tpu')), IndexError, 'Target -2 is out of bounds.'),
]:
    with pytest.raises(exc, match=msg):
        f()
assert x[torch.tensor([-1], device='tpu')].item() == x[-1].item()
# ignore_index (-100 by default) is not a class: it passes the check, as on CPU
logits, t = torch.randn(3, 4), torch.tensor([0, -100, 3])
torch.testing.assert_close(torch.nn.functional.cross_entropy(logits.to('tpu'), t.to('tpu')).cpu(),
                           torch.nn.functional.cross_entropy(logits, t))

print('OK')
"""
    env = dict(os.environ, TORCH_TPU_DEBUG_CHECKS="1")
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout, r.stdout + r.stderr


# --- index_add / index_copy / index_fill / embedding --------------------------------

def test_index_add_copy_fill():
    x, idx = torch.randn(5, 3), torch.tensor([4, 0, 4])
    src = torch.randn(3, 3)
    check(lambda a, i, s: a.index_add(0, i, s, alpha=2), x, idx, src, grad=True)
    check(lambda a, i, s: a.clone().index_add_(1, i, s), x, torch.tensor([2, 0]), torch.randn(5, 2))
    check(lambda a, i, s: a.index_copy(0, i, s), x, torch.tensor([4, 0, 2]), src, grad=True)
    check(lambda a, i: a.clone().index_fill_(1, i, -1.5), x, torch.tensor([0, 2]))
    check(lambda a, i: a.index_fill(0, i, torch.tensor(3.0)), x, torch.tensor([-1, 1]))
    xi = torch.randint(0, 5, (5, 3))
    check(lambda a, i, s: a.index_add(0, i, s), xi, idx, torch.randint(0, 5, (3, 3)))


def test_embedding():
    w = torch.randn(10, 4)
    idx = torch.tensor([[1, 2, 1], [9, 0, 2]])
    check(lambda w, i: torch.nn.functional.embedding(i, w), w, idx, grad=True)
    check(lambda w, i: torch.nn.functional.embedding(i, w, padding_idx=2), w, idx, grad=True)
    check(lambda w, i: torch.nn.functional.embedding(i, w, scale_grad_by_freq=True), w, idx, grad=True)


# --- masked ops / nonzero ---------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_masked_fill(dtype):
    x, m = rand(3, 4, dtype=dtype), torch.rand(3, 4) > 0.5
    v = True if dtype == torch.bool else 3
    check(lambda a, m: a.masked_fill(m, v), x, m)
    check(lambda a, m: a.clone().masked_fill_(m[0], v), x, m)
    check(lambda a, m: a.masked_fill(m, torch.tensor(v)), x, m)


@pytest.mark.parametrize("self_dtype,value", [
    (torch.int8, torch.tensor(300)), (torch.int8, torch.tensor(300.5)), (torch.uint8, torch.tensor(256)),
    (torch.int32, torch.tensor(float("nan"))), (torch.float16, torch.tensor(1e10)),
    (torch.bfloat16, torch.tensor(3.4e38)), (torch.int64, torch.tensor(float("inf"), dtype=torch.float64))])
def test_masked_fill_tensor_value_overflow(self_dtype, value):
    # CPU fills with value.item() converted to self's dtype, which checks overflow.
    m = torch.tensor([True, False, True])
    for f in (lambda a, m, v: a.masked_fill(m, v), lambda a, m, v: a.masked_fill_(m, v)):
        both_raise(RuntimeError, f, torch.zeros(3, dtype=self_dtype), m, value)
        with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
            f(torch.zeros(3, dtype=self_dtype, device=TPU), m.to(TPU), value.to(TPU))


def test_masked_fill_tensor_value_in_range():
    # values that fit (including uint8's wrap of negative integers) fill as on CPU
    m = torch.tensor([True, False, True])
    for dt, v in [(torch.int8, torch.tensor(-128)), (torch.uint8, torch.tensor(-1)), (torch.bool, torch.tensor(5)),
                  (torch.float16, torch.tensor(float("inf"))), (torch.int16, torch.tensor(2.9)),
                  (torch.float32, torch.tensor(2, dtype=torch.int8))]:
        check(lambda a, m, v: a.masked_fill(m, v), torch.zeros(3, dtype=dt), m, v)


def test_masked_fill_grad_views_errors():
    m = torch.rand(4, 3) > 0.5
    check(lambda a, m: a.t().masked_fill(m, -1.0), torch.randn(3, 4), m, grad=True)
    x = torch.zeros(4, 4)
    x[1:3].masked_fill_(torch.tensor([True, False, True, False]), 2.0)
    t = torch.zeros(4, 4, device=TPU)
    t[1:3].masked_fill_(torch.tensor([True, False, True, False], device=TPU), 2.0)
    torch.testing.assert_close(t.cpu(), x)
    with pytest.raises(RuntimeError):
        t.masked_fill_(torch.ones(4, 4, device=TPU), 1.0)
    with pytest.raises(RuntimeError):
        t.masked_fill_(torch.ones(4, 4, dtype=torch.bool, device=TPU), torch.ones(2, device=TPU))
    with pytest.raises(RuntimeError):
        t.masked_fill_(torch.ones(5, dtype=torch.bool, device=TPU), 1.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int32, torch.bool])
def test_nonzero_masked_select(dtype):
    x = rand(3, 5, dtype=dtype)
    check(lambda a: a.nonzero(), x)
    check(lambda a: torch.nonzero(a, as_tuple=True), x)
    check(lambda a: a[:, 1:].nonzero(), x)
    check(lambda a: a.nonzero(), torch.zeros(2, 3, dtype=dtype))
    m = torch.rand(3, 5) > 0.5
    check(lambda a, m: a.masked_select(m), x, m)
    check(lambda a, m: a.masked_select(m[0]), x, m)


def test_masked_select_scatter_grad():
    m = torch.rand(3, 5) > 0.5
    check(lambda a, m: a.masked_select(m), torch.randn(3, 5), m, grad=True)
    check(lambda a, m, s: a.masked_scatter(m, s), torch.randn(3, 5), m, torch.randn(20), grad=True)
    check(lambda a, m, s: a.masked_scatter(m[1], s), torch.randn(3, 5), m, torch.randn(3, 6))
    with pytest.raises(RuntimeError):
        torch.randn(3).to(TPU).masked_select(torch.ones(3, device=TPU))


# --- advanced indexing --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_index_tensor(dtype):
    x = rand(4, 5, 6, dtype=dtype)
    i = torch.tensor([3, 0, -1])
    j = torch.tensor([[1], [4]])
    check(lambda a: a[i], x)
    check(lambda a: a[:, i], x)
    check(lambda a: a[:, i, 1:4], x)
    check(lambda a: a[i, :, j], x)           # non-adjacent: broadcast dims first
    check(lambda a: a[:, j, i], x)           # adjacent in the middle
    check(lambda a: a[None, 1, j], x)
    check(lambda a: a[..., i], x)
    check(lambda a: a[x.flatten()[:4].view(4) != x.flatten()[:4].view(4)], x[:, 0, 0].clone())


def test_index_bool_masks_and_grad():
    x = torch.randn(4, 5)
    m = torch.tensor([True, False, True, True])
    check(lambda a: a[m], x, grad=True)
    check(lambda a: a[:, m.repeat(2)[:5]], x)
    check(lambda a, m: a[m], x, x > 0, grad=True)
    check(lambda a: a[m, 2:], x)
    check(lambda a: a[torch.tensor([0, 0, 3]), torch.tensor([1, 1, 2])], x, grad=True)
    check(lambda a: a.t()[torch.tensor([1, 4])], x, grad=True)
    check(lambda a: a[m.cpu()], x)  # CPU index into a tpu tensor
    t = x.to(TPU)
    with pytest.raises(IndexError):
        t[torch.tensor([True, False], device=TPU)]
    with pytest.raises(IndexError):
        t[torch.tensor([0, 1], device=TPU), torch.tensor([0, 1, 2], device=TPU)]
    with pytest.raises(IndexError):
        t[0, 0, torch.tensor([0], device=TPU)]
    with pytest.raises(IndexError):
        t[torch.tensor([0.5], device=TPU)]


def test_index_put():
    x = torch.randn(4, 5)
    check(lambda a: a.clone().index_put_((torch.tensor([1, 3]),), torch.tensor(2.0)), x)
    check(lambda a, v: a.index_put((torch.tensor([0, 0, 2]), torch.tensor([1, 1, -1])), v, accumulate=True),
          x, torch.randn(3), grad=True)
    check(lambda a, v: a.index_put((torch.tensor([2, 0]),), v), x, torch.randn(2, 5), grad=True)

    def setitem(a, v):
        a = a.clone()
        a[:, torch.tensor([4, 1])] = v
        a[a.detach().cpu().gt(1).to(a.device)] = 0
        a[torch.tensor([True, False, True, False]), 1:3] = -1
        return a
    check(setitem, x, torch.randn(4, 2), grad=True)
    xi = torch.randint(0, 9, (6,))
    check(lambda a, v: a.index_put((torch.tensor([1, 1, 5]),), v, accumulate=True), xi, torch.tensor([1, 2, 3]))
    with pytest.raises(RuntimeError):
        x.to(TPU).index_put_((torch.tensor([1, 2], device=TPU),), torch.randn(3, 5).to(TPU))
    with pytest.raises(RuntimeError):
        x.to(TPU).index_put_((torch.tensor([1], device=TPU),), torch.ones(1, dtype=torch.long, device=TPU))


# --- one_hot (composite over scatter) -------------------


def test_one_hot():
    x = torch.tensor([[0, 3], [2, 1]])
    check(F.one_hot, x)
    check(lambda x: F.one_hot(x, 6), x.t())
    with pytest.raises(RuntimeError):
        F.one_hot(torch.tensor([0.0, 1.0], device=TPU))


# --- nonzero_static -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.int64, torch.bool])
def test_nonzero_static(dtype):
    x = torch.randint(0, 2, (4, 5)).to(dtype)
    n = int(torch.count_nonzero(x))
    for size in (0, 1, n, n + 3):
        check(lambda x: torch.nonzero_static(x, size=size), x)
        check(lambda x: torch.nonzero_static(x, size=size, fill_value=7), x)
    check(lambda x: torch.nonzero_static(x, size=4), x.t())
    check(lambda x: torch.nonzero_static(x, size=3), torch.zeros(2, 0, 3).to(dtype))
    check(lambda x: torch.nonzero_static(x, size=2), torch.tensor(1).to(dtype))
    out = torch.empty(0, dtype=torch.long, device=TPU)
    torch.nonzero_static(x.to(TPU), size=5, out=out)
    torch.testing.assert_close(out.cpu(), torch.nonzero_static(x, size=5))
    both_raise(RuntimeError, lambda x: torch.nonzero_static(x, size=-1), x)


@pytest.mark.filterwarnings("ignore:An output with one or more elements was resized")
@pytest.mark.parametrize("op", ["index_select", "masked_select", "index"])
def test_selection_out_forms_match_cpu(op):
    # Functional and out= forms come from one declaration (ops/variants.h):
    # out= of the wrong size is resized, of another dtype is refused with
    # CPU's message, and a transposed out keeps its layout where CPU does.
    x = rand(4, 5)
    idx = torch.tensor([3, 0, 3])
    mask = torch.rand(4, 5) > 0.4
    call = {"index_select": lambda t, **kw: torch.index_select(t, 1, idx.to(t.device), **kw),
            "masked_select": lambda t, **kw: torch.masked_select(t, mask.to(t.device), **kw),
            "index": lambda t, **kw: torch.ops.aten.index.Tensor_out(t, [idx.to(t.device)], **kw)
            if kw else t[idx.to(t.device)]}[op]
    expected = call(x) if op != "index" else x[idx]
    torch.testing.assert_close(call(x.to(TPU)).cpu(), expected)
    for shape in [expected.shape, (1,), (0,)]:
        out_cpu, out_tpu = torch.empty(shape), torch.empty(shape, device=TPU)
        call(x, out=out_cpu)
        call(x.to(TPU), out=out_tpu)
        assert out_tpu.shape == out_cpu.shape
        torch.testing.assert_close(out_tpu.cpu(), out_cpu)
    both_raise(RuntimeError, lambda t, o: call(t, out=o), x, torch.empty(0, dtype=torch.int64))



@pytest.mark.parametrize("name", ["gather", "scatter", "scatter_value", "scatter_reduce", "scatter_add",
                                  "scatter_reduce_two", "index_add", "index_copy"])
def test_gather_scatter_index_forms(name):
    # Each op's functional, in-place (on a transposed view) and out= forms
    # against CPU; out= of another dtype raises, as CPU's structured kernels do.
    x = torch.randn(4, 5)
    idx = torch.tensor([[0, 1, 2], [2, 3, 4], [1, 1, 0], [4, 0, 3]])
    src = torch.randn(4, 3)
    rows, rsrc = torch.tensor([3, 0, 3]), torch.randn(3, 5)
    fns = {
        "gather": (lambda a, o=None: torch.gather(a, 1, idx.to(a.device), out=o), None),
        "scatter": (lambda a, o=None: torch.scatter(a, 1, idx.to(a.device), src.to(a.device), out=o),
                    lambda a: a.scatter_(1, idx.to(a.device), src.to(a.device))),
        "scatter_value": (lambda a, o=None: torch.scatter(a, 1, idx.to(a.device), 2.5, out=o),
                          lambda a: a.scatter_(1, idx.to(a.device), 2.5)),
        "scatter_reduce": (lambda a, o=None: torch.scatter(a, 1, idx.to(a.device), src.to(a.device), reduce="add",
                                                           out=o),
                           lambda a: a.scatter_(1, idx.to(a.device), src.to(a.device), reduce="multiply")),
        "scatter_add": (lambda a, o=None: torch.scatter_add(a, 1, idx.to(a.device), src.to(a.device), out=o),
                        lambda a: a.scatter_add_(1, idx.to(a.device), src.to(a.device))),
        "scatter_reduce_two": (lambda a, o=None: torch.scatter_reduce(a, 1, idx.to(a.device), src.to(a.device),
                                                                      "amax", out=o),
                               lambda a: a.scatter_reduce_(1, idx.to(a.device), src.to(a.device), "mean",
                                                           include_self=False)),
        "index_add": (lambda a, o=None: torch.index_add(a, 0, rows.to(a.device), rsrc.to(a.device), alpha=2, out=o),
                      lambda a: a.index_add_(0, rows.to(a.device), rsrc.to(a.device))),
        "index_copy": (lambda a, o=None: torch.index_copy(a, 0, torch.tensor([3, 0, 1]).to(a.device),
                                                          rsrc.to(a.device), out=o),
                       lambda a: a.index_copy_(0, torch.tensor([3, 0, 1]).to(a.device), rsrc.to(a.device))),
    }
    fn, inplace = fns[name]
    check(lambda a: fn(a), x)
    check(lambda a, o: (fn(a, o), o)[1], x, torch.empty(0))
    both_raise(RuntimeError, lambda a: fn(a, torch.empty(0, dtype=torch.float64, device=a.device)), x)
    if inplace is not None:
        xt = x.t().contiguous()  # in place on a transposed view of it
        check(lambda a: (inplace(a.t()), a)[1], xt)


def test_index_add_and_copy_index_dtype_errors_like_cpu():
    # CPU's own checks, which ATen's Python meta kernels lack.
    x, r = torch.ones(3, 4), torch.ones(1, 4)
    for idx in (torch.tensor([0.0]), torch.tensor([0], dtype=torch.int32)):
        for fn in (lambda a, i: a.index_add(0, i, r.to(a.device)), lambda a, i: a.index_copy(0, i, r.to(a.device)),
                   lambda a, i: a.clone().index_copy_(0, i, r.to(a.device))):
            try:
                fn(x, idx)
            except RuntimeError as e:
                with pytest.raises(RuntimeError) as t:
                    fn(x.to(TPU), idx.to(TPU))
                assert str(t.value).split("\n")[0] == str(e).split("\n")[0]
            else:
                check(fn, x, idx)
