"""The c10d backend for tpu tensors: ``init_process_group("tpu")`` (also
``"tpu_dist"``, TorchTPU's name), under torchrun, as NCCL is on CUDA.

Mechanism (docs/distributed.md): the XLA:CPU PJRT plugin cannot run
collectives across processes through its C API, so each collective stages
through host memory over PyTorch's own Gloo backend, inside this one
``ProcessGroupTpu``. The tpu inputs are copied to the host when the
collective is called (a materialisation point, as ``.cpu()`` is), Gloo runs
asynchronously, and the results are written back to the tpu outputs when
Gloo's work completes. CPU tensors go to Gloo directly, so one group serves
both devices (object collectives, checkpoint metadata).
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import hashlib
import os
import threading
import time
import weakref
import zlib
from datetime import timedelta

import torch
import torch.distributed as dist
from torch._C import _distributed_c10d as _c10d
from torch._C._distributed_c10d import Backend as _C10dBackend
from torch._C._distributed_c10d import ReduceOp, Work
from torch.futures import Future

__all__ = ["ProcessGroupTpu", "BACKEND_NAMES"]

BACKEND_NAMES = ("tpu", "tpu_dist")


# Exit safety. Gloo finishes a collective on its own worker thread. Whatever
# Python that thread touches (our callbacks, a future's Python value, a tensor
# whose Python object was dropped while Gloo still held it) needs the GIL; a
# thread that takes the GIL once the interpreter is finalizing is ended inside
# a noexcept destructor and the process aborts ("terminate called without an
# active exception"). So:
# - every callback we chain is tracked from the moment it is chained until
#   Gloo's thread has released it, and exit waits for those (_wait_at_exit);
# - the latest Gloo works (which hold the host tensors and Gloo's futures)
#   and chained futures (whose value is a Python object) stay referenced from
#   Python and are never released at exit, so a Gloo thread never drops their
#   last reference once finalization begins.
_pending_callbacks = set()  # weak references to the tokens of chained callbacks still alive
_kept = collections.deque()  # Gloo works and chained futures, oldest first
_kept_lock = threading.Lock()
# Completed ones beyond the newest few are released while Python runs, which
# is safe: a Gloo thread that drops a last reference then takes the GIL as usual.
_KEEP_DONE = 8


class _Token:
    __slots__ = ("__weakref__",)


def _done(obj):
    return obj.done() if isinstance(obj, torch._C.Future) else obj.is_completed()


def _keep(obj):
    with _kept_lock:
        _kept.append(obj)
        if len(_kept) > _KEEP_DONE:
            # Scan them all: a Gloo work marks itself completed only after its
            # thread has run and released its future's callbacks, so an old
            # one can stay incomplete while newer ones finish.
            items = list(_kept)
            _kept.clear()
            _kept.extend([o for o in items[:-_KEEP_DONE] if not _done(o)] + items[-_KEEP_DONE:])
    return obj


def _then(fut, fn):
    """``fut.then(fn)``, tracked so that exit waits until Gloo's thread has
    let go of the callback, and kept so that Gloo's thread, which releases
    the callback together with its reference to the result, never drops the
    last reference to the result's Python value at exit."""
    token = _Token()
    _pending_callbacks.add(weakref.ref(token, _pending_callbacks.discard))

    def callback(f, _token=token):  # the token dies with this function
        return fn(f)

    return _keep(fut.then(callback))


def _wait_at_exit(timeout=10.0):
    deadline = time.monotonic() + timeout
    while (_pending_callbacks or not all(map(_done, list(_kept)))) and time.monotonic() < deadline:
        time.sleep(0.001)  # lets Gloo's threads take the GIL and finish
    # Never released: finalization then cannot leave a Gloo thread holding the
    # last reference to a work, its tensors or a future's Python value.
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(_kept))


atexit.register(_wait_at_exit)


def _check_tensors(tensors, what="Tensors"):
    for t in tensors:
        if t.device.type not in ("tpu", "cpu"):
            raise ValueError(f"{what} must be on tpu or cpu for the tpu backend, got a tensor on {t.device}")
        if t.is_sparse:
            raise RuntimeError("the tpu backend does not support sparse tensors")
        if not t.is_contiguous():
            raise ValueError(f"{what} must be contiguous")


# Ranks agree on each collective's shapes and dtypes before Gloo runs it:
# given buffers of different sizes, Gloo aborts the process or times out.
# Ranks on one host compare fingerprints in shared memory (_C._RankCheck,
# microseconds); others, or all with TORCH_TPU_DIST_CHECK=gloo, run a small
# Gloo all-reduce (0.4-0.6 ms on two vCPUs). 0 turns the check off.
_CHECK_MODE = os.environ.get("TORCH_TPU_DIST_CHECK", "1").strip().lower()
_CHECK = _CHECK_MODE != "0"


def _sig(tensors):
    return ",".join(f"{str(t.dtype)[6:]}{list(t.shape)}" for t in tensors)


def _op(opts):
    return str(opts.reduceOp.op)


class _HostPool:
    """Reused host staging buffers. A fresh multi-megabyte CPU tensor costs
    more in page faults than the copy into it, so buffers go back to the
    pool once their collective's results are written back."""

    KEEP = 2  # free buffers kept per (numel, dtype)

    def __init__(self):
        self._free = {}
        self._lock = threading.Lock()

    def take(self, shape, dtype):
        numel = 1
        for d in shape:
            numel *= d
        with self._lock:
            bufs = self._free.get((numel, dtype))
            buf = bufs.pop() if bufs else None
        if buf is None:
            buf = torch.empty(numel, dtype=dtype)
        return buf.view(shape)

    def give(self, bufs):
        with self._lock:
            for b in bufs:
                lst = self._free.setdefault((b.numel(), b.dtype), [])
                if len(lst) < self.KEEP:
                    lst.append(b.view(-1))


_pool = _HostPool()
# The host buffers taken by the collective being set up on this thread; its
# _StagedWork returns them to the pool when it finishes.
_taken = threading.local()


def _take(shape, dtype):
    buf = _pool.take(shape, dtype)
    if not hasattr(_taken, "bufs"):
        _taken.bufs = []
    _taken.bufs.append(buf)
    return buf


def _alias(t):
    """`t`'s device buffer as a CPU tensor where device memory is host memory
    (XLA:CPU), else None. Gloo then reads and writes the tpu tensor itself:
    no staging copy, and no copy back (a fresh device buffer of 64 MiB cost
    49 ms in page faults, three times the collective)."""
    from torch_tpu import _C

    a = _C._host_alias(t.detach())
    if a is not None:
        if not hasattr(_taken, "aliases"):
            _taken.aliases = []
        _taken.aliases.append(a)
    return a


def _host(t, alias=True):
    # The staging copy: a tpu tensor's value on the host (blocks until it is
    # computed), or its buffer itself where the host can address it; a CPU
    # tensor is used in place.
    if t.device.type != "tpu":
        return t
    a = _alias(t) if alias else None
    if a is not None:
        return a
    buf = _take(t.shape, t.dtype)
    buf.copy_(t.detach())
    return buf


def _is_avg(op):
    return op.op == ReduceOp.RedOpType.AVG


class _StagedWork(Work):
    """Gloo's work on the host copies; completion writes the results back into
    the tpu tensors (once), then the future yields the user's outputs."""

    def __init__(self, inner, copy_back, outputs, after=None):
        super().__init__()
        self._inner = _keep(inner)
        self._copy_back = copy_back  # [(tpu_or_cpu_dst, host_src)]
        self._outputs = outputs
        self._after = after
        self._lock = threading.Lock()
        self._finished = False
        self._future = None
        self._release = _taken.__dict__.pop("bufs", [])
        self._aliases = _taken.__dict__.pop("aliases", [])  # results already in place

    def _finish(self):
        with self._lock:
            if self._finished:
                return
            self._finished = True
            if self._after is not None:
                self._after()
            for dst, src in self._copy_back:
                if dst is not src and not any(src is a for a in self._aliases):
                    dst.copy_(src)  # synchronous host read: src is free after it
            # Done with the device buffers: Gloo's kept work may still hold
            # the aliases (_keep), but they no longer make those buffers
            # shared, so the next collective on the same tensors aliases
            # them again instead of staging a copy.
            from torch_tpu import _C

            for a in self._aliases:
                _C._release_host_alias(a)
            self._aliases = []
            _pool.give(self._release)
            self._release = []

    def wait(self, timeout=timedelta(0)):
        if timeout == timedelta(0):
            self._inner.wait()
        else:
            self._inner.wait(timeout)
        self._finish()
        return True

    def is_completed(self):
        return self._finished

    def is_success(self):
        return self._finished

    def result(self):
        return self._outputs

    def get_future(self):
        if self._future is None:
            try:
                inner = self._inner.get_future()
            except RuntimeError:  # Gloo's send/recv works have no future
                inner = None
            if inner is None:
                fut = Future()
                self.wait()
                fut.set_result(self._outputs)
                self._future = fut
            else:
                def done(f):
                    f.value()  # re-raises Gloo's error
                    self._finish()
                    return self._outputs
                self._future = _then(inner, done)
        return self._future


class _DoneWork(Work):
    def __init__(self, outputs):
        super().__init__()
        self._outputs = outputs

    def wait(self, timeout=timedelta(0)):
        return True

    def is_completed(self):
        return True

    def result(self):
        return self._outputs

    def get_future(self):
        f = Future()
        f.set_result(self._outputs)
        return f


class ProcessGroupTpu(_C10dBackend):
    """c10d ``Backend`` for device type tpu (and cpu). Construct through
    ``torch.distributed.init_process_group("tpu")`` or ``new_group``."""

    def __init__(self, store, rank, size, timeout):
        if _CHECK_MODE not in ("0", "1", "gloo"):
            raise ValueError(f"TORCH_TPU_DIST_CHECK must be 0, 1 or gloo, not {_CHECK_MODE!r}")
        super().__init__(rank, size)
        self._rank, self._size = rank, size
        self._timeout = timeout
        # torchrun's agent keeps one store across the restarts of a job, so
        # keys of a dead attempt (its ranks' Gloo addresses, its check
        # region's name and counters) are still there when the restarted
        # ranks read them: they would connect to dead addresses or mix the
        # attempts' counts and hang. Each attempt keeps its keys apart.
        scope = f"attempt{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}/"
        self._gloo = dist.ProcessGroupGloo(dist.PrefixStore("tpu_gloo/" + scope, store), rank, size, timeout)
        self._check_store = dist.PrefixStore("tpu_check/" + scope, store)
        self._shm = None  # the shared-memory check; False where a rank cannot share it

    def _shared_check(self):
        """The ranks' shared-memory check, set up at the group's first check
        (every rank reaches it with the same collective, or the check fails
        anyway): rank 0 creates the region and names it in the store; each
        rank opens it and says whether it could and sees the others'
        processes. Any rank that cannot (another host, another pid or /dev/shm
        namespace) makes the whole group use the Gloo check."""
        if self._shm is not None:
            return self._shm
        from torch_tpu import _C

        store, rank, world = self._check_store, self._rank, self._size
        rc = None
        if rank == 0:
            name = f"/torch_tpu_check_{os.getpid()}_{os.urandom(8).hex()}"
            try:
                rc = _C._RankCheck(name, rank, world, True)
            except (OSError, RuntimeError):
                name = ""
            store.set("name", name)
        else:
            store.wait(["name"], self._timeout)
            name = store.get("name").decode()
            if name:
                try:
                    rc = _C._RankCheck(name, rank, world, False)
                except (OSError, RuntimeError):
                    rc = None
        try:
            store.set(f"opened/{rank}", "1")
            store.wait([f"opened/{r}" for r in range(world)], self._timeout)
        finally:
            if rank == 0 and name:
                _C._RankCheck.unlink(name)  # every rank has opened it (or never will): no file outlives this
        store.add("visible", int(rc is not None and rc.peers_visible()))
        store.set(f"counted/{rank}", "1")
        store.wait([f"counted/{r}" for r in range(world)], self._timeout)
        self._shm = rc if store.add("visible", 0) == world else False
        return self._shm

    # -- identity -----------------------------------------------------------------
    def getBackendName(self):  # noqa: N802 - c10d's name
        return "tpu_dist"

    @property
    def options(self):
        return self._gloo.options

    # -- helpers --------------------------------------------------------------------
    def _agree(self, what, tensors=(), extra=""):
        """Raises on every rank unless all ranks called `what` with the same
        tensor shapes and dtypes (through shared memory on one host, else one
        small Gloo all-reduce)."""
        if not _CHECK or self._size == 1:
            return
        sig = f"{what}|{extra}|{_sig(tensors)}"
        try:
            shm = self._shared_check() if _CHECK_MODE == "1" else False
        except RuntimeError as e:  # the store's wait timed out: a rank never came
            raise RuntimeError(f"tpu backend: timed out after {self._timeout} waiting for the other ranks to reach "
                               f"{what} (a rank exited or is stuck): {e}") from None
        if shm:
            key = int.from_bytes(hashlib.blake2b(sig.encode(), digest_size=8).digest(), "little")
            sigs, late, gone = shm.check(key, self._timeout.total_seconds())
            if gone:
                raise RuntimeError(f"tpu backend: rank {gone[0]} exited (its process is gone) before it reached "
                                   f"{what}; the collective cannot complete")
            if late:
                raise RuntimeError(f"tpu backend: timed out after {self._timeout} waiting for rank(s) {late} to "
                                   f"reach {what} (a rank is stuck, or the ranks called different collectives)")
            same = all(k == key for k in sigs)
        else:
            key = zlib.crc32(sig.encode())
            t = torch.tensor([key, -key], dtype=torch.int64)
            opts = _c10d.AllreduceOptions()
            opts.reduceOp = ReduceOp.MAX
            _keep(self._gloo.allreduce([t], opts)).wait()
            same = int(t[0]) == -int(t[1])
        if not same:
            raise RuntimeError(
                f"tpu backend: ranks called {what} with different tensor shapes or dtypes (rank {self._rank}: "
                f"{_sig(tensors) or 'no tensors'}); every rank must call the same collective with matching "
                "tensors. Set TORCH_TPU_DIST_CHECK=0 to skip this check.")

    def _avg_fixup(self, outputs):
        def after():
            for _dst, src in outputs:
                if src.is_floating_point() or src.is_complex():
                    src.div_(self._size)
                else:
                    src.div_(self._size, rounding_mode="trunc")
        return after

    def _reduce_opts(self, opts, cls):
        # Gloo has no AVG: SUM, then divide the results.
        if not _is_avg(opts.reduceOp):
            return opts, False
        new = cls()
        for name in ("rootRank", "rootTensor", "timeout"):
            if hasattr(opts, name):
                setattr(new, name, getattr(opts, name))
        new.reduceOp = ReduceOp.SUM
        return new, True

    # -- collectives --------------------------------------------------------------
    def _in_place_reduce(self, what, gloo_op, cls, tensors, opts, root=None):
        # all_reduce, its coalesced form and reduce: the tensors are the outputs
        # (on every rank, or only the root's for reduce).
        opts = opts or cls()
        _check_tensors(tensors)
        self._agree(what, tensors, f"{_op(opts)}@{root}")
        # Gloo may use a reduce's input on other ranks as scratch: those get a
        # copy, so only the root's tensor changes (as documented for reduce).
        host = [_host(t, alias=root in (None, self._rank)) for t in tensors]
        opts, avg = self._reduce_opts(opts, cls)
        pairs = list(zip(tensors, host)) if root in (None, self._rank) else []
        return _StagedWork(gloo_op(host, opts), pairs, tensors, self._avg_fixup(pairs) if avg else None)

    def allreduce(self, tensors, opts=None):
        return self._in_place_reduce("all_reduce", self._gloo.allreduce, _c10d.AllreduceOptions, tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        return self._in_place_reduce("all_reduce_coalesced", self._gloo.allreduce_coalesced,
                                     _c10d.AllreduceCoalescedOptions, tensors, opts)

    def reduce(self, tensors, opts=None):
        root = (opts or _c10d.ReduceOptions()).rootRank
        return self._in_place_reduce("reduce", self._gloo.reduce, _c10d.ReduceOptions, tensors, opts, root)

    def broadcast(self, tensors, opts=None):
        opts = opts or _c10d.BroadcastOptions()
        _check_tensors(tensors)
        self._agree("broadcast", tensors, str(opts.rootRank))
        host = [_host(t) for t in tensors]
        pairs = list(zip(tensors, host)) if opts.rootRank != self._rank else []
        return _StagedWork(self._gloo.broadcast(host, opts), pairs, tensors)

    def _gather_lists(self, what, gloo_op, cls, output_lists, input_tensors, opts):
        # all_gather, its coalesced form and gather: lists of outputs per rank
        # (empty on gather's non-roots).
        opts = opts or cls()
        _check_tensors(input_tensors)
        outs = [o for lst in output_lists for o in lst]
        _check_tensors(outs, "Output tensors")
        self._agree(what, input_tensors, f"{len(outs)} outputs" if what != "gather" else "")
        host_in = [_host(t) for t in input_tensors]
        host_out = [[_empty_host(o) for o in lst] for lst in output_lists]
        pairs = [(o, h) for lst, hs in zip(output_lists, host_out) for o, h in zip(lst, hs)]
        return _StagedWork(gloo_op(host_out, host_in, opts), pairs, output_lists)

    def allgather(self, output_tensors, input_tensors, opts=None):
        return self._gather_lists("all_gather", self._gloo.allgather, _c10d.AllgatherOptions, output_tensors,
                                  input_tensors, opts)

    def allgather_coalesced(self, output_lists, input_tensors, opts=None):
        return self._gather_lists("all_gather_coalesced", self._gloo.allgather_coalesced, _c10d.AllgatherOptions,
                                  output_lists, input_tensors, opts)

    def _flat(self, what, gloo_op, cls, output, input, opts, big, small, reduce):  # noqa: A002
        # all_gather_into_tensor and reduce_scatter_tensor: one flat tensor is
        # world size times the other.
        opts = opts or cls()
        _check_tensors([output, input])
        if big.numel() != small.numel() * self._size:
            name = "output" if big is output else "input"
            other = "input" if big is output else "output"
            raise ValueError(f"{what}: {name} tensor size ({big.numel()}) must equal world size ({self._size}) times "
                             f"{other} tensor size ({small.numel()})")
        self._agree(what, [output, input], _op(opts) if reduce else "")
        avg = False
        if reduce:
            opts, avg = self._reduce_opts(opts, cls)
        h_in, h_out = _host(input), _empty_host(output)
        pairs = [(output, h_out)]
        return _StagedWork(gloo_op(h_out, h_in, opts), pairs, [output], self._avg_fixup(pairs) if avg else None)

    def all_gather_single(self, output, input, opts=None):  # noqa: A002 - c10d's name
        return self._flat("all_gather_into_tensor", self._gloo._allgather_base, _c10d.AllgatherOptions, output, input,
                          opts, output, input, reduce=False)

    def all_gather_single_coalesced(self, outputs, inputs, opts=None):
        works = [self.all_gather_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return _Joined(works, outputs)

    def gather(self, output_tensors, input_tensors, opts=None):
        return self._gather_lists("gather", self._gloo.gather, _c10d.GatherOptions, output_tensors, input_tensors,
                                  opts)

    def scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts or _c10d.ScatterOptions()
        _check_tensors(output_tensors, "Output tensors")
        host_in = [[_host(t) for t in ins] for ins in input_tensors]
        host_out = [_empty_host(o) for o in output_tensors]
        return _StagedWork(self._gloo.scatter(host_out, host_in, opts), list(zip(output_tensors, host_out)),
                           output_tensors)

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        opts = opts or _c10d.ReduceScatterOptions()
        _check_tensors(output_tensors, "Output tensors")
        self._agree("reduce_scatter", list(output_tensors) + [t for ins in input_tensors for t in ins],
                    _op(opts))
        host_in = [[_host(t) for t in ins] for ins in input_tensors]
        host_out = [_empty_host(o) for o in output_tensors]
        opts, avg = self._reduce_opts(opts, _c10d.ReduceScatterOptions)
        pairs = list(zip(output_tensors, host_out))
        return _StagedWork(self._gloo.reduce_scatter(host_out, host_in, opts), pairs, output_tensors,
                           self._avg_fixup(pairs) if avg else None)

    def reduce_scatter_single(self, output, input, opts=None):  # noqa: A002 - c10d's name
        return self._flat("reduce_scatter_tensor", self._gloo._reduce_scatter_base, _c10d.ReduceScatterOptions,
                          output, input, opts, input, output, reduce=True)

    def reduce_scatter_single_coalesced(self, outputs, inputs, opts=None):
        works = [self.reduce_scatter_single(o, i, opts) for o, i in zip(outputs, inputs)]
        return _Joined(works, outputs)

    def all_to_all_single(self, output, input, output_split_sizes, input_split_sizes, opts=None):  # noqa: A002
        opts = opts or _c10d.AllToAllOptions()
        _check_tensors([output, input])
        self._agree("all_to_all_single", [], str(output.dtype))  # splits may differ by rank
        h_in, h_out = _host(input), _empty_host(output)
        work = self._gloo.alltoall_base(h_out, h_in, output_split_sizes, input_split_sizes, opts)
        return _StagedWork(work, [(output, h_out)], [output])

    def alltoall(self, output_tensors, input_tensors, opts=None):
        # One flat all_to_all_single: Gloo has no list form.
        opts = opts or _c10d.AllToAllOptions()
        _check_tensors(input_tensors)
        _check_tensors(output_tensors, "Output tensors")
        dtypes = {t.dtype for t in list(input_tensors) + list(output_tensors)}
        if len(dtypes) != 1:
            raise ValueError("all_to_all: all tensors must have the same dtype")
        self._agree("all_to_all", [], str(dtypes))
        flat_in = torch.cat([_host(t).reshape(-1) for t in input_tensors])
        flat_out = torch.empty(sum(o.numel() for o in output_tensors), dtype=flat_in.dtype)
        work = self._gloo.alltoall_base(flat_out, flat_in, [o.numel() for o in output_tensors],
                                        [t.numel() for t in input_tensors], opts)
        pieces = torch.split(flat_out, [o.numel() for o in output_tensors])
        pairs = [(o, p.view(o.shape)) for o, p in zip(output_tensors, pieces)]
        return _StagedWork(work, pairs, output_tensors)

    def send(self, tensors, dst_rank, tag):
        _check_tensors(tensors)
        return _StagedWork(self._gloo.send([_host(t) for t in tensors], dst_rank, tag), [], tensors)

    def recv(self, tensors, src_rank, tag):
        _check_tensors(tensors)
        host = [_empty_host(t) for t in tensors]
        return _StagedWork(self._gloo.recv(host, src_rank, tag), list(zip(tensors, host)), tensors)

    def recv_anysource(self, tensors, tag):
        _check_tensors(tensors)
        host = [_empty_host(t) for t in tensors]
        return _StagedWork(self._gloo.recv_anysource(host, tag), list(zip(tensors, host)), tensors)

    def barrier(self, opts=None):
        opts = opts or _c10d.BarrierOptions()
        # Gloo's barrier makes its own tensors; point it at the host.
        opts.device = torch.device("cpu")
        return _StagedWork(self._gloo.barrier(opts), [], [])


# C++ (DDP's buffer broadcast, functional collectives) calls these inside
# compiled regions; dynamo must run them as they are, not trace them.
for _name in ("allreduce", "allreduce_coalesced", "reduce", "broadcast", "allgather", "allgather_coalesced",
              "all_gather_single", "all_gather_single_coalesced", "gather", "scatter", "reduce_scatter",
              "reduce_scatter_single", "reduce_scatter_single_coalesced", "all_to_all_single", "alltoall", "send",
              "recv", "recv_anysource", "barrier"):
    setattr(ProcessGroupTpu, _name, torch._disable_dynamo(getattr(ProcessGroupTpu, _name)))
for _name in ("wait", "get_future"):
    setattr(_StagedWork, _name, torch._disable_dynamo(getattr(_StagedWork, _name)))


class _Joined(Work):
    """Several staged works as one (the coalesced forms)."""

    def __init__(self, works, outputs):
        super().__init__()
        self._works, self._outputs = works, outputs

    def wait(self, timeout=timedelta(0)):
        for w in self._works:
            w.wait(timeout)
        return True

    def is_completed(self):
        return all(w.is_completed() for w in self._works)

    def result(self):
        return self._outputs

    def get_future(self):
        futs = [w.get_future() for w in self._works]
        return _then(torch.futures.collect_all(futs), lambda _: self._outputs)


def _empty_host(t):
    # A host buffer for an output (the output's own buffer where the host can
    # address it); a CPU output is written in place.
    if t.device.type != "tpu":
        return t
    a = _alias(t)
    return a if a is not None else _take(t.shape, t.dtype)


def _create(store, rank, size, timeout):
    return ProcessGroupTpu(store, rank, size, timeout)


def _install():
    if not dist.is_available():
        return
    for name in BACKEND_NAMES:
        if name.upper() not in dist.Backend._plugins:
            dist.Backend.register_backend(name, _create, devices=["cpu", "tpu"])
    # "tpu" is the default backend for tpu tensors, as nccl is for cuda.
    dist.Backend.default_device_backend_map["tpu"] = "tpu"
