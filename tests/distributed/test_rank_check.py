"""The process group's shared-memory rank check (csrc/python/rank_check.cc)
between two real processes: agreement, disagreement, a late rank and an
exited one. tests/distributed/test_process_group.py runs it under torchrun."""
import os
import subprocess
import sys
import time

import pytest

from torch_tpu import _C

pytestmark = pytest.mark.skipif(not os.access("/dev/shm", os.W_OK), reason="needs /dev/shm (POSIX shared memory)")

CHILD = r"""
import sys, time
from torch_tpu import _C
name, mode = sys.argv[1], sys.argv[2]
rc = _C._RankCheck(name, 1, 2, False)
print("open", flush=True)
if mode == "agree":
    for k in range(200):  # as many checks as the parent, the last one different
        sigs, late, gone = rc.check(k if k < 199 else 12345, 30.0)
        assert not late and not gone
    print("done", flush=True)
elif mode == "late":
    time.sleep(30)
"""


def _start(name, mode):
    p = subprocess.Popen([sys.executable, "-c", CHILD, name, mode], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "open"
    return p


def _name():
    return f"/torch_tpu_check_test_{os.getpid()}_{time.monotonic_ns()}"


def test_two_processes_agree_check_after_check_and_see_a_difference():
    name = _name()
    rc = _C._RankCheck(name, 0, 2, True)
    try:
        child = _start(name, "agree")
        assert rc.peers_visible()
        for k in range(199):  # back to back: a rank may be one check ahead of the other
            sigs, late, gone = rc.check(k, 30.0)
            assert (sigs, late, gone) == ([k, k], [], []), k
        sigs, late, gone = rc.check(199, 30.0)
        assert sigs == [199, 12345] and not late and not gone
        assert child.stdout.readline().strip() == "done" and child.wait(30) == 0
    finally:
        _C._RankCheck.unlink(name)


def test_a_rank_that_never_comes_times_out():
    name = _name()
    rc = _C._RankCheck(name, 0, 2, True)
    child = _start(name, "late")
    try:
        t0 = time.perf_counter()
        _, late, gone = rc.check(1, 0.3)
        assert late == [1] and gone == []
        assert time.perf_counter() - t0 < 5
    finally:
        child.kill()
        child.wait()
        _C._RankCheck.unlink(name)


def test_a_rank_whose_process_exited_is_reported_before_the_timeout():
    name = _name()
    rc = _C._RankCheck(name, 0, 2, True)
    child = _start(name, "exit")  # opens the region, then exits
    try:
        child.wait(30)
        t0 = time.perf_counter()
        _, late, gone = rc.check(1, 60.0)
        assert gone == [1] and late == []
        assert time.perf_counter() - t0 < 5
        assert not rc.peers_visible()
    finally:
        _C._RankCheck.unlink(name)


def test_a_region_that_is_not_there_raises():
    try:
        _C._RankCheck(_name(), 1, 2, False)
    except RuntimeError as e:
        assert "shm_open" in str(e)
    else:
        raise AssertionError("opening a missing region did not raise")
