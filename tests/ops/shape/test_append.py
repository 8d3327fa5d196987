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
    # 32 and 64, as before) compiles only its first cat. A plain cat keys on
    # the length, so it would compile 13 programs here (lengths 51-63).
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
    assert _cat_programs() == 1  # the first cat, from a prompt of a new length
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
