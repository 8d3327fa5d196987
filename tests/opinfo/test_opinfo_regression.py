"""CI slice of the OpInfo sweep: (op, dtype) entries that pass in the
committed tests/opinfo/baseline.json must still pass.

Running every passing entry takes too long for CI on 2 cores, so by default
this runs a deterministic slice: each passing op once, at one of its passing
dtypes (rotated by name hash, so all dtypes get exercised), evenly thinned to
at most TORCH_TPU_OPINFO_LIMIT entries (default 150). TORCH_TPU_OPINFO_ALL=1
runs every passing entry. Regenerate the baseline with the full sweep
(docs/testing.md).
"""
import json
import os
import zlib

import pytest

BASELINE = os.path.join(os.path.dirname(__file__), "baseline.json")
LIMIT = int(os.environ.get("TORCH_TPU_OPINFO_LIMIT", "150"))
RUN_ALL = os.environ.get("TORCH_TPU_OPINFO_ALL") == "1"


def _load():
    with open(BASELINE) as f:
        return json.load(f)


def _slice(status):
    passing = {op: sorted(d for d, s in dts.items() if s == "pass") for op, dts in status.items()}
    passing = {op: dts for op, dts in sorted(passing.items()) if dts}
    if RUN_ALL:
        return [(op, d) for op, dts in passing.items() for d in dts]
    picks = [(op, dts[zlib.crc32(op.encode()) % len(dts)]) for op, dts in passing.items()]
    if len(picks) > LIMIT:
        step = len(picks) / LIMIT
        picks = [picks[int(i * step)] for i in range(LIMIT)]
    return picks


_BASELINE = _load()
_CASES = _slice(_BASELINE["status"])


@pytest.fixture(scope="module")
def ops():
    from torch.testing._internal.common_methods_invocations import op_db

    from tools.opinfo_check import key_of

    return {key_of(op): op for op in op_db}


@pytest.mark.parametrize("op_key,dtype", _CASES, ids=[f"{o}-{d}" for o, d in _CASES])
def test_still_passes(ops, op_key, dtype):
    from tools.opinfo_check import DTYPES, check_op

    op = ops.get(op_key)
    if op is None:
        pytest.skip(f"{op_key} is no longer in op_db")
    # Same sample count as the sweep that wrote the baseline; no time cut-off,
    # so a slow machine cannot turn into a different verdict.
    status, reason = check_op(op, DTYPES[dtype], _BASELINE["samples"], time_limit=1e9)
    assert status == "pass", f"{op_key} {dtype} regressed: {status}: {reason}"
