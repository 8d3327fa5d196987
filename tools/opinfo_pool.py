"""Worker subprocesses for the OpInfo sweep.

Each worker imports torch and op_db once, then reads one JSON job per line on
stdin ({"op": key, "dtypes": [...]}) and answers one JSON row per (op, dtype)
on its stdout, then {"done": key}. A worker that dies (XLA abort, segfault)
or hangs is replaced; the entries it was on are recorded as errors, and the
sweep goes on.
"""
from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading

HANG_FACTOR = 4  # a worker is killed after HANG_FACTOR x time_limit per dtype


class _Worker:
    def __init__(self, samples, time_limit, log_path):
        self.log_path = log_path
        self.log = open(log_path, "ab")
        env = dict(os.environ, TORCH_TPU_CPU_FALLBACK="0")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tools.opinfo_pool", str(samples), str(time_limit)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
            text=True, env=env, cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)  # EOF: the worker exited

    def send(self, job):
        self.proc.stdin.write(json.dumps(job) + "\n")
        self.proc.stdin.flush()

    def last_log_line(self):
        self.log.flush()
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(0, os.path.getsize(self.log_path) - 4000))
                tail = [l for l in f.read().decode(errors="replace").splitlines()
                        if l.strip() and not l.startswith("[op_coverage]")]
            return tail[-1].strip()[:160] if tail else ""
        except OSError:
            return ""

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.log.close()


def run_pool(entries, samples=8, time_limit=60.0, workers=2, progress=True):
    """entries: [(key, [dtype names])] -> list of result rows
    {"op", "dtype", "status", "reason"}."""
    from tqdm import tqdm

    jobs = queue.Queue()
    for e in entries:
        jobs.put(e)
    results, lock = [], threading.Lock()
    bar = tqdm(total=len(entries), unit="op", disable=not progress, dynamic_ncols=True)
    logdir = tempfile.mkdtemp(prefix="op_coverage_")

    def slot(i):
        w = None
        while True:
            try:
                key, dtypes = jobs.get_nowait()
            except queue.Empty:
                break
            if w is None:
                w = _Worker(samples, time_limit, os.path.join(logdir, f"worker{i}.log"))
            w.send({"op": key, "dtypes": dtypes})
            got, started = {}, False
            while True:
                # The first answer also waits for the worker's start-up imports.
                timeout = None if not started else HANG_FACTOR * time_limit + 60
                try:
                    line = w.lines.get(timeout=timeout)
                except queue.Empty:
                    line = None
                    reason = f"timeout (killed after {timeout:.0f}s)"
                else:
                    reason = None
                if line is None:
                    reason = reason or "crashed: " + (w.last_log_line() or f"exit {w.proc.poll()}")
                    for d in dtypes:
                        if d not in got:
                            got[d] = {"op": key, "dtype": d, "status": "error", "reason": reason}
                    w.close()
                    w = None
                    break
                msg = json.loads(line)
                if msg.get("ready"):
                    started = True
                    continue
                if "done" in msg:
                    break
                started = True
                got[msg["dtype"]] = msg
            with lock:
                results.extend(got.values())
                bar.update(1)
                bar.set_postfix_str(key[:30])
        if w is not None:
            w.close()

    threads = [threading.Thread(target=slot, args=(i,)) for i in range(max(1, workers))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bar.close()
    return results


def _worker_main(samples, time_limit):
    # Results go to the real stdout; anything the ops print goes to stderr.
    out = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    import warnings

    warnings.filterwarnings("ignore")
    import torch
    from torch.testing._internal.common_methods_invocations import op_db

    import torch_tpu  # noqa: F401
    from tools.opinfo_check import DTYPES, check_op, key_of

    torch_tpu.set_cpu_fallback(False)
    ops = {key_of(op): op for op in op_db}
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        job = json.loads(line)
        op = ops[job["op"]]
        for d in job["dtypes"]:
            print(f"[op_coverage] {job['op']} {d}", file=sys.stderr, flush=True)
            status, reason = check_op(op, DTYPES[d], samples, time_limit)
            out.write(json.dumps({"op": job["op"], "dtype": d, "status": status,
                                  "reason": reason}) + "\n")
            out.flush()
        out.write(json.dumps({"done": job["op"]}) + "\n")
        out.flush()
    del torch


if __name__ == "__main__":
    _worker_main(int(sys.argv[1]), float(sys.argv[2]))
