"""torch.cat that appends to an integer row (generate()'s token ids and
attention mask) gets storage with room to grow, so a loop that appends at
every step compiles one program per storage size, not one per length
(csrc/ops/shape/append.cc). Results equal CPU's and alias nothing."""
import pytest
import torch

from tests.helpers import TPU
from torch_tpu import _C

pytestmark = pytest.mark.usefixtures("strict_eager")


def _cat_programs():
    return sum(1 for r in _C._compile_records() if r[0] in ("cat", "cat_append"))


@pytest.mark.parametrize("batch,dtype", [(1, torch.int64), (3, torch.int64), (2, torch.int32), (2, torch.bool),
                                         (1, torch.uint8)])
def test_appends_over_many_lengths_match_cpu(batch, dtype):
    g = torch.Generator().manual_seed(0)
    c = torch.randint(0, 100, (batch, 5), generator=g).to(dtype)
    t = c.to(TPU)
    for step in range(40):
        new = torch.randint(0, 100, (batch, 1 + step % 2), generator=g).to(dtype)
        c, t = torch.cat([c, new], -1), torch.cat([t, new.to(TPU)], -1)
        assert t.shape == c.shape and t.stride() == c.stride() and t.is_contiguous()
        torch.testing.assert_close(t.cpu(), c)


def test_a_growing_row_compiles_per_storage_size_not_per_length():
    # Warm up on lengths 21-50, then a run over lengths 22-63 (storage sizes
    # 32 and 64, as before) compiles no cat: the uploaded prompt has room
    # too, so even its first cat is an append. A plain cat keys on the
    # length, so it would compile 13 programs here (lengths 51-63).
    def run(n0, steps):
        t = torch.arange(n0).view(1, n0).to(TPU)
        m = torch.ones(1, n0, dtype=torch.long).to(TPU)
        for i in range(steps):
            t = torch.cat([t, torch.tensor([[i]]).to(TPU)], dim=-1)
            m = torch.cat([m, m.new_ones((1, 1))], dim=-1)
        return t, m

    run(20, 30)
    _C._clear_compile_records()
    t, m = run(21, 42)
    assert _cat_programs() == 0
    torch.testing.assert_close(t.cpu(), torch.cat([torch.arange(21), torch.arange(42)]).view(1, -1))
    torch.testing.assert_close(m.cpu(), torch.ones(1, 63, dtype=torch.long))


def test_the_result_aliases_nothing():
    # An append writes a new storage: writes to the result or to the input
    # afterwards are not seen by the other, and two appends to one prefix are
    # independent, as on CPU.
    c = torch.arange(20).view(1, 20)
    t = c.to(TPU)
    c1, t1 = torch.cat([c, c[:, :1]], -1), torch.cat([t, t[:, :1]], -1)
    c2, t2 = torch.cat([c1, c[:, :2]], -1), torch.cat([t1, t[:, :2]], -1)
    c3, t3 = torch.cat([c1, c[:, 3:4]], -1), torch.cat([t1, t[:, 3:4]], -1)
    assert t2.untyped_storage().data_ptr() != t1.untyped_storage().data_ptr()
    c2[0, 0] = -1
    t2[0, 0] = -1
    c1[0, -1] = -5
    t1[0, -1] = -5
    for got, want in ((t, c), (t1, c1), (t2, c2), (t3, c3)):
        torch.testing.assert_close(got.cpu(), want)


@pytest.mark.parametrize("mode", ["fused", "compiled"])
def test_other_modes_keep_plain_cat(mode):
    # Only strict eager appends in room; a recorded graph holds the cat's
    # shapes anyway. Values must still match.
    c = torch.arange(6).view(1, 6)
    t = c.to(TPU)
    def f(a, b):
        return torch.cat([a, b], -1)

    if mode == "compiled":
        f = torch.compile(f, backend="tpu")
    else:
        torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_AND_FUSE
    got = f(t, t[:, :2])
    torch.testing.assert_close(got.cpu(), torch.cat([c, c[:, :2]], -1))


def test_floats_and_large_rows_keep_exact_storage():
    x = torch.randn(1, 10).to(TPU)
    assert torch.cat([x, x], -1).untyped_storage().nbytes() == 20 * 4
    big = torch.zeros(1, 70000, dtype=torch.long).to(TPU)
    assert torch.cat([big, big[:, :1]], -1).untyped_storage().nbytes() == 70001 * 8


def _grown(batch, n, dtype=torch.long):
    # A [batch, n] row of CPU values and its tpu copy, grown by appends so
    # that its storage has room (as generate()'s attention mask has).
    c = torch.ones(batch, 4, dtype=dtype)
    if batch > 1:
        c[1, :2] = 0
    t = c.to(TPU)
    for i in range(n - 4):
        new = torch.full((batch, 1), i % 3, dtype=dtype)
        c, t = torch.cat([c, new], -1), torch.cat([t, new.to(TPU)], -1)
    return c, t


def _programs(*names):
    return sum(1 for r in _C._compile_records() if r[0] in names)


@pytest.mark.parametrize("batch", [1, 2])
def test_the_mask_conversion_and_cache_pad_compile_per_storage_size(batch):
    # Hugging Face's static cache turns the attention mask to bool and pads
    # it to the cache length at every step. Keyed on the length, the
    # conversion and the pad compile once per new length (20 each here);
    # read as the whole storage with a runtime length, once per storage
    # size. Left and right pads and a fill value, against CPU.
    import torch.nn.functional as F

    _C._clear_compile_records()
    for n in range(41, 61):
        c, t = _grown(batch, n)
        b = t.to(torch.bool)
        assert b.shape == c.shape and b.stride() == c.stride()
        torch.testing.assert_close(b.cpu(), c.bool())
        torch.testing.assert_close(F.pad(b, (0, 64 - n)).cpu(), F.pad(c.bool(), (0, 64 - n)))
        torch.testing.assert_close(F.pad(t, (2, 70 - n), value=7).cpu(), F.pad(c, (2, 70 - n), value=7))
    # All 20 lengths lie in one storage size (64 elements at batch 1, 128 at
    # batch 2): one conversion, and one program per pad form.
    assert _programs("convert_room", "copy_") == 1
    assert _programs("pad_room", "constant_pad_nd") == 2


def test_conversion_keeps_a_shared_destination():
    # A destination that another tensor shares (a view of it) keeps its own
    # storage: the copy writes it in place, and the view sees the values.
    c, t = _grown(2, 20)
    dst = torch.zeros(2, 20, dtype=torch.int32, device=TPU)
    view = dst[:, :3]
    dst.copy_(t)
    torch.testing.assert_close(dst.cpu(), c.int())
    torch.testing.assert_close(view.cpu(), c.int()[:, :3])
    # A fresh destination gets the room; later writes stay its own.
    b = t.to(torch.int32)
    assert b.untyped_storage().nbytes() == 64 * 4  # 40 elements, rounded up
    b.add_(1)
    torch.testing.assert_close(t.cpu(), c)
    torch.testing.assert_close(b.cpu(), c.int() + 1)


def test_pads_of_other_forms_are_plain():
    # Pads of other dims, crops and floats take the plain pad, against CPU.
    import torch.nn.functional as F

    c, t = _grown(2, 20)
    for pad in [(0, 3, 1, 0), (-2, 5), (0, 0)]:
        torch.testing.assert_close(F.pad(t, pad).cpu(), F.pad(c, pad))
    f = torch.arange(6.0).view(2, 3)
    torch.testing.assert_close(F.pad(f.to(TPU), (1, 2)).cpu(), F.pad(f, (1, 2)))


def test_uploads_and_fills_of_small_integer_tensors_get_room():
    # A prompt or attention mask copied from the host, and torch.ones for a
    # missing mask, get storage with room to double, rounded up to a power
    # of two (the tail never read), so the glue computed from them reads
    # them whole and the appends that follow stay in that storage size.
    c = torch.arange(12).view(1, 12)
    t = c.to(TPU)
    assert t.untyped_storage().nbytes() == 32 * 8 and t.is_contiguous()
    torch.testing.assert_close(t.cpu(), c)
    ones = torch.ones(2, 5, dtype=torch.long, device=TPU)
    assert ones.untyped_storage().nbytes() == 32 * 8
    torch.testing.assert_close(ones.cpu(), torch.ones(2, 5, dtype=torch.long))
    assert torch.arange(16).to(TPU).untyped_storage().nbytes() == 32 * 8
    # Floats, numbers (0-d) and large tensors keep exact storage.
    assert torch.tensor(7).to(TPU).untyped_storage().nbytes() == 8
    assert torch.randn(1, 12).to(TPU).untyped_storage().nbytes() == 12 * 4
    assert torch.zeros(1, 70000, dtype=torch.long).to(TPU).untyped_storage().nbytes() == 70000 * 8
    # A destination that something else shares is written in place.
    dst = torch.zeros(1, 12, dtype=torch.long, device=TPU)
    view = dst[:, 4:]
    dst.copy_(c)
    torch.testing.assert_close(view.cpu(), c[:, 4:])


def _glue(mask):
    # What generate() computes from the attention mask before the prefill.
    pos = mask.long().cumsum(-1) - 1
    pos.masked_fill_(mask == 0, 1)
    return pos.clone(), mask.all(), (mask == 0).any(), torch.cat([mask, mask.new_ones((mask.shape[0], 1))], -1)


@pytest.mark.parametrize("batch", [1, 2])
def test_the_prompt_glue_compiles_per_storage_size_not_per_length(batch):
    # Prompt lengths in one storage size (32 elements): after the first,
    # nothing compiles. Keyed on the length, every op would compile at each.
    g = torch.Generator().manual_seed(0)
    lengths = range(17, 32) if batch == 1 else range(9, 16)
    _glue(torch.ones(batch, lengths[0], dtype=torch.long).to(TPU))
    torch.tpu.synchronize()  # the warm-up's compiles, queued, are done
    _C._clear_compile_records()
    for n in lengths[1:]:
        mask = torch.ones(batch, n, dtype=torch.long)
        if batch > 1:
            mask[1, : n // 3] = 0
        mask[0, n // 2] = int(torch.randint(0, 2, (), generator=g))
        for got, want in zip(_glue(mask.to(TPU)), _glue(mask)):
            assert got.shape == want.shape
            torch.testing.assert_close(got.cpu(), want)
    per_op = {}
    for name, *_ in _C._compile_records():
        per_op[name] = per_op.get(name, 0) + 1
    assert per_op == {}, per_op


def test_ops_over_room_match_cpu_in_every_form():
    # Mixed operands (one with room, one without, a broadcast row), in-place
    # and out= forms, other dims and dtypes: each falls back or reads whole,
    # and every result, and every view of it, equals CPU's.
    c = torch.tensor([[3, 0, 5, 1, 0, 7, 2], [1, 1, 0, 4, 9, 0, 6]])
    t = c.to(TPU)
    exact = torch.empty(2, 7, dtype=torch.long, device=TPU)
    exact.copy_(t.view(14).clone().view(2, 7))
    row = torch.tensor([1, 2, 3, 4, 5, 6, 7])
    checks = [
        (t + exact, c + c), (t * row.to(TPU), c * row), (t == 0, c == 0), (t.cumsum(0), c.cumsum(0)),
        (t.cumsum(-1), c.cumsum(-1)), (t.cumsum(-1, dtype=torch.float), c.cumsum(-1, dtype=torch.float)),
        (t.cumprod(-1), c.cumprod(-1)), (t.bool().all(-1), c.bool().all(-1)), (t.any(), c.any()), (t.all(), c.all()),
        (t.sum(), c.sum()), (t.flip(-1), c.flip(-1)), (t[:, 2:], c[:, 2:]), (t.view(-1)[3:9], c.view(-1)[3:9]),
    ]
    for got, want in checks:
        torch.testing.assert_close(got.cpu(), want)
    out = torch.empty(2, 7, dtype=torch.long, device=TPU)
    torch.sub(t, 2, out=out)
    torch.testing.assert_close(out.cpu(), c - 2)
    ci, ti = c.clone(), c.to(TPU)
    ci.mul_(3).masked_fill_(c == 0, -1)
    ti.mul_(3).masked_fill_(ti == 0, -1)
    torch.testing.assert_close(ti.cpu(), ci)
    torch.testing.assert_close(ti.view(-1)[-3:].cpu(), ci.view(-1)[-3:])
    torch.testing.assert_close(t.cpu(), c)  # the input is unchanged


def test_writes_to_a_prefix_view_leave_the_rest_of_the_tensor():
    # A view of the first 9 of 15 uploaded ids (storage 32) looks as if it had
    # room; fill_ and masked_fill_ on it must not write the "room", which is
    # the rest of the tensor. A tensor that is its storage's only holder is
    # filled whole, on the host (tests/test_host_fill.py).
    c = torch.arange(15).view(3, 5)
    x = c.to(TPU)
    v, cv = x.view(-1)[:9], c.view(-1)[:9]
    v.fill_(7)
    cv.fill_(7)
    torch.testing.assert_close(x.cpu(), c)
    m = torch.zeros(9, dtype=torch.bool)
    m[::2] = True
    v.masked_fill_(m.to(TPU), -1)
    cv.masked_fill_(m, -1)
    torch.testing.assert_close(x.cpu(), c)
