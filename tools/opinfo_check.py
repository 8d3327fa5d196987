"""Checks one OpInfo entry at one dtype on tpu against PyTorch CPU.

The unit of the conformance sweep (tools/op_coverage.py): runs the entry's
sample inputs on CPU and on tpu copies, compares values with
torch.testing.assert_close and, for differentiable ops at float dtypes, the
gradients too. See docs/testing.md for the tolerance table.
"""
from __future__ import annotations

import itertools
import time

import torch
from torch.utils._pytree import tree_flatten, tree_map

TPU = torch.device("tpu")

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16,
          "int64": torch.int64, "bool": torch.bool}

# (atol, rtol) per output dtype; the reasons are in docs/testing.md.
TOLERANCES = {
    torch.float32: (1e-4, 1e-4),
    torch.bfloat16: (1e-2, 1.6e-2),
    torch.int64: (0.0, 0.0),
    torch.bool: (0.0, 0.0),
}

# Factories whose values are uninitialized memory: only shapes/dtypes compare.
UNINITIALIZED = {"empty", "empty_like", "empty_strided", "empty_permuted",
                 "new_empty", "new_empty_strided"}

STATUSES = ("pass", "mismatch", "unsupported", "error", "skip")


def key_of(op) -> str:
    """Stable name of an OpInfo entry: name, plus .variant when it has one."""
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


def first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


class Failure(Exception):
    def __init__(self, status: str, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def _to_tpu(t):
    if isinstance(t, torch.Tensor):
        return t.detach().to(TPU).requires_grad_(t.requires_grad)
    return t


def _sample_tensors(sample):
    """The sample's tensors in the order SampleInput.transform visits them."""
    found = []

    def f(t):
        if isinstance(t, torch.Tensor):
            found.append(t)
        return t

    sample.transform(f)
    return found


def _host_only(op, dtype, grad, samples):
    """Per sample, which of its tensors stay on the CPU in PyTorch's own device
    tests. Sample functions create such arguments without the device they are
    given (tensor_split's indices_or_sections, index_put's indices, narrow's
    start), and ops like tensor_split require them on the CPU. We find them by
    drawing the same samples for the meta device: a tensor that is still on
    the CPU there is host-only. When that cannot be told (the sample function
    fails on meta or draws differently), every tensor moves, as before."""
    torch.manual_seed(0)
    try:
        metas = list(itertools.islice(op.sample_inputs("meta", dtype, requires_grad=grad), len(samples)))
    except Exception:
        return [None] * len(samples)
    if len(metas) != len(samples):
        return [None] * len(samples)
    masks = []
    for s, m in zip(samples, metas):
        st, mt = _sample_tensors(s), _sample_tensors(m)
        ok = len(st) == len(mt) and all(a.shape == b.shape for a, b in zip(st, mt))
        masks.append([b.device.type == "cpu" for b in mt] if ok else None)
    return masks


def _with_base(t):
    """A tpu copy of `t` that keeps its storage layout: views of a larger
    storage (as_strided.partial_views samples read outside the view's own
    elements) are rebuilt on a tpu copy of the whole base storage with the
    same size, stride and storage offset."""
    if t.layout != torch.strided:
        return t.detach().to(TPU)  # sparse tensors have no storage to share
    storage = t.untyped_storage()
    n = storage.nbytes() // t.element_size()
    contiguous_whole = t.storage_offset() == 0 and t.is_contiguous() and t.numel() == n
    if contiguous_whole or n == 0:
        return t.detach().to(TPU)
    base = torch.empty(0, dtype=t.dtype).set_(storage, 0, (n,), (1,))
    return base.to(TPU).as_strided(t.size(), t.stride(), t.storage_offset())


def _to_tpu_keep(t, keep_cpu):
    if isinstance(t, torch.Tensor):
        if keep_cpu:
            return t
        return _with_base(t.detach()).requires_grad_(t.requires_grad)
    return t


def _tpu_sample(sample, host_mask=None):
    """The sample with tensors copied to tpu (except the host-only ones, see
    _host_only) and device arguments (creation ops, .to) pointed at tpu."""
    def dev(v):
        is_cpu = (isinstance(v, torch.device) and v.type == "cpu") or v == "cpu"
        return TPU if is_cpu else v

    count = itertools.count()

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        i = next(count)
        return _to_tpu_keep(t, bool(host_mask and host_mask[i]))

    s = sample.transform(move)
    s.args = tuple(dev(a) for a in s.args)
    s.kwargs = {k: dev(v) for k, v in s.kwargs.items()}
    return s


def _to_cpu(x):
    return tree_map(lambda t: t.detach().cpu() if isinstance(t, torch.Tensor) else t, x)


def _tensors(x):
    return [t for t in tree_flatten(x)[0] if isinstance(t, torch.Tensor)]


def _meta(x):
    return tree_map(lambda t: (tuple(t.shape), t.dtype) if isinstance(t, torch.Tensor) else t, x)


def _call(op, sample):
    return op(sample.input, *sample.args, **sample.kwargs)


def _compare(actual, expected, what):
    """assert_close leaf by leaf, with the tolerance of each expected output's
    dtype (an int64 input to sin gives a float32 result, compared as float)."""
    a_leaves, a_spec = tree_flatten(actual)
    a_leaves = [_to_cpu(a) for a in a_leaves]  # per leaf: keeps torch.Size et al. intact
    e_leaves, e_spec = tree_flatten(expected)
    if a_spec != e_spec:
        raise Failure("mismatch", f"{what}: output structure {a_spec} != {e_spec}"[:200])
    for a, e in zip(a_leaves, e_leaves):
        dtype = e.dtype if isinstance(e, torch.Tensor) else torch.float32
        atol, rtol = TOLERANCES.get(dtype, TOLERANCES[torch.float32])
        try:
            torch.testing.assert_close(a, e, atol=atol, rtol=rtol, equal_nan=True,
                                       check_device=False)
        except AssertionError as err:
            lines = [l.strip() for l in str(err).splitlines() if l.strip()]
            raise Failure("mismatch", f"{what}: " + " ".join(lines[:3])[:200]) from None


def _grads(sample, out, seed):
    """Gradients of the sample's differentiable outputs wrt its inputs, with
    cotangents drawn on CPU from a fixed seed so both devices get the same ones."""
    outs = [t for t in _tensors(sample.output_process_fn_grad(out))
            if t.requires_grad and t.is_floating_point()]
    ins = [t for t in _tensors((sample.input, sample.args, sample.kwargs)) if t.requires_grad]
    if not outs or not ins:
        return None
    g = torch.Generator().manual_seed(seed)
    # float64 outputs (the reference of _matches_float64) get the float32
    # draws widened, so both sides see the same cotangents.
    cots = [torch.randn(o.shape, generator=g, dtype=torch.float32 if o.dtype == torch.float64 else o.dtype)
            .to(o.dtype).to(o.device) for o in outs]
    return torch.autograd.grad(outs, ins, cots, allow_unused=True)


def _same_refusal(exc_type, fn):
    try:
        fn()
    except exc_type:
        return
    except Exception as e:
        raise Failure("mismatch", f"CPU raises {exc_type.__name__}, tpu raises "
                      f"{type(e).__name__}: {first_line(e)}") from None
    raise Failure("mismatch", f"CPU raises {exc_type.__name__}, tpu does not")


def _is_random(op, sample, first):
    """Ops whose CPU result changes between two identical calls (RNG users):
    their values cannot be compared across devices, only shapes and dtypes.
    OpInfo wraps some in wrapper_set_seed, which reseeds every call."""
    if op.name in UNINITIALIZED:
        return True
    code = getattr(op.op, "__code__", None)
    if code is not None and "wrapper_set_seed" in code.co_names:
        return True
    try:
        again = _call(op, sample)
    except Exception:
        return False
    try:
        torch.testing.assert_close(again, first, equal_nan=True, atol=0, rtol=0)
        return False
    except AssertionError:
        return True


def _matches_float64(op, dtype, sample, actual, tsample, seed, grad):
    """Second opinion for a float32 mismatch: CPU's float32 result carries
    rounding error too, which some formulas amplify (layer_norm's backward on
    a one-element row multiplies it by 1/sqrt(eps)). When the op runs in
    float64 on CPU, tpu passes if it matches that more exact reference,
    rounded to float32, within the float32 tolerance."""
    if dtype != torch.float32 or torch.float64 not in op.supported_dtypes("cpu"):
        return False

    def up(t):
        if isinstance(t, torch.Tensor) and t.dtype == torch.float32:
            return t.detach().double().requires_grad_(t.requires_grad)
        return t

    def down(v):
        return v.float() if isinstance(v, torch.Tensor) and v.dtype == torch.float64 else v

    try:
        s64 = sample.transform(up)
        torch.manual_seed(seed)
        expected = _call(op, s64)
        # Rerun tpu too: the first run's autograd graph was freed by backward.
        torch.manual_seed(seed)
        actual = _call(op, tsample)
        _compare(tsample.output_process_fn_grad(actual),
                 tree_map(down, s64.output_process_fn_grad(expected)), "values")
        if grad:
            ge = _grads(s64, expected, seed)
            if ge is not None:
                _compare(_grads(tsample, actual, seed), tree_map(down, ge), "grads")
    except Exception:
        return False
    return True


def _check_sample(op, dtype, sample, grad, index, host_mask=None):
    seed = 1234 + index
    torch.manual_seed(seed)
    try:
        expected = _call(op, sample)
    except Exception:
        return False  # CPU rejects this sample: nothing to compare against.
    random = _is_random(op, sample, expected)
    tsample = _tpu_sample(sample, host_mask)
    torch.manual_seed(seed)
    try:
        actual = _call(op, tsample)
        for t in _tensors(actual):
            if t.device.type != "tpu":
                raise Failure("mismatch", f"output on {t.device.type}, expected tpu")
        if random:
            if _meta(actual) != _meta(expected):
                raise Failure("mismatch", f"random op: shapes/dtypes {_meta(actual)} != {_meta(expected)}"[:200])
            return True
        try:
            # Compared after the sample's output_process_fn_grad, as PyTorch's
            # own cross-device test (test_compare_cpu) does: for svd/eigh it
            # removes the sign/phase freedom of singular and eigenvectors,
            # which LAPACK and XLA choose differently.
            _compare(tsample.output_process_fn_grad(actual), sample.output_process_fn_grad(expected), "values")
        except Failure:
            if not _matches_float64(op, dtype, sample, actual, tsample, seed, grad):
                raise
            return True
        if grad:
            try:
                ge = _grads(sample, expected, seed)
            except Exception as e:
                # CPU's own backward refuses (e.g. i1_backward has no
                # bfloat16 kernel): no reference gradients exist, so tpu
                # must refuse the same way rather than invent some.
                _same_refusal(type(e), lambda: _grads(tsample, actual, seed))
                ge = None
            if ge is not None:
                try:
                    _compare(_grads(tsample, actual, seed), ge, "grads")
                except Failure:
                    if not _matches_float64(op, dtype, sample, actual, tsample, seed, grad):
                        raise
    except Failure:
        raise
    except NotImplementedError as e:
        raise Failure("unsupported", first_line(e)) from None
    except Exception as e:
        raise Failure("error", first_line(e)) from None
    return True


def check_op(op, dtype: torch.dtype, max_samples: int = 8, time_limit: float = 60.0):
    """Returns (status, reason) for one OpInfo entry at one dtype."""
    grad = op.supports_autograd and dtype.is_floating_point
    # Samples are drawn from the global RNG: seed it so an entry gets the same
    # samples whatever ran before it (sweep worker or pytest).
    torch.manual_seed(0)
    try:
        samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=grad),
                                        max_samples))
    except Exception as e:
        return "skip", "sample_inputs failed: " + first_line(e)
    if not samples:
        return "skip", "no samples"
    host_masks = _host_only(op, dtype, grad, samples)
    start, compared = time.monotonic(), 0
    for i, sample in enumerate(samples):
        if time.monotonic() - start > time_limit:
            break
        try:
            compared += _check_sample(op, dtype, sample, grad, i, host_masks[i])
        except Failure as f:
            return f.status, f"sample {i}: {f.reason}"
    if not compared:
        return "skip", "CPU fails on every sample"
    note = f"{compared}/{len(samples)} samples"
    if compared < len(samples):
        note += " (rest CPU-rejected or over time limit)"
    return "pass", note
