"""CI slice of the differential fuzzer (tools/fuzz.py): a fixed seed's first cases
of random ATen ops, shapes, dtypes, layouts and in-place/out= forms on tpu against
CPU. Open bugs listed in tools.fuzz.XFAIL_BUGS are skipped; fix one, delete its
entry, and this test checks it from then on. Longer runs: docs/testing.md."""
import torch

import torch_tpu
from tools import fuzz

SEED = 20240601
CASES = 300


def test_fuzz_fixed_seed():
    # Worker subprocesses, so an abort in XLA is a failure naming its case,
    # not the end of the pytest process.
    failures = fuzz.run(SEED, CASES, isolate=True, skip_xfail=True)
    assert not failures, fuzz.summary(CASES, failures)


def test_fuzz_reports_abort_and_mismatch():
    # The harness itself: a tpu-only abort in a worker and a tpu-only wrong value
    # must each come back as a failure of the right kind, with a repro.
    aborts = fuzz.run(0, 1, ["_selftest_abort"], isolate=True)
    assert [f.kind for f in aborts] == ["abort"], fuzz.summary(1, aborts)
    assert "SIGABRT" in aborts[0].message and "op=_selftest_abort" in aborts[0].case
    wrong = fuzz.run(0, 2, ["_selftest_mismatch"])
    assert [f.kind for f in wrong] == ["mismatch", "mismatch"], fuzz.summary(2, wrong)
    assert wrong[0].repro.startswith("import torch, torch_tpu;")


def test_fuzz_cases_are_deterministic():
    a = [fuzz.make_case(7, i).describe() for i in range(50)]
    b = [fuzz.make_case(7, i).describe() for i in range(50)]
    assert a == b
    x = fuzz.make_case(7, 3).inputs[0]
    assert torch.equal(x.base(), x.base())
