"""The op recorder and its driver interface: host synchronisation points are
tagged for deferred drivers, and TORCH_TPU_CHECK_KEYS verifies cache keys."""
import os
import subprocess
import sys

import pytest
import torch

import torch_tpu
from tests.helpers import TPU

# Kernels that must read device values on the host, and why.
EXPECTED_SYNC = {
    "nonzero": "data-dependent shape",
    "masked_select": "data-dependent shape",
    "unique": "data-dependent shape",
    "repeat_interleave": "data-dependent shape",
    "bincount": "data-dependent shape",
    "equal": "host read",
    "segment_reduce": "host read",
    "linalg_lstsq": "host read",
}


def test_sync_ops_are_tagged():
    ops = torch_tpu._C._sync_ops()
    for op, reason in EXPECTED_SYNC.items():
        assert ops.get(op) == reason, (op, ops.get(op))


@pytest.mark.parametrize(
    "fn",
    [
        lambda x: torch.nonzero(x > 0),
        lambda x: torch.masked_select(x, x > 0),
        lambda x: torch.unique(x.round()),
        lambda x: torch.repeat_interleave(torch.tensor([1, 2], device=TPU)),
        lambda x: torch.equal(x, x),
    ],
)
def test_sync_point_counted(fn):
    x = torch.randn(4, 5, device=TPU)
    before = torch_tpu.debug.metrics()["sync_points"]
    fn(x)
    assert torch_tpu.debug.metrics()["sync_points"] > before


def test_plain_ops_are_not_sync_points():
    x = torch.randn(4, 5, device=TPU)
    before = torch_tpu.debug.metrics()["sync_points"]
    y = (x * 2 + 1).sum(0)
    assert torch_tpu.debug.metrics()["sync_points"] == before
    torch.testing.assert_close(y.cpu(), (x.cpu() * 2 + 1).sum(0))


def _run(code, **env):
    e = dict(os.environ, **env)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=e, timeout=300)


def test_check_keys_verifies_hits():
    code = """
import torch, torch_tpu
x = torch.randn(8, 8, device="tpu")
for _ in range(3):
    y = torch.nn.functional.gelu(x @ x + 1).softmax(-1)[::2].sum()
y.cpu()
m = torch_tpu.debug.metrics()
assert m["key_checks"] > 0 and m["cache_hits"] > 0, m
print("ok", m["key_checks"])
"""
    r = _run(code, TORCH_TPU_CHECK_KEYS="1")
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr[-3000:]


def test_check_keys_catches_a_key_that_misses_an_attribute():
    # A probe kernel that, like a buggy kernel, captures a value in its
    # lowering without adding it to the key.
    code = """
import torch, torch_tpu
x = torch.randn(4, device="tpu")
torch_tpu._C._key_check_probe(x, 1.0)
try:
    torch_tpu._C._key_check_probe(x, 2.0)
except RuntimeError as e:
    print("caught:", e)
"""
    r = _run(code, TORCH_TPU_CHECK_KEYS="1")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "caught:" in r.stdout and "cache key collision" in r.stdout and "key_check_probe" in r.stdout
    # Without the flag the stale program is (wrongly) reused silently: the
    # check is what catches it.
    r = _run(code)
    assert r.returncode == 0 and "caught:" not in r.stdout


def test_elementwise_ops_on_contiguous_tensors_share_one_program_per_element_count():
    # Keyed on the element count, not the shape (ops/common.cc): four shapes
    # of 24 elements compile one add and one in-place mul; a broadcast, a
    # transposed view, and a slice at an offset each still get their own
    # program, and every result matches CPU.
    code = """
import json, torch, torch_tpu
from torch_tpu import _C
n0 = len(_C._compile_records())
for shape in [(4, 6), (2, 12), (3, 8), (2, 3, 4)]:
    a, b = torch.randn(shape, dtype=torch.float64), torch.randn(shape, dtype=torch.float64)
    x = a.to("tpu")
    torch.testing.assert_close((x + b.to("tpu")).cpu(), a + b)
    x.mul_(b.to("tpu"))
    torch.testing.assert_close(x.cpu(), a * b)
same = [r[0] for r in _C._compile_records()[n0:]]
a, b = torch.randn(4, 6, dtype=torch.float64), torch.randn(6, dtype=torch.float64)
big = torch.randn(5, 4, 6, dtype=torch.float64)
torch.testing.assert_close((a.to("tpu") + b.to("tpu")).cpu(), a + b)
torch.testing.assert_close((a.to("tpu").t() + a.t().contiguous().to("tpu")).cpu(), a.t() * 2)
g = big.to("tpu")
g[2].add_(a.to("tpu"))
big[2] += a
torch.testing.assert_close(g.cpu(), big)
print(json.dumps({"same": same, "all": [r[0] for r in _C._compile_records()[n0:]]}))
"""
    import json
    r = _run(code, TORCH_TPU_CACHE_DIR="disabled")
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    assert sorted(got["same"]) == ["add", "mul"], got
    # broadcast add, add of a transposed view, in-place add at an offset
    assert got["all"].count("add") == 4, got
