"""Strict eager reads an integer view into a larger storage through a window
of its own, or, where no window covers it (a strided view), at a runtime
offset and strides (csrc/record/window.h): results equal CPU's, and a loop
whose buffer grows (generate()'s token ids) compiles its ops on views of it
once, not once per length."""
import os
import subprocess
import sys

import pytest
import torch

from tests.helpers import TPU
from torch_tpu import debug

EOS = 7


def _misses():
    return debug.metrics()["cache_misses"]


pytestmark = pytest.mark.usefixtures("strict_eager")


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.bool])
def test_views_at_every_alignment_match_cpu(dtype):
    # Lengths from 1 to 66 put the view's first element at many offsets
    # within the 64-byte alignment a window starts at, for each element size.
    for n in range(1, 70, 5):
        c = (torch.arange(n * 3) % 11).to(dtype).reshape(3, n)
        t = c.to(TPU)
        for view in (lambda x: x[-1], lambda x: x[1:], lambda x: x[2, -3:], lambda x: x.flatten()[n:]):
            if view(c).numel() == 0:
                continue
            got, want = view(t), view(c)
            if dtype == torch.bool:
                torch.testing.assert_close((got & True).cpu(), want & True)
                torch.testing.assert_close(got.logical_not().cpu(), want.logical_not())
            else:
                torch.testing.assert_close((got + 1).cpu(), want + 1)
                torch.testing.assert_close(torch.isin(got, torch.tensor([3, 5], dtype=dtype).to(TPU)).cpu(),
                                           torch.isin(want, torch.tensor([3, 5], dtype=dtype)))
                torch.testing.assert_close(got.clone().cpu(), want.clone())


def test_a_write_to_the_viewed_storage_reads_it_whole():
    # The op reads ids[:, -2:-1] and writes ids[:, -1:]: one storage, so no
    # window (it would alias what the program writes).
    for n in (5, 6, 9):
        c = torch.arange(2 * n).reshape(2, n)
        t = c.to(TPU)
        c[:, -1:].add_(c[:, -2:-1])
        t[:, -1:].add_(t[:, -2:-1])
        torch.testing.assert_close(t.cpu(), c)
        d = torch.arange(n)
        u = d.to(TPU)
        torch.add(d[:2], d[-2:], out=d[-2:])
        torch.add(u[:2], u[-2:], out=u[-2:])
        torch.testing.assert_close(u.cpu(), d)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_strided_views_match_cpu(dtype):
    # No window covers these: they are read at a runtime offset and strides.
    for rows, n in ((2, 5), (3, 9), (4, 17)):
        c = (torch.arange(rows * n) % 13).to(dtype).reshape(rows, n)
        t = c.to(TPU)
        views = (lambda x: x[:, -1:], lambda x: x[:, 1::2], lambda x: x.t(), lambda x: x[::2, -2],
                 lambda x: x[:1, :1].expand(3, 4), lambda x: x[1:, 2:4])
        for view in views:
            got, want = view(t), view(c)
            torch.testing.assert_close(got.clone().cpu(), want.clone())
            torch.testing.assert_close((got == 1).cpu(), want == 1)
            if dtype != torch.bool:
                torch.testing.assert_close((got * 3 + 1).cpu(), want * 3 + 1)
                torch.testing.assert_close(got.sum(-1).cpu(), want.sum(-1))


def test_a_write_to_a_strided_view_of_the_read_storage():
    # Reads column 0 and writes the last column of one storage: the read
    # keeps its position in the program (it would otherwise alias the write).
    for n in (5, 8):
        c = torch.arange(3 * n).reshape(3, n)
        t = c.to(TPU)
        c[:, -1:].add_(c[:, :1])
        t[:, -1:].add_(t[:, :1])
        torch.testing.assert_close(t.cpu(), c)


def _decode_glue(ids, pos):
    """What generate() does with its growing buffers at each new token."""
    last = ids[:, -1:].clone()
    done = torch.isin(ids[:, -1:], torch.tensor([EOS], device=ids.device)).any(dim=-1)
    nxt = pos[-1:] + 1
    return last, done, nxt


def _grow(n0, steps):
    """Runs the glue at lengths n0 .. n0 + steps - 1; returns the cache misses
    of the glue alone (not of the cat that grows the buffers) and the outputs."""
    # Batch 1, as generate() at batch 1: the last column is a window.
    ids = torch.randint(0, 10, (1, n0)).to(TPU)
    pos = torch.arange(n0).to(TPU)
    misses, outs = 0, []
    for _ in range(steps):
        before = _misses()
        last, done, nxt = _decode_glue(ids, pos)
        misses += _misses() - before
        outs.append((ids.cpu(), last.cpu(), done.cpu(), nxt.cpu()))
        ids = torch.cat([ids, last], dim=-1)
        pos = torch.cat([pos, nxt])
    return misses, outs


def test_a_growing_buffer_compiles_its_view_ops_once():
    # A window starts at a 64-byte boundary, so an int64 view's program comes
    # in 8 variants, by its offset from there: lengths 10-17 compile them all
    # (below 9 elements the window is the whole buffer).
    _grow(10, 8)
    misses, outs = _grow(18, 20)
    assert misses == 0
    for ids, last, done, nxt in outs:
        torch.testing.assert_close(last, ids[:, -1:])
        torch.testing.assert_close(done, torch.isin(ids[:, -1:], torch.tensor([EOS])).any(dim=-1))
        assert nxt.item() == ids.shape[1]


def _grow_batch(n0, steps):
    """The glue on a batch of 3 rows: the last column is a strided view whose
    stride is the growing length. The rows start in a storage with room (a
    first cat), as generate()'s do from the first token on."""
    ids = torch.randint(0, 10, (3, n0)).to(TPU)
    ids = torch.cat([ids, ids[:, :1]], dim=-1)
    eos = torch.tensor([EOS], device=TPU)
    misses, outs = 0, []
    for _ in range(steps):
        before = _misses()
        last = ids[:, -1:].clone()
        done = torch.isin(ids[:, -1:], eos).any(dim=-1)
        misses += _misses() - before
        outs.append((ids.cpu(), last.cpu(), done.cpu()))
        ids = torch.cat([ids, last], dim=-1)
    return misses, outs


def test_a_growing_batch_compiles_its_strided_view_ops_once():
    # Lengths 19-22 warm the storage of 128 elements (3 x 18 uploaded with
    # room to double); lengths 21-34, in the same storage, then compile
    # nothing. Keyed on the position, each new length would compile clone
    # and isin again.
    _grow_batch(18, 4)
    misses, outs = _grow_batch(20, 14)
    assert misses == 0
    for ids, last, done in outs:
        torch.testing.assert_close(last, ids[:, -1:])
        torch.testing.assert_close(done, torch.isin(ids[:, -1:], torch.tensor([EOS])).any(dim=-1))


def test_without_windows_each_length_compiles_again():
    # The check above can fail: with windows off, the same loop misses at
    # every new length.
    code = (
        "import torch, torch_tpu\n"
        "from tests.test_windows import _grow, _grow_batch\n"
        "torch.tpu.eager_mode = torch.tpu.EagerMode.DEFER_NEVER\n"
        "_grow(10, 8)\n"
        "print('MISSES', _grow(18, 6)[0])\n"
        "_grow_batch(18, 4)\n"
        "print('BATCH', _grow_batch(24, 6)[0])\n"
    )
    env = dict(os.environ, TORCH_TPU_EAGER_WINDOWS="0", TORCH_TPU_CACHE_DIR="disabled")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], env=env, cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    misses = int(r.stdout.split("MISSES")[1].split()[0])
    assert misses >= 6 * 3  # the three view ops, at each of the 6 new lengths
    assert int(r.stdout.split("BATCH")[1]) >= 6 * 2  # clone and isin
