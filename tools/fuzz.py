"""Seeded differential fuzzer: random ATen ops on tpu against PyTorch CPU.

    python tools/fuzz.py --seed S --cases N [--isolate] [--ops add,sum] [--verbose]
    python tools/fuzz.py --seed S --case I --verbose      # replay one case

Case I of seed S is a pure function of (S, I, the op list): an op from OPS,
random shapes (rank 0-4, sizes 0-6), dtypes, broadcasting, layouts
(contiguous, permuted, step-sliced, expanded), values (edge values, inf/nan),
arguments (dims, keepdim, ...) and a form (torch.op, Tensor.op, in-place
Tensor.op_ or out=). Each case runs on CPU first, then on tpu copies of the
same inputs (views are rebuilt on tpu from tpu bases), and the results are
compared:

  - CPU raised: tpu must raise an exception of the same type (or a subclass);
  - CPU ran: tpu must run, return tpu tensors of CPU's dtypes and shapes, with
    values within the tolerance of the result dtype (TOLERANCES); in-place and
    out= forms also compare the mutated tensors' bases (writes through views).

With --isolate, cases run in worker subprocesses (batches of BATCH cases), so
an abort (SIGABRT from XLA, SIGFPE, SIGSEGV) or a hang becomes a failure
naming its case and the fuzzer carries on. Every failure prints a one-line
Python repro; the exit status is 1 if anything failed.

KNOWN lists the accepted differences, XFAIL_BUGS the open bugs the CI test
(tests/test_fuzz.py) skips until they are fixed.
"""
from __future__ import annotations

import os
import sys

# Unimplemented ops must fail loudly, not run on the host.
os.environ.setdefault("TORCH_TPU_CPU_FALLBACK", "0")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:  # run as `python tools/fuzz.py`: repros import tools.fuzz
    sys.path.insert(0, ROOT)

import argparse  # noqa: E402
import collections  # noqa: E402
import dataclasses  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import queue  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402

import torch  # noqa: E402

import torch_tpu  # noqa: E402,F401

TPU = torch.device("tpu")

# --- accepted differences -------------------------------------------------------------
#
# name -> (reason, name of its predicate). A predicate (defined under "accepted
# differences: predicates" below) gets the case's Outcome and the failure kind and says
# whether this difference explains the failure; if one does, the case passes. Keep this
# small, and each predicate as narrow as what it can verify: a real bug goes to
# XFAIL_BUGS (and gets fixed), not here.
KNOWN = {
    "integer division by zero": (
        "CPU raises RuntimeError('ZeroDivisionError') when an integer divisor element is 0 "
        "(div with rounding_mode, remainder, fmod). The check depends on tensor values, so tpu "
        "would need a device-to-host sync per division to make it; like CUDA, tpu returns XLA's "
        "defined result instead (x / 0 = -1, x % 0 = x). Only the raise is excused: cases "
        "without a zero divisor are compared as usual.",
        "_int_div_by_zero"),
    "out-of-range float to integer conversion": (
        "Converting nan, inf or a float outside the integer type's range to that type is undefined "
        "behaviour in C++ and so in ATen: CPU returns whatever the x86 instruction gives (INT64_MIN for "
        "inf, 300.0 -> 44 in int8), XLA saturates (127). Excused only for cases that convert float "
        "inputs holding such values with a dtype= argument, or write a float result holding such values "
        "into an integer out=.",
        "_float_to_int_overflow"),
    "CPU out= into a non-contiguous out": (
        "ATen CPU mishandles some out= calls whose out tensor is a non-contiguous view of exactly the "
        "result's shape: matmul(3-D, 2-D, out=) raises a size error for a permuted out (and tril/triu "
        "corrupt memory, so the generator never gives them one). Excused only if tpu's out (and its base) "
        "equals what out= means: CPU's functional result copied into the out view.",
        "_cpu_noncontiguous_out"),
    "CPU's min()/max() with out= on an empty input": (
        "The full reductions torch.min(a)/torch.max(a) raise for an empty a (\"Expected reduction dim to be "
        "specified for input.numel() == 0\"), but ATen CPU's out= variant skips that check and returns the "
        "reduction's identity (INT64_MAX, -inf). tpu raises as the functional form does. Excused only for "
        "that case and that error.",
        "_cpu_empty_minmax_out"),
    "summation order near the float32 maximum": (
        "Float sums depend on the order of the additions: when a float32 input's positive (or negative) "
        "values add up past the float32 maximum (the generator's edge values include +-3.4e38), some "
        "orders overflow to inf and others cancel first. XLA adds in another order than ATen. Excused only "
        "for sum/mean/cumsum of such inputs, and only at elements where tpu's result is inf or nan.",
        "_order_dependent_overflow"),
    "in-place write into an expanded tensor": (
        "An in-place op whose self is expanded (several elements share one memory location) gets "
        "ATen's internal-overlap error on tpu, as add_ does on CPU. ATen CPU's tril_/triu_/masked_fill_ "
        "skip that check and return a result that depends on the write order (docs/differences_from_cuda.md). "
        "Excused only for in-place forms on an expanded self that raise that error.",
        "_inplace_on_expanded"),
    "subnormals flush to zero": (
        "XLA:CPU runs with denormals flushed to zero (FTZ/DAZ), as TPU hardware does: a float32 or "
        "bfloat16 subnormal input reads as 0 (1e-40 == 0 is True, 1e-40 * 1e30 is 0; float16 is computed "
        "in float32, where its subnormals are normal). A mismatch is excused only if CPU, "
        "given the same inputs with their subnormals replaced by zero, matches tpu exactly as usual.",
        "_subnormals_flushed"),
}

# --- open bugs --------------------------------------------------------------------------
#
# (op, dtype) or (op, dtype, regex) -> the failure seen. A case matches when its op is
# `op` (or, for "op[form]", also its form is `form`: functional, method, inplace, out),
# one of its tensor inputs has dtype `dtype` ("*": any), and `regex`, if given, is found
# in its description (Case.describe(): "... op=roll form=functional [a: int64[] ...]").
# The CI test skips matching cases (run(..., skip_xfail=True)); the CLI runs them
# unless --skip-xfail. Delete an entry once its bug is fixed.
XFAIL_BUGS: dict[tuple, str] = {
}

# --- tolerances -----------------------------------------------------------------------

# float32: XLA's reductions and matmuls sum in another order than ATen's and its
# elementwise kernels are a few ulp off libm/SLEEF, well inside 1e-4.
# TRANSCENDENTAL ops get rtol 1e-3 in float32: XLA lowers them to its own
# polynomial/rational approximations (not the libm/SLEEF code ATen calls), whose error
# grows with the argument: exp(x) carries |x| times the rounding of x, pow(x, y) is
# exp(y*log(x)) and multiplies log's error by |y*log(x)|, sin/atan2 reduce their
# argument differently. 1e-3 relative (PyTorch's own CUDA-vs-CPU tolerance) covers it.
TRANSCENDENTAL = {"exp", "log", "sin", "tanh", "sigmoid", "pow", "atan2"}
TOLERANCES = {  # dtype -> (rtol, atol)
    torch.float32: (1e-4, 1e-4),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (1.6e-2, 1e-2),
}


def tolerance(dtype, op):
    if dtype == torch.float32 and op in TRANSCENDENTAL:
        return 1e-3, 1e-4
    return TOLERANCES.get(dtype, (0.0, 0.0))  # integers and bool: exact


# --- values -----------------------------------------------------------------------------

DTYPES = {
    "float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "int32": torch.int32, "int64": torch.int64, "uint8": torch.uint8, "int8": torch.int8,
    "bool": torch.bool,
}
DNAME = {v: k for k, v in DTYPES.items()}
FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int32", "int64", "uint8", "int8")
ALL_DTYPES = FLOATS + INTS + ("bool",)
# weights of the dtypes a case draws: float32 and int64 most often
DTYPE_WEIGHTS = {"float32": 4, "float16": 1.5, "bfloat16": 2, "int32": 1.5, "int64": 2.5, "uint8": 1,
                 "int8": 1, "bool": 1.5}


def gen(shape, dtype, seed, mode="normal"):
    """Deterministic CPU values of `shape` and `dtype` from `seed`.

    mode: "normal"; "special" sprinkles edge values (inf, -inf, nan, +-0, max, min,
    subnormal; integer min/max/-1/0/1); "nomin" is "special" without the integer
    minimum (INT_MIN / -1 traps on CPU, SIGFPE); "nonzero" replaces integer zeros by 1;
    "index:H" draws int64-style indices in [0, H)."""
    g = torch.Generator().manual_seed(seed)
    shape = tuple(shape)
    n = math.prod(shape)
    if mode.startswith("index:"):
        high = int(mode.split(":")[1])
        if high <= 0:
            return torch.zeros(shape, dtype=dtype)
        return torch.randint(0, high, shape, generator=g).to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) < 0.5
    pick = torch.randint(0, 1 << 30, (4,), generator=g).tolist()
    if dtype.is_floating_point:
        scale = (0.5, 1.0, 4.0, 30.0)[pick[0] % 4]
        t = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * scale
        if pick[1] % 3 == 0:  # half-integers: ties for sort/max, .5 cases for round
            t = torch.round(t * 2) / 2
        t = t.to(dtype)
        if mode in ("special", "nomin") and n:
            fi = torch.finfo(dtype)
            edges = [math.inf, -math.inf, math.nan, 0.0, -0.0, fi.max, -fi.max, fi.tiny / 4, 1.0, -1.0]
            k = 1 + pick[2] % max(1, n // 3)
            pos = torch.randint(0, n, (k,), generator=g)
            val = torch.tensor(edges, dtype=torch.float64)[torch.randint(0, len(edges), (k,), generator=g)]
            t.view(-1)[pos] = val.to(dtype)
        return t
    ii = torch.iinfo(dtype)
    lo, hi = (0, 21) if dtype == torch.uint8 else (-10, 11)
    t = torch.randint(lo, hi, shape, generator=g, dtype=torch.int64)
    if mode in ("special", "nomin") and n:
        edges = [ii.max, ii.max - 1, 0, 1] + ([] if ii.min == 0 else [-1])
        if mode == "special":
            edges.append(ii.min)
        else:
            edges.append(ii.min + 1)
        k = 1 + pick[2] % max(1, n // 3)
        pos = torch.randint(0, n, (k,), generator=g)
        t.view(-1)[pos] = torch.tensor(edges)[torch.randint(0, len(edges), (k,), generator=g)]
    if mode == "nonzero":
        t[t == 0] = 1
    return t.to(dtype)


def _fmt_scalar(v):
    if isinstance(v, bool):
        return repr(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "float('nan')"
        if math.isinf(v):
            return "float('inf')" if v > 0 else "-float('inf')"
    return repr(v)


def fmt(v):
    """Python source for an argument value (scalars, dtypes, tuples, lists)."""
    if isinstance(v, torch.dtype):
        return str(v)
    if isinstance(v, tuple):
        return "(" + ", ".join(fmt(x) for x in v) + ("," if len(v) == 1 else "") + ")"
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    return _fmt_scalar(v)


# --- cases ----------------------------------------------------------------------------

@dataclasses.dataclass
class TensorSpec:
    """One input: a base of `base_shape` filled by gen(), then `view` (Python source
    applied to the base, e.g. ".permute(1, 0)") giving the logical tensor."""
    name: str
    base_shape: tuple
    dtype: str
    seed: int
    mode: str = "normal"
    view: str = ""
    layout: str = "contiguous"

    def base(self):
        return gen(self.base_shape, DTYPES[self.dtype], self.seed, self.mode)

    def source(self, literal_limit=64):
        """Python source of the CPU base tensor."""
        shape = fmt(tuple(self.base_shape))
        if math.prod(self.base_shape) <= literal_limit:
            vals = self.base().reshape(-1).tolist()
            return f"torch.tensor({fmt(vals)}, dtype={DTYPES[self.dtype]}).reshape({shape})"
        return f"gen({shape}, {DTYPES[self.dtype]}, {self.seed}, {self.mode!r})"

    def describe(self, shape):
        return f"{self.name}: {self.dtype}{list(shape)} {self.layout}"


@dataclasses.dataclass
class Case:
    seed: int
    index: int
    op: str
    form: str            # functional | method | inplace | out
    inputs: list         # [TensorSpec]
    expr: str            # Python source over the input names and `torch`
    check: str = "plain"  # plain | sort | argsort | topk | maxdim | argmax
    meta: dict = dataclasses.field(default_factory=dict)  # dim, keepdim, stable for the tie checks
    inplace_self: str = ""  # the input an in-place/out= form writes

    @property
    def dtype(self):
        return self.inputs[0].dtype if self.inputs else "-"

    def shapes(self):
        out = {}
        for s in self.inputs:
            try:
                out[s.name] = tuple(_materialize(s, torch.device("meta")).shape)
            except Exception:
                out[s.name] = None
        return out

    def describe(self):
        shapes = self.shapes()
        ins = "; ".join(s.describe(shapes[s.name]) for s in self.inputs)
        return f"seed={self.seed} case={self.index} op={self.op} form={self.form} [{ins}] {self.expr}"

    def repro(self):
        """A one-line Python snippet that runs the case on CPU and on tpu and prints both."""
        names = [s.name for s in self.inputs]
        args = ", ".join(f"{s.source()}.to(d){s.view}" for s in self.inputs)
        uses_gen = any(math.prod(s.base_shape) > 64 for s in self.inputs)
        head = "import torch, torch_tpu; " + ("from tools.fuzz import gen; " if uses_gen else "")
        return (f"{head}f = lambda d: (lambda {', '.join(names)}: {self.expr})({args}); "
                f"print(f('cpu')); print(f('tpu'))")


@dataclasses.dataclass
class Failure:
    kind: str
    seed: int
    index: int
    op: str
    dtype: str
    form: str
    case: str
    message: str
    repro: str

    def render(self):
        msg = self.message.strip().replace("\n", "\n      ")
        return (f"[{self.kind}] {self.case}\n      {msg}\n  repro (from the repo root): "
                f"python -c \"{self.repro}\"")


KINDS = ("abort", "hang", "compile_error", "mismatch", "wrong_exception", "tpu_accepts_cpu_rejects",
         "tpu_error", "cpu_abort")


# --- generation ------------------------------------------------------------------------

class Gen:
    """Random choices for one case."""

    def __init__(self, seed, index):
        self.r = random.Random(f"torch_tpu-fuzz:{seed}:{index}")
        self.names = iter("abcdefgh")

    def chance(self, p):
        return self.r.random() < p

    def choice(self, xs):
        return self.r.choice(list(xs))

    def dtype(self, allowed=ALL_DTYPES):
        allowed = list(allowed)
        return self.r.choices(allowed, weights=[DTYPE_WEIGHTS[d] for d in allowed])[0]

    def shape(self, rank=None, min_rank=0, max_rank=4):
        if rank is None:
            rank = self.r.choices(range(min_rank, max_rank + 1),
                                  weights=[(1, 3, 4, 3, 2)[k] for k in range(min_rank, max_rank + 1)])[0]
        zero = self.chance(0.08)
        dims = [self.r.randint(1, 6) for _ in range(rank)]
        if zero and rank:
            dims[self.r.randrange(rank)] = 0
        return tuple(dims)

    def broadcast_to(self, shape):
        """A shape that broadcasts with `shape` (rarely one that does not)."""
        s = list(shape)
        if self.chance(0.03) and any(d > 1 for d in s):  # incompatible: CPU raises
            i = self.choice([i for i, d in enumerate(s) if d > 1])
            s[i] = s[i] + 1
            return tuple(s)
        if s and self.chance(0.4):
            s = s[self.r.randint(1, len(s)):]
        s = [1 if self.chance(0.3) else d for d in s]
        if len(s) < 4 and self.chance(0.1):
            s = [self.r.randint(1, 3)] + s
        return tuple(s)

    def tensor(self, shape, dtype, mode=None, layout=None, name=None):
        """A TensorSpec whose logical shape is `shape`, in a random layout."""
        name = name or next(self.names)
        if mode is None:
            mode = "special" if self.chance(0.15) else "normal"
        rank = len(shape)
        if layout is None:
            opts = ["contiguous"] * 6 + (["permuted"] * 2 if rank >= 2 else []) + \
                   (["strided", "expanded"] if rank >= 1 else [])
            layout = self.choice(opts)
        seed = self.r.getrandbits(31)
        if layout == "permuted" and rank >= 2:
            perm = list(range(rank))
            while perm == sorted(perm):
                self.r.shuffle(perm)
            base = [0] * rank
            for j, p in enumerate(perm):
                base[p] = shape[j]
            return TensorSpec(name, tuple(base), dtype, seed, mode, f".permute{fmt(tuple(perm))}", layout)
        if layout == "strided" and rank >= 1:
            base, sl = [], []
            for d in shape:
                if self.chance(0.5):
                    step, off = self.choice((2, 3)), self.choice((0, 1))
                    base.append(off + (d - 1) * step + 1 if d else off)
                    sl.append(f"{off or ''}::{step}")
                else:
                    base.append(d)
                    sl.append(":")
            if all(x == ":" for x in sl):
                base[0] = base[0] + 1
                sl[0] = "1:"
            return TensorSpec(name, tuple(base), dtype, seed, mode, "[" + ", ".join(sl) + "]", layout)
        if layout == "expanded" and rank >= 1:
            base = [1 if (d != 1 and self.chance(0.5)) else d for d in shape]
            if base == list(shape):
                i = self.r.randrange(rank)
                base[i] = 1
            lead = 0
            while lead < rank - 1 and base[lead] == 1 and self.chance(0.5):
                lead += 1
            base = base[lead:]
            return TensorSpec(name, tuple(base), dtype, seed, mode, f".expand{fmt(tuple(shape))}", layout)
        return TensorSpec(name, tuple(shape), dtype, seed, mode, "", "contiguous")

    def dim(self, rank, allow_none=False):
        """A dim for a tensor of `rank` (negative sometimes, out of range rarely)."""
        if allow_none and self.chance(0.25):
            return None
        n = max(rank, 1)
        if self.chance(0.03):
            return n if self.chance(0.5) else -n - 1
        d = self.r.randrange(n)
        return d - n if self.chance(0.3) else d

    def dims(self, rank):
        """A tuple of distinct dims (possibly empty)."""
        n = max(rank, 1)
        k = self.r.randint(0 if self.chance(0.1) else 1, n)
        ds = self.r.sample(range(n), k)
        return tuple(d - n if self.chance(0.25) else d for d in ds)


def _meta_result(case):
    """The case's result computed on meta tensors (dtypes and shapes), or None."""
    try:
        env = {s.name: _materialize(s, torch.device("meta")) for s in case.inputs}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return eval(case.expr, {"torch": torch}, env)
    except Exception:
        return None


def _add_out(g, case, n_out=1, noncontiguous=True):
    """Turns a functional case into its out= form with a random out tensor (or tuple).
    noncontiguous=False keeps the out contiguous (see the tril/triu generator)."""
    res = _meta_result(case)
    res = list(res) if isinstance(res, tuple) else [res]
    outs = []
    for k in range(n_out):
        r = res[k] if k < len(res) and isinstance(res[k], torch.Tensor) else None
        dt = DNAME.get(r.dtype, "float32") if r is not None else g.dtype()
        if r is None or g.chance(0.15):
            dt = g.dtype()  # a wrong dtype: CPU casts or raises
        shape = tuple(r.shape) if r is not None else (0,)
        how = g.r.random()
        if how < 0.5:
            spec = g.tensor((0,), dt, layout="contiguous", name=f"o{k}")
        elif how < 0.85 or r is None:
            permuted = len(shape) >= 2 and g.chance(0.3) and noncontiguous
            spec = g.tensor(shape, dt, layout="permuted" if permuted else "contiguous", name=f"o{k}")
        else:
            spec = g.tensor(g.shape(), dt, layout="contiguous", name=f"o{k}")  # resized by the op
        outs.append(spec)
    case.inputs.extend(outs)
    o = outs[0].name if n_out == 1 else "(" + ", ".join(s.name for s in outs) + ")"
    case.expr = case.expr[:-1] + f", out={o})"
    case.form = "out"
    case.inplace_self = ",".join(s.name for s in outs)
    return case


def _forms(g, inplace=True, out=True, method=True):
    opts = ["functional"] * 4 + (["method"] if method else []) + (["inplace"] * 2 if inplace else []) + \
        (["out"] * 2 if out else [])
    return g.choice(opts)


def _call(op, form, args, kwargs=""):
    """Source of `torch.op(args)` / `a.op(rest)` / `a.op_(rest)`."""
    kw = (", " + kwargs) if kwargs else ""
    if form in ("method", "inplace"):
        self, rest = args[0], args[1:]
        name = op + ("_" if form == "inplace" else "")
        return f"{self}.{name}({', '.join(rest)}{kw if rest else kwargs})"
    return f"torch.{op}({', '.join(args)}{kw})"


UNARY = ["abs", "neg", "sign", "sgn", "exp", "log", "sqrt", "sin", "tanh", "sigmoid", "relu", "floor", "ceil",
         "round", "trunc", "reciprocal", "square", "bitwise_not", "logical_not"]


def g_unary(g, op, seed, index):
    dt = g.dtype()
    a = g.tensor(g.shape(), dt)
    form = _forms(g, out=op != "relu")
    kwargs = ""
    if op == "round" and g.chance(0.3):
        kwargs = f"decimals={g.choice((-1, 0, 1, 2))}"
    case = Case(seed, index, op, form, [a], _call(op, "functional" if form == "out" else form, ["a"], kwargs))
    if form == "inplace":
        case.inplace_self = "a"
    if form == "out":
        _add_out(g, case)
    return case


BINARY = ["add", "sub", "mul", "div", "remainder", "fmod", "pow", "maximum", "minimum", "eq", "ne", "lt", "le",
          "gt", "ge", "bitwise_and", "bitwise_or", "bitwise_xor", "logical_and", "atan2"]
DIVLIKE = ("div", "remainder", "fmod")


def _scalar(g, dt):
    kind = g.choice(("int", "float", "bool")) if g.chance(0.3) else \
        ("float" if dt in FLOATS else "bool" if dt == "bool" else "int")
    if kind == "bool":
        return g.chance(0.5)
    if kind == "int":
        return g.r.randint(0 if dt == "uint8" else -5, 5)
    if g.chance(0.05):
        return g.choice((math.inf, -math.inf, math.nan))
    return g.choice((-2.5, -1.5, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 3.25))


def g_binary(g, op, seed, index):
    dt = g.dtype()
    dt2 = dt if g.chance(0.65) else g.dtype()
    sa = g.shape()
    sb = g.broadcast_to(sa) if g.chance(0.8) else g.shape()
    if g.chance(0.5):
        sa, sb = sb, sa
    int_div = op in DIVLIKE
    a_mode = ("nomin" if int_div else "special") if g.chance(0.15) else "normal"
    b_mode = a_mode
    if int_div and g.chance(0.8):
        b_mode = "nonzero"
    a = g.tensor(sa, dt, mode=a_mode)
    inputs = [a]
    kind = g.r.random()
    if kind < 0.15:  # a Python scalar
        v = _scalar(g, dt2)
        if int_div and isinstance(v, int) and v == 0 and b_mode == "nonzero":
            v = 2
        bsrc = fmt(v)
    else:
        b = g.tensor(() if kind < 0.25 else sb, dt2, mode=b_mode)
        inputs.append(b)
        bsrc = "b"
    kw = []
    if op == "div" and g.chance(0.6):
        kw.append(f"rounding_mode={g.choice(('floor', 'trunc'))!r}")
    if op in ("add", "sub") and g.chance(0.2):
        kw.append(f"alpha={g.choice((2, -1, 0.5))}")
    args = ["a", bsrc]
    swap_scalar = bsrc != "b" and op in ("pow", "remainder", "bitwise_and", "bitwise_or", "bitwise_xor") \
        and g.chance(0.3)
    form = _forms(g, inplace=hasattr(torch.Tensor, op + "_"), method=True)
    if swap_scalar:
        args = [bsrc, "a"]
        form = g.choice(("functional", "out"))
    case = Case(seed, index, op, form, inputs,
                _call(op, "functional" if form == "out" else form, args, ", ".join(kw)))
    if form == "inplace":
        case.inplace_self = "a"
    if form == "out":
        _add_out(g, case)
    return case


def g_where(g, op, seed, index):
    sc = g.shape()
    c = g.tensor(sc, "bool" if g.chance(0.95) else "uint8", mode="normal", name="c")
    inputs = [c]
    args = ["c"]
    dt = g.dtype()
    for nm in ("a", "b"):
        if g.chance(0.15):
            args.append(fmt(_scalar(g, dt)))
        else:
            inputs.append(g.tensor(g.broadcast_to(sc), dt if g.chance(0.7) else g.dtype(), name=nm))
            args.append(nm)
    inputs.sort(key=lambda s: s.name != "a")
    form = "out" if g.chance(0.2) else "functional"
    case = Case(seed, index, op, "functional", inputs, f"torch.where({', '.join(args)})")
    if form == "out":
        _add_out(g, case)
    return case


def _dim_src(d):
    return "None" if d is None else fmt(d)


def g_reduce(g, op, seed, index):
    floats_only = op in ("std", "var", "norm")
    dt = g.dtype(FLOATS) if floats_only and g.chance(0.9) else g.dtype()
    shape = g.shape()
    a = g.tensor(shape, dt)
    rank = len(shape)
    kw = []
    meta = {}
    check = "plain"
    n_out = 1
    keep = g.chance(0.4)
    out_ok = True
    if op in ("sum", "mean", "amax", "amin", "any", "all", "std", "var", "norm"):
        if op in ("amax", "amin"):
            d = g.dims(rank) if g.chance(0.6) else g.dim(rank)
        else:
            r = g.r.random()
            d = None if r < 0.3 else g.dim(rank) if r < 0.65 else g.dims(rank)
        if d is not None:
            kw.append(f"dim={fmt(d)}")
            if g.chance(0.6):
                kw.append(f"keepdim={keep}")
        if op in ("sum", "mean") and g.chance(0.2):
            kw.append(f"dtype={DTYPES[g.choice(('float32', 'int64', 'float16', 'bfloat16'))]}")
        if op in ("std", "var") and g.chance(0.7):
            kw.append(f"correction={g.choice((0, 1, 2))}")
        if op == "norm":
            kw.insert(0, f"p={fmt(g.choice((1, 2, 3, 0, math.inf, -math.inf, 'fro', 0.5)))}")
    elif op == "prod":
        d = g.dim(rank, allow_none=True)
        if d is not None:
            kw.append(f"dim={d}")
            if g.chance(0.6):
                kw.append(f"keepdim={keep}")
        else:
            out_ok = False
        if g.chance(0.2):
            kw.append(f"dtype={DTYPES[g.choice(('float32', 'int64'))]}")
    elif op in ("argmax", "argmin"):
        d = g.dim(rank, allow_none=True)
        kw.append(f"dim={_dim_src(d)}")
        kw.append(f"keepdim={keep}")
        check, meta = "argmax", {"dim": d, "keepdim": keep}
    elif op in ("max", "min"):
        if g.chance(0.25):  # full reduction: a plain value
            d = None
        else:
            d = g.dim(rank)
            kw.append(f"dim={d}")
            kw.append(f"keepdim={keep}")
            check, meta, n_out = "maxdim", {"dim": d, "keepdim": keep}, 2
    elif op == "cumsum":
        d = g.dim(rank)
        kw.append(f"dim={d}")
        if g.chance(0.2):
            kw.append(f"dtype={DTYPES[g.choice(('float32', 'int64', 'int32'))]}")
    elif op == "topk":
        d = g.dim(rank)
        size = shape[d] if rank and -rank <= d < rank else 1
        k = size + 1 if g.chance(0.04) else g.r.randint(0, size)
        largest, srt = g.chance(0.6), g.chance(0.8)
        kw += [f"k={k}", f"dim={d}", f"largest={largest}", f"sorted={srt}"]
        check, meta, n_out = "topk", {"dim": d, "sorted": srt}, 2
    elif op in ("sort", "argsort"):
        d = g.dim(rank)
        desc, stable = g.chance(0.4), g.chance(0.3)
        kw += [f"dim={d}", f"descending={desc}"]
        if stable:
            kw.append("stable=True")
        check, meta = op, {"dim": d, "stable": stable}
        n_out = 2
        out_ok = op == "sort"
    else:
        raise KeyError(op)
    form = _forms(g, inplace=op == "cumsum", out=out_ok, method=True)
    case = Case(seed, index, op, form, [a], _call(op, "functional" if form == "out" else form, ["a"], ", ".join(kw)),
                check=check, meta=meta)
    if form == "inplace":
        case.inplace_self = "a"
    if form == "out":
        _add_out(g, case, n_out=n_out)
    return case


def g_shape(g, op, seed, index):
    dt = g.dtype()
    form = "functional"
    inputs = []
    if op in ("cat", "stack"):
        shape = g.shape(min_rank=0 if op == "stack" else 1)
        rank = len(shape)
        d = g.dim(rank + 1 if op == "stack" else rank)
        names = []
        for _ in range(g.choice((1, 2, 2, 3))):
            s = list(shape)
            if op == "cat" and rank and -rank <= d < rank and g.chance(0.7):
                s[d] = g.r.randint(0, 4)
            if g.chance(0.03) and s:
                s[0] += 1  # mismatched shapes: CPU raises
            sp = g.tensor(tuple(s), dt if g.chance(0.8) else g.dtype())
            inputs.append(sp)
            names.append(sp.name)
        expr = f"torch.{op}([{', '.join(names)}], dim={d})"
        if g.chance(0.2):
            case = Case(seed, index, op, form, inputs, expr)
            return _add_out(g, case)
        return Case(seed, index, op, form, inputs, expr)
    if op == "matmul":
        dt = g.dtype(FLOATS) if g.chance(0.9) else g.dtype()
        k = g.r.randint(0, 5) if g.chance(0.1) else g.r.randint(1, 6)
        m, n = g.r.randint(1, 6), g.r.randint(1, 6)
        ra, rb = g.choice((1, 2, 2, 3, 4)), g.choice((1, 2, 2, 3, 4))
        batch = g.shape(rank=max(ra, rb) - 2) if max(ra, rb) > 2 else ()
        sa = (k,) if ra == 1 else tuple(batch[len(batch) - (ra - 2):] if ra > 2 else ()) + (m, k)
        sb = (k,) if rb == 1 else tuple(batch[len(batch) - (rb - 2):] if rb > 2 else ()) + (k, n)
        if g.chance(0.03):
            sb = sb[:-1] + (sb[-1] + 1,) if rb == 1 else sb[:-2] + (sb[-2] + 1, sb[-1])
        a = g.tensor(sa, dt)
        b = g.tensor(sb, dt if g.chance(0.9) else g.dtype(FLOATS))
        case = Case(seed, index, op, "functional", [a, b], "torch.matmul(a, b)")
        if g.chance(0.15):
            _add_out(g, case)
        elif g.chance(0.2):
            case.form, case.expr = "method", "a.matmul(b)"
        return case
    shape = g.shape()
    rank = len(shape)
    a = g.tensor(shape, dt)
    inputs = [a]
    if op == "transpose":
        d0, d1 = g.dim(rank), g.dim(rank)
        return Case(seed, index, op, form, inputs, f"torch.transpose(a, {d0}, {d1})")
    if op == "permute":
        perm = list(range(rank))
        g.r.shuffle(perm)
        if g.chance(0.3):
            perm = [p - rank if g.chance(0.5) else p for p in perm]
        if g.chance(0.03):
            perm = perm + [0]
        return Case(seed, index, op, form, inputs, f"a.permute({fmt(tuple(perm))})")
    if op == "flip":
        return Case(seed, index, op, form, inputs, f"torch.flip(a, {fmt(g.dims(rank))})")
    if op == "roll":
        if g.chance(0.25):
            return Case(seed, index, op, form, inputs, f"torch.roll(a, {g.r.randint(-7, 7)})")
        ds = g.dims(rank) or (0,)
        shifts = tuple(g.r.randint(-7, 7) for _ in ds)
        return Case(seed, index, op, form, inputs, f"torch.roll(a, {fmt(shifts)}, {fmt(ds)})")
    if op in ("gather", "index_select"):
        d = g.dim(rank)
        size = shape[d] if rank and -rank <= d < rank else 1
        if op == "gather":
            ishape = tuple(g.r.randint(0, s) if i != (d % max(rank, 1)) else g.r.randint(0, 5)
                           for i, s in enumerate(shape))
        else:
            ishape = (g.r.randint(0, 6),) if rank or g.chance(0.5) else ()
        if size == 0:
            ishape = tuple(0 for _ in ishape) if ishape else (0,)
        idt = "int64" if op == "gather" or g.chance(0.7) else "int32"
        idx = g.tensor(ishape, idt, mode=f"index:{size}", name="i")
        inputs.append(idx)
        case = Case(seed, index, op, form, inputs, f"torch.{op}(a, {d}, i)")
        if g.chance(0.2):
            _add_out(g, case)
        return case
    if op == "narrow":
        d = g.dim(rank)
        size = shape[d] if rank and -rank <= d < rank else 1
        start = g.r.randint(-size, size) if size else 0
        s0 = start + size if start < 0 else start
        length = g.r.randint(0, size - s0) if g.chance(0.95) else size + 1
        return Case(seed, index, op, form, inputs, f"torch.narrow(a, {d}, {start}, {length})")
    if op == "masked_fill":
        m = g.tensor(g.broadcast_to(shape), "bool", name="m")
        inputs.append(m)
        if g.chance(0.2):
            inputs.append(g.tensor((), dt if g.chance(0.5) else g.dtype(), name="v"))
            val = "v"
        else:
            val = fmt(_scalar(g, dt))
        form = "inplace" if g.chance(0.3) else "functional"
        if form == "inplace":
            case = Case(seed, index, op, form, inputs, f"a.masked_fill_(m, {val})", inplace_self="a")
        else:
            case = Case(seed, index, op, form, inputs, f"torch.masked_fill(a, m, {val})")
        return case
    if op == "clamp":
        args = []
        for nm in ("lo", "hi"):
            r = g.r.random()
            if r < 0.2:
                args.append("None")
            elif r < 0.75:
                v = _scalar(g, dt)
                args.append(fmt(-abs(v) if nm == "lo" and not isinstance(v, bool) else v))
            else:
                inputs.append(g.tensor(g.broadcast_to(shape), dt if g.chance(0.8) else g.dtype(), name=nm))
                args.append(nm)
        form = _forms(g)
        case = Case(seed, index, op, form, inputs,
                    _call(op, "functional" if form == "out" else form, ["a", f"min={args[0]}", f"max={args[1]}"]))
        if form == "inplace":
            case.inplace_self = "a"
        if form == "out":
            _add_out(g, case)
        return case
    if op in ("tril", "triu"):
        if rank < 2 and g.chance(0.8):
            shape = g.shape(min_rank=2)
            inputs = [g.tensor(shape, dt, name="a")]
        form = _forms(g)
        case = Case(seed, index, op, form, inputs,
                    _call(op, "functional" if form == "out" else form, ["a", f"diagonal={g.r.randint(-3, 3)}"]))
        if form == "inplace":
            case.inplace_self = "a"
        if form == "out":
            # Contiguous outs only: ATen CPU's tril/triu(out=) into a batch-permuted out writes
            # outside the out's storage (heap corruption, "corrupted double-linked list", with
            # torch_tpu not even loaded), so CPU cannot be the reference there.
            _add_out(g, case, noncontiguous=False)
        return case
    if op == "repeat":
        reps = tuple(g.r.randint(0 if g.chance(0.1) else 1, 3) for _ in range(rank + g.r.randint(0, 2)))
        if g.chance(0.03):
            reps = reps[:-1] if rank else (-1,)
        return Case(seed, index, op, form, inputs, f"a.repeat{fmt(reps)}" if reps else "a.repeat(())")
    if op == "expand":
        base = [1 if g.chance(0.5) else d for d in shape]
        inputs = [g.tensor(tuple(base), dt, name="a")]
        target = list(shape)
        lead = [g.r.randint(1, 3) for _ in range(g.r.randint(0, 4 - rank))] if rank < 4 else []
        target = lead + [-1 if (g.chance(0.2)) else t for t in target]
        return Case(seed, index, op, form, inputs, f"a.expand({fmt(tuple(target))}).contiguous()")
    raise KeyError(op)


def g_selftest(g, op, seed, index):
    """Checks of the harness itself (tests/test_fuzz.py), never drawn unless asked for:
    a case whose tpu run aborts the process, and one whose tpu result is off by one."""
    a = g.tensor((3,), "float32", mode="normal", layout="contiguous")
    if op == "_selftest_abort":
        expr = "__import__('os').abort() if a.device.type == 'tpu' else a + 1"
    else:
        expr = "a + (1 if a.device.type == 'tpu' else 0)"
    return Case(seed, index, op, "functional", [a], expr)


GENERATORS = {}
for _op in UNARY:
    GENERATORS[_op] = g_unary
for _op in BINARY:
    GENERATORS[_op] = g_binary
GENERATORS["where"] = g_where
for _op in ("sum", "prod", "mean", "amax", "amin", "argmax", "argmin", "max", "min", "cumsum", "any", "all", "std",
            "var", "norm", "topk", "sort", "argsort"):
    GENERATORS[_op] = g_reduce
for _op in ("cat", "stack", "transpose", "permute", "flip", "roll", "gather", "index_select", "narrow", "masked_fill",
            "clamp", "tril", "triu", "repeat", "expand", "matmul"):
    GENERATORS[_op] = g_shape
OPS = list(GENERATORS)
GENERATORS["_selftest_abort"] = GENERATORS["_selftest_mismatch"] = g_selftest


def make_case(seed, index, ops=None):
    ops = list(ops) if ops else OPS
    g = Gen(seed, index)
    op = g.choice(ops)
    return GENERATORS[op](g, op, seed, index)


# --- running ----------------------------------------------------------------------------

def _materialize(spec, device):
    base = spec.base() if device.type != "meta" else torch.empty(spec.base_shape, dtype=DTYPES[spec.dtype],
                                                                 device="meta")
    if device.type == "tpu":
        base = base.to(device)
    return eval("_b" + spec.view, {"torch": torch, "_b": base}) if spec.view else base


def _flush(t):
    """t with subnormal values replaced by (signed) zero; t itself if it has none. Only
    float32 and bfloat16 (whose subnormals are float32 subnormals): XLA computes float16
    in float32, where float16's subnormals are normal numbers and survive."""
    if t.dtype not in (torch.float32, torch.bfloat16) or t.numel() == 0:
        return t
    sub = (t != 0) & (t.abs() < torch.finfo(t.dtype).tiny)
    return torch.where(sub, t * 0, t) if bool(sub.any()) else t


def _execute(case, device, transform=None):
    """(result, {name: input}, {name: base}) of the case on `device`."""
    bases, env = {}, {}
    for s in case.inputs:
        base = s.base()
        if transform is not None:
            base = transform(base)
        if device.type == "tpu":
            base = base.to(device)
        bases[s.name] = base
        env[s.name] = eval("_b" + s.view, {"torch": torch, "_b": base}) if s.view else base
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = eval(case.expr, {"torch": torch}, env)
    return res, env, bases


def _flat(res):
    if isinstance(res, torch.Tensor):
        return [res]
    if isinstance(res, (tuple, list)):
        out = []
        for r in res:
            out += _flat(r)
        return out
    return [res]


def _to_cpu(res):
    if isinstance(res, torch.Tensor):
        if res.device.type != "tpu":
            raise _Mismatch(f"result is on {res.device}, not tpu")
        return res.cpu()
    if isinstance(res, (tuple, list)):
        return [_to_cpu(r) for r in res]
    return res


class _Mismatch(AssertionError):
    pass


def _close(actual, expected, op, what):
    if not isinstance(expected, torch.Tensor):
        if actual != expected and not (isinstance(expected, float) and math.isnan(expected)
                                       and isinstance(actual, float) and math.isnan(actual)):
            raise _Mismatch(f"{what}: tpu {actual!r} != cpu {expected!r}")
        return
    if not isinstance(actual, torch.Tensor):
        raise _Mismatch(f"{what}: tpu returned {type(actual).__name__}, cpu a tensor")
    if actual.dtype != expected.dtype:
        raise _Mismatch(f"{what}: dtype tpu {actual.dtype} != cpu {expected.dtype}")
    if actual.shape != expected.shape:
        raise _Mismatch(f"{what}: shape tpu {tuple(actual.shape)} != cpu {tuple(expected.shape)}")
    rtol, atol = tolerance(expected.dtype, op)
    try:
        torch.testing.assert_close(actual, expected, rtol=rtol, atol=atol, equal_nan=True, check_stride=False)
    except AssertionError as e:
        detail = str(e).strip()
        if expected.numel() <= 16:
            detail += f"\ntpu: {actual.tolist()}\ncpu: {expected.tolist()}"
        else:
            bad = ~torch.isclose(actual.double(), expected.double(), rtol=rtol, atol=atol, equal_nan=True) \
                if expected.dtype != torch.bool else actual != expected
            i = bad.nonzero()[:3].tolist()
            detail += f"\nfirst differing indices {i}: tpu {[actual[tuple(k)].item() for k in i]} " \
                      f"cpu {[expected[tuple(k)].item() for k in i]}"
        raise _Mismatch(f"{what}: {detail}") from None


def _take(inp, dim, idx, keepdim=True):
    """inp's values at `idx` along `dim` (idx has keepdim shape unless keepdim=False)."""
    if inp.dim() == 0:
        return inp.expand(idx.shape).clone() if idx.dim() else inp.clone()
    if not keepdim:
        idx = idx.unsqueeze(dim)
    v = torch.gather(inp, dim, idx)
    return v if keepdim else v.squeeze(dim)


def _check_indices(idx, what):
    if not isinstance(idx, torch.Tensor) or idx.dtype != torch.int64:
        raise _Mismatch(f"{what}: indices dtype {getattr(idx, 'dtype', type(idx))}, cpu torch.int64")


def _compare(case, cpu_res, tpu_res, cpu_env, cpu_bases, tpu_bases):
    op, meta = case.op, case.meta
    a = cpu_env.get("a")
    if case.check == "plain":
        cr, tr = _flat(cpu_res), _flat(tpu_res)
        if len(cr) != len(tr):
            raise _Mismatch(f"tpu returned {len(tr)} outputs, cpu {len(cr)}")
        for k, (c, t) in enumerate(zip(cr, tr)):
            _close(t, c, op, f"output {k}")
    elif case.check in ("sort", "topk", "maxdim"):
        (cv, ci), (tv, ti) = cpu_res[:2], tpu_res[:2]
        d = meta["dim"]
        _close(tv, cv, op, "values") if case.check != "topk" or meta["sorted"] else \
            _close(tv.sort(dim=d).values if tv.dim() else tv, cv.sort(dim=d).values if cv.dim() else cv, op,
                   "values (unsorted topk, compared sorted)")
        _check_indices(ti, "indices")
        if ti.shape != ci.shape:
            raise _Mismatch(f"indices: shape tpu {tuple(ti.shape)} != cpu {tuple(ci.shape)}")
        if case.check == "sort" and meta.get("stable"):
            _close(ti, ci, op, "indices (stable sort)")
        else:
            keep = meta.get("keepdim", True)
            _close(_take(a, d, ti, keep), tv, op, "input at tpu's indices vs tpu's values")
    elif case.check == "argsort":
        _check_indices(tpu_res, "indices")
        d = meta["dim"]
        if tpu_res.shape != cpu_res.shape:
            raise _Mismatch(f"indices: shape tpu {tuple(tpu_res.shape)} != cpu {tuple(cpu_res.shape)}")
        if meta.get("stable"):
            _close(tpu_res, cpu_res, op, "indices (stable sort)")
        else:
            _close(_take(a, d, tpu_res), _take(a, d, cpu_res), op, "input at tpu's indices vs at cpu's")
    elif case.check == "argmax":
        _check_indices(tpu_res, "indices")
        if tpu_res.shape != cpu_res.shape:
            raise _Mismatch(f"indices: shape tpu {tuple(tpu_res.shape)} != cpu {tuple(cpu_res.shape)}")
        d, keep = meta["dim"], meta["keepdim"]
        src = a
        if d is None:
            src, d, keep = a.reshape(-1), 0, True
            tr, cr = tpu_res.reshape(1), cpu_res.reshape(1)
        else:
            tr, cr = tpu_res, cpu_res
        _close(_take(src, d, tr, keep), _take(src, d, cr, keep), op, "input at tpu's index vs at cpu's")
    # in-place and out= forms: the tensors written (and their bases, for views)
    if case.form in ("inplace", "out"):
        if case.check == "plain" or case.form == "inplace":  # (tie-checked outputs were checked above)
            for nm in case.inplace_self.split(","):
                _close(tpu_bases[nm], cpu_bases[nm], op, f"base of the written tensor {nm}")


def _is_compile_error(msg):
    return any(k in msg for k in ("PJRT", "stablehlo", "Compile"))


def _first_line(e):
    s = f"{type(e).__name__}: {e}".strip()
    return s.splitlines()[0] if s else type(e).__name__


# --- accepted differences: predicates (see KNOWN) ---------------------------------------

def _int_div_by_zero(o, kind):
    return kind == "tpu_accepts_cpu_rejects" and o.case.op in ("div", "remainder", "fmod") \
        and "ZeroDivisionError" in str(o.cpu_exc)


def _out_of_int_range(x, dtype):
    """Whether float tensor x holds nan, inf or a value outside integer `dtype`'s range."""
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0:
        return False
    info, x = torch.iinfo(dtype), x.double()
    return bool((~torch.isfinite(x) | (x <= info.min - 1.0) | (x >= info.max + 1.0)).any())


def _float_to_int_overflow(o, kind):
    if kind != "mismatch":
        return False
    case = o.case
    m = re.search(r"dtype=torch\.(u?int\d+)", case.expr)
    if m:  # the op converts its float inputs
        return any(_out_of_int_range(b, getattr(torch, m.group(1))) for b in _fresh_bases(case).values())
    outs = [s for s in case.inputs if s.name in case.inplace_self.split(",")] if case.form == "out" else []
    if len(outs) == 1 and DTYPES[outs[0].dtype] not in (torch.bool,) and not DTYPES[outs[0].dtype].is_floating_point:
        # the op's float result is converted into an integer out
        try:
            res, _, _ = _execute(dataclasses.replace(case, expr=case.expr.replace(f", out={outs[0].name})", ")")),
                                 torch.device("cpu"))
        except Exception:
            return False
        return _out_of_int_range(res, DTYPES[outs[0].dtype])
    return False


def _fresh_bases(case):
    return {s.name: s.base() for s in case.inputs}


def _cpu_noncontiguous_out(o, kind):
    case = o.case
    if kind not in ("mismatch", "tpu_accepts_cpu_rejects") or case.form != "out" or case.check != "plain" \
            or o.tpu_exc is not None:
        return False
    outs = [s for s in case.inputs if s.name in case.inplace_self.split(",")]
    if len(outs) != 1 or outs[0].layout == "contiguous":
        return False
    functional = case.expr.replace(f", out={outs[0].name})", ")")
    try:
        res, env, bases = _execute(dataclasses.replace(case, expr=functional, form="functional"),
                                   torch.device("cpu"))
        out = env[outs[0].name]
        if not isinstance(res, torch.Tensor) or out.shape != res.shape:
            return False
        out.copy_(res)
        _close(o.tpu_res, out, case.op, "output")
        _close(o.tpu_bases[outs[0].name], bases[outs[0].name], case.op, "out's base")
    except Exception:
        return False
    return True


def _cpu_empty_minmax_out(o, kind):
    case = o.case
    return kind == "tpu_error" and case.op in ("min", "max") and case.form == "out" and "dim=" not in case.expr \
        and o.cpu_env["a"].numel() == 0 and "Expected reduction dim to be specified" in str(o.tpu_exc)


def _inplace_on_expanded(o, kind):
    case = o.case
    return kind == "tpu_error" and case.form == "inplace" and case.inputs[0].layout == "expanded" \
        and "more than one element of the written-to tensor" in str(o.tpu_exc)


def _order_dependent_overflow(o, kind):
    case = o.case
    if kind != "mismatch" or case.op not in ("sum", "mean", "cumsum") or o.tpu_exc is not None:
        return False
    a = _fresh_bases(case).get("a")
    if a is None or a.dtype != torch.float32:
        return False
    x = a.double()
    x = x[torch.isfinite(x)]
    fmax = torch.finfo(torch.float32).max
    if not (x.clamp(min=0).sum() > fmax or x.clamp(max=0).sum() < -fmax):
        return False
    cr, tr = _flat(o.cpu_res), _flat(o.tpu_res)
    if len(cr) != 1 or not isinstance(tr[0], torch.Tensor) or tr[0].shape != cr[0].shape \
            or tr[0].dtype != cr[0].dtype or not cr[0].is_floating_point():
        return False
    rtol, atol = tolerance(cr[0].dtype, case.op)
    bad = ~torch.isclose(tr[0].double(), cr[0].double(), rtol=rtol, atol=atol, equal_nan=True)
    return bool((~torch.isfinite(tr[0][bad])).all())


def _subnormals_flushed(o, kind):
    """The mismatch goes away when CPU's inputs have their subnormals flushed to zero."""
    if kind != "mismatch" or o.tpu_exc is not None:
        return False
    if not any(_flush(b) is not b for b in _fresh_bases(o.case).values()):
        return False  # no subnormal inputs
    try:
        res, env, bases = _execute(o.case, torch.device("cpu"), transform=_flush)
        _compare(o.case, res, o.tpu_res, env, bases, o.tpu_bases)
    except Exception:
        return False
    return True


def _known(outcome, kind):
    """The name of the KNOWN difference that explains this failure, or None."""
    for name, (_reason, pred) in KNOWN.items():
        if globals()[pred](outcome, kind):
            return name
    return None


def xfail_reason(case):
    """The XFAIL_BUGS text of the first entry matching `case`, or None."""
    dtypes = {s.dtype for s in case.inputs}
    desc = None
    for key, text in XFAIL_BUGS.items():
        op, dtype, regex = (tuple(key) + (None,))[:3]
        name, _, form = op.partition("[")
        if name != case.op or (form and form.rstrip("]") != case.form):
            continue
        if dtype != "*" and dtype not in dtypes:
            continue
        if regex:
            desc = desc or case.describe()
            if not re.search(regex, desc):
                continue
        return text
    return None


@dataclasses.dataclass
class Outcome:
    """What one case did on each device (the *_res/*_bases are CPU tensors)."""
    case: Case
    cpu_exc: Exception | None = None
    tpu_exc: Exception | None = None
    cpu_res: object = None
    cpu_env: dict | None = None
    cpu_bases: dict | None = None
    tpu_res: object = None
    tpu_bases: dict | None = None


def _classify(o):
    """(kind, message) of a failed outcome, or None if it passes."""
    cpu_exc, tpu_exc = o.cpu_exc, o.tpu_exc
    if isinstance(tpu_exc, _Mismatch):
        return "mismatch", str(tpu_exc)
    if tpu_exc is not None and _is_compile_error(str(tpu_exc)):
        return "compile_error", (f"{_first_line(tpu_exc)}"
                                 + (f"\n(cpu raised {_first_line(cpu_exc)})" if cpu_exc is not None else ""))
    if cpu_exc is not None:
        if tpu_exc is None:
            return "tpu_accepts_cpu_rejects", f"cpu raised {_first_line(cpu_exc)}; tpu ran"
        if not isinstance(tpu_exc, type(cpu_exc)):
            return "wrong_exception", f"cpu raised {_first_line(cpu_exc)}\ntpu raised {_first_line(tpu_exc)}"
        return None
    if tpu_exc is not None:
        return "tpu_error", f"cpu ran; tpu raised {_first_line(tpu_exc)}"
    try:
        _compare(o.case, o.cpu_res, o.tpu_res, o.cpu_env, o.cpu_bases, o.tpu_bases)
    except _Mismatch as e:
        return "mismatch", str(e)
    except Exception as e:  # a comparison that cannot even be made (e.g. indices out of range)
        return "mismatch", f"comparing: {_first_line(e)}"
    return None


def _like(x, ref):
    """x (a result structure computed in float64) cast back to the dtypes of `ref`."""
    if isinstance(x, torch.Tensor) and isinstance(ref, torch.Tensor):
        return x.to(ref.dtype)
    if isinstance(x, (tuple, list)) and isinstance(ref, (tuple, list)) and len(x) == len(ref):
        return [_like(a, b) for a, b in zip(x, ref)]
    if isinstance(x, dict):
        return {k: _like(v, ref[k]) for k, v in x.items()}
    return x


def _passes_float64_reference(o):
    """Second opinion on a float mismatch: CPU's own float32/float16/bfloat16 result has
    rounding error (and half-precision overflow) of its own, which some formulas amplify:
    CPU's float16 prod over a dim multiplies in float16 and overflows to -inf where the
    exact product, -33362, is in range and tpu (accumulating in float32) returns -33376.
    The case is rerun on CPU with float inputs in float64, the results are rounded to
    CPU's result dtypes, and tpu passes if it matches that more exact reference within
    the same tolerance."""
    def up(t):
        return t.double() if t.is_floating_point() else t
    if not any(isinstance(t, torch.Tensor) and t.is_floating_point() for t in _flat(o.cpu_res)) and \
            not any(t.is_floating_point() for t in o.cpu_bases.values()):
        return False
    try:
        res, env, bases = _execute(o.case, torch.device("cpu"), transform=up)
        res, env, bases = _like(res, o.cpu_res), _like(env, o.cpu_env), _like(bases, o.cpu_bases)
        if isinstance(o.cpu_res, tuple) and isinstance(res, list):
            res = tuple(res)
        _compare(o.case, res, o.tpu_res, env, bases, o.tpu_bases)
    except Exception:
        return False
    return True


def run_case(case, phase=None, stats=None):
    """Runs one case on CPU and on tpu. Returns a Failure or None. `stats` (a Counter)
    counts passes that needed the float64 reference or a KNOWN difference."""
    o = Outcome(case)
    if phase:
        phase("cpu")
    try:
        o.cpu_res, o.cpu_env, o.cpu_bases = _execute(case, torch.device("cpu"))
    except Exception as e:  # CPU rejects: tpu must reject with the same type
        o.cpu_exc = e
    if phase:
        phase("tpu")
    try:
        res, _, bases = _execute(case, TPU)
        o.tpu_res = _to_cpu(res)
        o.tpu_bases = {k: _to_cpu(v) for k, v in bases.items()}
    except Exception as e:
        o.tpu_exc = e
    verdict = _classify(o)
    if verdict is None:
        return None
    kind, msg = verdict
    if kind == "mismatch" and o.cpu_exc is None and o.tpu_exc is None and _passes_float64_reference(o):
        if stats is not None:
            stats["passed on the float64 reference"] += 1
        return None
    known = _known(o, kind)
    if known:
        if stats is not None:
            stats[f"passed as KNOWN: {known}"] += 1
        return None
    return Failure(kind, case.seed, case.index, case.op, case.dtype, case.form, case.describe(), msg, case.repro())


def _progress(total, enabled):
    if not enabled:
        return None
    from tqdm import tqdm
    return tqdm(total=total, unit="case", dynamic_ncols=True, file=sys.stderr, mininterval=1.0)


def _run_inprocess(seed, indices, ops, skip_xfail, bar, verbose):
    failures = []
    for i in indices:
        case = make_case(seed, i, ops)
        if skip_xfail and xfail_reason(case):
            f = None
            STATS["skipped (XFAIL_BUGS)"] += 1
        else:
            if verbose:
                print(f"case {i}: {case.describe()}", file=sys.stderr, flush=True)
            f = run_case(case, stats=STATS)
        if f is not None:
            failures.append(f)
            if verbose:
                print(f.render(), file=sys.stderr, flush=True)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(failed=len(failures), refresh=False)
    return failures


STATS = collections.Counter()  # passes that needed a second look, skips; reset by run()
BATCH = 150          # cases per worker subprocess in --isolate mode
CASE_TIMEOUT = 300   # seconds a case may take before its worker is killed (compiles included)
MARK = "@@FUZZ "
STARTUP_RETRIES = 3  # times a worker that dies before its first case is restarted
STARTUP_WAIT = 30    # seconds to wait before that restart


def _worker_main(seed, start, stop, ops, skip_xfail):
    """Runs cases [start, stop) and reports on stdout, one JSON line per event."""
    out = sys.stdout

    def emit(obj):
        out.write(MARK + json.dumps(obj) + "\n")
        out.flush()

    for i in range(start, stop):
        case = make_case(seed, i, ops)
        if skip_xfail and xfail_reason(case):
            emit({"i": i, "done": True, "failure": None, "stats": {"skipped (XFAIL_BUGS)": 1}})
            continue
        stats = collections.Counter()
        f = run_case(case, phase=lambda p, i=i: emit({"i": i, "phase": p}), stats=stats)
        emit({"i": i, "done": True, "failure": dataclasses.asdict(f) if f else None, "stats": stats})


def _signal_name(rc):
    if rc < 0:
        try:
            return signal.Signals(-rc).name
        except ValueError:
            return f"signal {-rc}"
    return f"exit status {rc}"


def _run_isolated(seed, indices, ops, skip_xfail, bar, verbose):
    failures = []
    pending = list(indices)
    startup_retries = 0
    env = dict(os.environ, TORCH_TPU_CPU_FALLBACK=os.environ.get("TORCH_TPU_CPU_FALLBACK", "0"))
    while pending:
        batch, pending = pending[:BATCH], pending[BATCH:]
        start, stop = batch[0], batch[-1] + 1
        cmd = [sys.executable, "-m", "tools.fuzz", "--worker", "--seed", str(seed), "--start", str(start),
               "--stop", str(stop)]
        if ops:
            cmd += ["--ops", ",".join(ops)]
        if skip_xfail:
            cmd.append("--skip-xfail")
        with tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env, cwd=ROOT)
            lines = queue.Queue()

            def reader(p=proc, q=lines):
                for line in p.stdout:
                    q.put(line)
                q.put(None)

            threading.Thread(target=reader, daemon=True).start()
            current, phase, done = None, None, start
            hung = seen = False
            while True:
                try:
                    line = lines.get(timeout=CASE_TIMEOUT)
                except queue.Empty:
                    proc.kill()
                    hung = True
                    break
                if line is None:
                    break
                if not line.startswith(MARK):
                    continue
                ev = json.loads(line[len(MARK):])
                current, seen = ev["i"], True
                if ev.get("done"):
                    done, phase = current + 1, None
                    STATS.update(ev.get("stats") or {})
                    if ev["failure"]:
                        f = Failure(**ev["failure"])
                        failures.append(f)
                        if verbose:
                            print(f.render(), file=sys.stderr, flush=True)
                    if bar is not None:
                        bar.update(1)
                        bar.set_postfix(failed=len(failures), refresh=False)
                else:
                    phase = ev["phase"]
            rc = proc.wait()
            if seen:
                startup_retries = 0
            err.seek(0)
            tail = err.read().decode(errors="replace").strip().splitlines()[-6:]
        if done < stop and not hung and not seen and startup_retries < STARTUP_RETRIES:
            # The worker died before its first case: it could not start (e.g. torch_tpu's .so
            # being relinked by a concurrent build). Not the case's fault: wait and retry.
            startup_retries += 1
            print(f"fuzz: worker failed to start ({_signal_name(rc)}): {' | '.join(tail[-2:])}; "
                  f"retrying in {STARTUP_WAIT} s", file=sys.stderr, flush=True)
            time.sleep(STARTUP_WAIT)
            pending = batch + pending
            continue
        if done < stop:  # the worker died (or hung) inside case `done`
            case = make_case(seed, done, ops)
            why = "hung" if hung else _signal_name(rc)
            kind = "hang" if hung else ("cpu_abort" if phase == "cpu" else "abort")
            msg = f"worker {why} during the {phase or 'setup'} run of this case"
            if tail:
                msg += "\nstderr: " + "\n".join(tail)
            f = Failure(kind, seed, done, case.op, case.dtype, case.form, case.describe(), msg, case.repro())
            failures.append(f)
            if verbose:
                print(f.render(), file=sys.stderr, flush=True)
            if bar is not None:
                bar.update(1)
                bar.set_postfix(failed=len(failures), refresh=False)
            pending = list(range(done + 1, stop)) + pending
    return failures


def run(seed: int, cases: int, ops: list[str] | None = None, *, isolate: bool = False, skip_xfail: bool = False,
        progress: bool = False, verbose: bool = False, start: int = 0) -> list[Failure]:
    """Runs cases start..start+cases-1 of `seed` (ops drawn from `ops`, default OPS); returns the failures."""
    if ops:
        unknown = [o for o in ops if o not in GENERATORS]
        if unknown:
            raise ValueError(f"unknown ops {unknown}; known: {', '.join(OPS)}")
    indices = list(range(start, start + cases))
    STATS.clear()
    bar = _progress(cases, progress)
    try:
        fn = _run_isolated if isolate else _run_inprocess
        return fn(seed, indices, ops, skip_xfail, bar, verbose)
    finally:
        if bar is not None:
            bar.close()


def summary(cases, failures):
    """The summary table and the failures, one repro each, as text."""
    counts = collections.Counter(f.kind for f in failures)
    failed_cases = len({f.index for f in failures})
    skipped = STATS.get("skipped (XFAIL_BUGS)", 0)
    rows = [("cases", cases), ("passed", cases - failed_cases - skipped), ("skipped (XFAIL_BUGS)", skipped)] + \
        [(k, counts.get(k, 0)) for k in KINDS]
    w = max(len(k) for k, _ in rows)
    out = ["", "-" * (w + 10)] + [f"{k:<{w}}  {v:>7}" for k, v in rows] + ["-" * (w + 10)]
    notes = {k: v for k, v in STATS.items() if not k.startswith("skipped")}
    if notes:
        out += [f"{k}: {v}" for k, v in sorted(notes.items())] + [""]
    if failures:
        groups = collections.Counter((f.kind, f.op, f.dtype) for f in failures)
        out.append("by (kind, op, dtype of the first input):")
        out += [f"  {k:<24} {op:<14} {dt:<9} {n}" for (k, op, dt), n in sorted(groups.items())]
        out.append("")
        out += [f.render() for f in sorted(failures, key=lambda f: (f.kind, f.op, f.index))]
    return "\n".join(out)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cases", type=int, default=300)
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--case", type=int, help="run only this case index")
    p.add_argument("--ops", help="comma-separated op names (default: all)")
    p.add_argument("--isolate", action="store_true", help="run batches in subprocesses (survives aborts)")
    p.add_argument("--skip-xfail", action="store_true", help="skip the XFAIL_BUGS (op, dtype) cases")
    p.add_argument("--verbose", action="store_true", help="print each case and failure as it happens")
    p.add_argument("--list-ops", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stop", type=int, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    ops = [o.strip() for o in args.ops.split(",") if o.strip()] if args.ops else None
    if args.list_ops:
        print(" ".join(OPS))
        return 0
    if args.worker:
        _worker_main(args.seed, args.start, args.stop, ops, args.skip_xfail)
        return 0
    if args.case is not None:
        case = make_case(args.seed, args.case, ops)
        print(case.describe())
        print("repro:", case.repro())
        f = run_case(case)
        print(f.render() if f else "pass")
        return 1 if f else 0
    failures = run(args.seed, args.cases, ops, isolate=args.isolate, skip_xfail=args.skip_xfail, progress=True,
                   verbose=args.verbose, start=args.start)
    print(summary(args.cases, failures))
    return 1 if failures else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        traceback.print_exc(limit=0)
        sys.exit(130)
    except BrokenPipeError:  # output piped into head
        sys.exit(1)
