"""Elastic restarts on the "tpu" backend (DDP and FSDP2): under torchrun --max-restarts=1 a
rank dies mid-run, torchrun restarts both ranks, they create a fresh "tpu"
process group (torchrun's store still holds the dead attempt's keys), resume
from the last DCP checkpoint and end with the weights of an uninterrupted
run, bit for bit."""
import glob
import os
import signal
import socket
import subprocess
import sys
import time

import pytest
import torch

from tests.distributed.common import ROOT

WORKER = os.path.join(ROOT, "tests", "distributed", "restart_worker.py")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run(tmp, name, rdzv, fault, wrap="ddp"):
    """Runs restart_worker.py under torchrun; fault: False, "1" (rank 1 dies at
    step 10) or "save" (rank 0 dies writing the checkpoint of step 12)."""
    out, ckpt = os.path.join(tmp, f"{name}.pt"), os.path.join(tmp, f"{name}_ckpt")
    launch = {
        "standalone": ["--standalone"],
        "c10d": ["--nnodes=1", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{_free_port()}"],
        # torchrun's default: a fixed world, the store on the master port.
        "static": ["--nnodes=1", "--node-rank=0", "--rdzv-backend=static", "--master-addr=127.0.0.1",
                   f"--master-port={_free_port()}"],
    }[rdzv]
    cmd = [sys.executable, "-m", "torch.distributed.run", *launch, "--nproc-per-node=2", "--max-restarts=1",
           WORKER, ckpt, out]
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", FAULT=str(fault or "0"), WRAP=wrap)
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"torchrun failed ({p.returncode}):\n{p.stdout[-2000:]}\n{p.stderr[-5000:]}"
    return torch.load(out, weights_only=False)


_clean = {}


def _uninterrupted(tmp_path_factory, wrap):
    if wrap not in _clean:
        _clean[wrap] = _run(tmp_path_factory.mktemp("clean"), "clean", "standalone", fault=False, wrap=wrap)
    return _clean[wrap]


@pytest.mark.parametrize("rdzv,wrap", [("standalone", "ddp"), ("static", "ddp"), ("c10d", "ddp"), ("c10d", "fsdp")])
def test_a_restarted_job_resumes_from_its_checkpoint_and_ends_where_an_uninterrupted_one_does(
        tmp_path, tmp_path_factory, rdzv, wrap):
    got = _run(tmp_path, "fault", rdzv, fault="1", wrap=wrap)
    clean = _uninterrupted(tmp_path_factory, wrap)
    assert got["attempt"] == 1 and got["resumed_at"] == 8, got  # the checkpoint after step 8
    assert clean["attempt"] == 0 and clean["resumed_at"] == 0
    for name, w in clean["weights"].items():
        torch.testing.assert_close(got["weights"][name], w, rtol=0, atol=0, msg=name)


def test_a_rank_killed_in_the_middle_of_a_save_leaves_the_previous_checkpoint_loadable(tmp_path, tmp_path_factory):
    # Saving over the previous checkpoint's directory left a half-written
    # file beside the old metadata and the old "complete" marker: the restart
    # loaded it and failed. Each save now has a directory of its own, marked
    # complete only after every rank wrote.
    got = _run(tmp_path, "fault", "standalone", fault="save")
    clean = _uninterrupted(tmp_path_factory, "ddp")
    assert got["attempt"] == 1 and got["resumed_at"] == 8, got
    for name, w in clean["weights"].items():
        torch.testing.assert_close(got["weights"][name], w, rtol=0, atol=0, msg=name)
    steps = sorted(os.listdir(os.path.join(tmp_path, "fault_ckpt")))
    assert steps == ["step_000000012", "step_000000016"], steps  # older ones pruned, the cut one replaced


@pytest.mark.parametrize("wrap", ["ddp", "fsdp"])
def test_two_nodes_under_c10d_rendezvous_train_as_one_node_does(tmp_path, tmp_path_factory, wrap):
    # torchrun --nnodes=2: two agents (here on one host, as on two machines),
    # one rank each, meeting through c10d rendezvous. The job must train to
    # the weights of the same two ranks launched on one node.
    out, ckpt = os.path.join(tmp_path, "two.pt"), os.path.join(tmp_path, "ckpt")
    endpoint = f"127.0.0.1:{_free_port()}"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes=2", "--nproc-per-node=1",
           "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=two_nodes", WORKER, ckpt, out]
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1", FAULT="0", WRAP=wrap)
    agents = [subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
              for _ in range(2)]
    try:
        results = [a.communicate(timeout=300) for a in agents]
    finally:
        for a in agents:
            if a.poll() is None:
                a.kill()
    for a, (stdout, stderr) in zip(agents, results):
        assert a.returncode == 0, f"an agent failed ({a.returncode}):\n{stdout[-2000:]}\n{stderr[-5000:]}"
    got = torch.load(out, weights_only=False)
    clean = _uninterrupted(tmp_path_factory, wrap)
    for name, w in clean["weights"].items():
        torch.testing.assert_close(got["weights"][name], w, rtol=0, atol=0, msg=name)


def test_sigterm_to_torchrun_ends_every_rank_in_seconds_and_leaves_nothing_behind(tmp_path):
    # What a scheduler's preemption sends: SIGTERM to torchrun, while the
    # ranks are in collectives. Every rank must be gone within seconds, with
    # no shared-memory segment of the group's check left in /dev/shm.
    before = set(glob.glob("/dev/shm/torch_tpu_check_*"))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
           os.path.join(ROOT, "tests", "distributed", "worker.py"), "train_forever", str(tmp_path)]
    env = dict(os.environ, PYTHONPATH=ROOT, OMP_NUM_THREADS="1")
    p = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not all(os.path.exists(tmp_path / f"started_rank{r}") for r in range(2)):
            assert p.poll() is None and time.monotonic() < deadline, p.stderr.read()[-3000:] if p.poll() else "slow"
            time.sleep(0.2)
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        p.wait(timeout=30)
        seconds = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert seconds < 15, seconds
    assert set(glob.glob("/dev/shm/torch_tpu_check_*")) <= before
    # No rank outlives torchrun.
    out = subprocess.run(["pgrep", "-f", f"worker.py train_forever {tmp_path}"], capture_output=True, text=True)
    assert out.stdout.strip() == "", out.stdout
