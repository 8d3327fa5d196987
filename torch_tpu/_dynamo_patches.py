"""Changes to dynamo (and Inductor) that ``torch.compile(backend="tpu")``
relies on, kept apart from the backend itself (torch_tpu/_compile.py).

Each patch acts on tpu compiles only (``_in_call``: inside a call of a
function compiled for tpu; ``_ours``: inside one that traces backward) and
leaves other backends' traces as they are. They are applied when the module
they change is imported (``_after_import``), so a plain ``import torch``
never pays for importing dynamo or Inductor:

- Inductor refuses tpu tensors with the fix in the message;
- optimizers: capturable on tpu, a traced ``zero_grad``, the LR scheduler's
  step wrapper traced through, lifted hyperparameters (_hyperparams);
- ``loss.backward()`` traced into the graph where no gradient hook would be
  skipped, and a returned loss kept in the same graph;
- quieter, cheaper tracing: no guard-latency profile, no recompile logs of
  our own resume frames.
"""
from __future__ import annotations

import functools
import itertools
import logging
import os
import weakref

from torch_tpu import _C, _hyperparams, _recompiles
from torch_tpu._after_import import after_import
from torch_tpu._compile import tpu_backend

logger = logging.getLogger("torch_tpu")

# --- torch.compile's default backend (Inductor) on tpu tensors ------------
# Inductor would generate Pallas (JAX) kernels for a device named "tpu" and
# fail deep inside with "No module named 'jax'". Registering our own entry
# for the device first makes it fail with the fix in the message instead.
_MESSAGE = ('torch.compile\'s default backend (inductor) cannot compile tpu tensors; '
            'use torch.compile(model, backend="tpu")')


class _RefuseMeta(type):
    def __getattr__(cls, name):  # Inductor reads class attributes before it builds one
        raise RuntimeError(_MESSAGE)


class _Refuse(metaclass=_RefuseMeta):
    def __init__(self, *args, **kwargs):
        raise RuntimeError(_MESSAGE)


def _guard_inductor(common) -> None:
    if common.get_scheduling_for_device("tpu") is None:
        common.register_backend_for_device("tpu", _Refuse, _Refuse)


# Dynamo makes a compiled optimizer "capturable" (step counters on the
# device, so the whole step is device work) only for CUDA and XPU
# parameters. tpu parameters qualify the same way; without it, Adam's CPU
# step counters keep the compiled optimizer step from replaying.
def _patch_dynamo_optimizer(mod) -> None:
    cls = getattr(mod, "OptimizerVariable", None)
    if cls is not None:
        _patch_optimizer_variable(cls)
    orig = getattr(cls, "_set_capturable", None)
    if orig is None or getattr(orig, "_torch_tpu", False):
        return

    def _set_capturable(self, tx):
        for group in self.value.param_groups:
            params = group.get("params", [])
            if ("capturable" in group and params and all(p.device.type == "tpu" for p in params)
                    and all(p not in self.value.state for p in params)):
                group["capturable"] = True
        return orig(self, tx)

    _set_capturable._torch_tpu = True
    cls._set_capturable = _set_capturable

    # Dynamo asks Inductor's CUDA-graph manager whether each gradient has a
    # static address; its first question imports Inductor (1.5 s on this
    # machine) even though the answer is always yes off CUDA.
    static = getattr(mod, "_is_static_for_cudagraphs", None)
    if static is not None and not getattr(static, "_torch_tpu", False):
        def _is_static_for_cudagraphs(x):
            return True if not x.is_cuda else static(x)

        _is_static_for_cudagraphs._torch_tpu = True
        mod._is_static_for_cudagraphs = _is_static_for_cudagraphs


# --- One program per training step -----------------------------------------
# With backward traced into the step's graph, two things still split a step
# at ``optimizer.step()``: an explicit ``torch._dynamo.graph_break()`` in the
# optimizer's ``_use_grad`` wrapper (there so that Inductor's AOT sees the
# optimizer as an inference graph), and dynamo's refusal to run the
# optimizer's ``_init_group`` on the host while the traced backward's
# ``.grad`` writes are still pending (the host ``.grad`` is stale, so the
# group would read the wrong tensors). For trace_backward tpu compiles both
# are lifted: the wrapper's break is dropped (we run the graph without AOT
# and need no such split), and ``_init_group`` runs on the host with each
# pending gradient stood in for by an empty tensor of its metadata, whose
# place in the group's lists is then given to the traced gradient. Every
# ``_init_group`` in torch.optim reads only a gradient's metadata (sparse or
# not, shape, dtype, for new state), so the stand-ins give the same groups
# and state. Any other pending write to a parameter (``p.data = ...``)
# keeps dynamo's graph break. Measured: the demo MLP's compiled AdamW step
# goes from two programs to one (docs/benchmarks.md).
_stand_ins: dict = {}  # id(stand-in tensor) -> the traced gradient's variable


def _pending_grads(opt_var, tx):
    """[(param, traced grad variable or None)] for the optimizer's parameters
    whose only pending mutation in this trace is ``.grad``; None when a
    parameter has another pending write (the caller then keeps dynamo's
    graph break)."""
    from torch._dynamo.variables import ConstantVariable, TensorVariable

    se = tx.output.side_effects
    out = []
    for group in opt_var.value.param_groups:
        for p in group["params"]:
            var = se.id_to_variable.get(id(p))
            if var is None or not se.has_pending_mutation(var):
                continue
            if set(se.store_attr_mutations.get(var, {})) != {"grad"}:
                return None
            g = se.load_attr(var, "grad", deleted_ok=True)
            if isinstance(g, ConstantVariable) and g.as_python_constant() is None:
                out.append((p, None))
            elif isinstance(g, TensorVariable):
                out.append((p, g))
            else:
                return None
    return out


def _stand_in(p, grad_var):
    import torch

    ev = grad_var.as_proxy().node.meta.get("example_value")
    if (isinstance(ev, torch.Tensor) and ev.dtype == p.dtype
            and all(isinstance(n, int) for n in (*ev.size(), *ev.stride()))):
        return torch.empty_strided(tuple(ev.size()), tuple(ev.stride()), dtype=ev.dtype, device=p.device)
    return torch.empty_like(p)


# ``opt.zero_grad()`` at the top of a step: torch.optim marks zero_grad never
# to be traced, so dynamo broke the step there, ran zero_grad eagerly and
# went on in a resume function: two frames' guards per step, and zero_grad's
# own Python, most of it a profiler ``record_function`` that records nothing
# unless a profiler runs (17% of the demo MLP's compiled step on its Python
# thread, py-spy). For trace_backward tpu compiles, the default
# ``set_to_none=True`` form of an optimizer that does not override zero_grad
# is traced as the plain loop below instead: the same effect (every
# parameter's ``.grad`` is None after it), with no read of the old
# gradients, so dynamo guards on none of them, and the step is one frame.
# ``set_to_none=False`` zeroes each existing gradient in place, as
# torch.optim's does (a gradient that itself requires grad, from
# ``create_graph=True``, keeps torch.optim's own version and its break).
def _traced_zero_grad(opt, set_to_none=True):
    for group in opt.param_groups:
        for p in group["params"]:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.zero_()


def _patch_optimizer_variable(cls) -> None:
    """dynamo's OptimizerVariable, for trace_backward tpu compiles:
    ``_init_group`` over pending gradients and a traced ``zero_grad()``
    (both above)."""
    call = getattr(cls, "call_method", None)
    wrap = getattr(cls, "wrap_tensor", None)
    check = getattr(cls, "graph_break_if_pending_mutation", None)
    getattr_ = getattr(cls, "generic_getattr", None)
    if call is None or wrap is None or check is None or getattr_ is None or getattr(call, "_torch_tpu", False):
        return

    def call_method(self, tx, name, args, kwargs):
        if name != "_init_group" or not _ours:
            return call(self, tx, name, args, kwargs)
        pending = _pending_grads(self, tx)
        if not pending:  # nothing pending, or a write dynamo must break for
            return call(self, tx, name, args, kwargs)
        saved = [(p, p.grad) for p, _ in pending]

        def restore():
            _stand_ins.clear()
            for p, g in saved:
                p.grad = g

        try:
            for p, g in pending:
                s = None if g is None else _stand_in(p, g)
                p.grad = s
                if s is not None:
                    _stand_ins[id(s)] = g
        except Exception:  # a gradient .grad would not take: dynamo's own path (a graph break)
            restore()
            return call(self, tx, name, args, kwargs)
        try:
            return call(self, tx, name, args, kwargs)
        finally:
            restore()

    def graph_break_if_pending_mutation(self, tx):
        if _stand_ins:  # the pending writes are the gradients stood in for
            return None
        return check(self, tx)

    def wrap_tensor(self, tx, tensor_value):
        g = _stand_ins.get(id(tensor_value)) if _stand_ins else None
        return g if g is not None else wrap(self, tx, tensor_value)

    def generic_getattr(self, tx, name):
        if name == "zero_grad" and _ours:
            import torch
            from torch._dynamo.variables import UserMethodVariable

            if type(self.value).zero_grad is torch.optim.Optimizer.zero_grad and not any(
                    p.grad is not None and p.grad.requires_grad
                    for g in self.value.param_groups for p in g["params"]):
                return UserMethodVariable(_traced_zero_grad, self)
        return getattr_(self, tx, name)

    for f in (call_method, graph_break_if_pending_mutation, wrap_tensor, generic_getattr):
        f._torch_tpu = True
        setattr(cls, f.__name__, f)


# dynamo wraps torch.optim's fused implementations (_fused_adam, _fused_sgd,
# ...) in torch.compiler.disable: Inductor has no lowering for them, so an
# optimizer built with fused=True breaks the graph and steps eagerly. tpu
# lowers each of their ops (_fused_adamw_ and the others are one kernel
# each), so for a tpu compile the original function is traced instead: one
# op in the graph, and the step joins the program.
_FUSED_OPTIMIZER_REASON = "don't trace into fused optimizer"


def _fused_optimizer_original(fn):
    import inspect

    if inspect.getattr_static(fn, "_torchdynamo_disable_msg", None) != _FUSED_OPTIMIZER_REASON:
        return None
    orig = inspect.getattr_static(fn, "_torchdynamo_orig_callable", None)
    return orig if getattr(orig, "__module__", "").startswith("torch.optim.") else None


# Creating an LR scheduler wraps ``optimizer.step`` in a function defined
# in torch/optim/lr_scheduler.py (it notes that step() ran, for a warning
# about calling them in the wrong order), and dynamo never traces that file:
# every step with a scheduler broke its graph at ``opt.step()``, two
# programs per step instead of one. For tpu compiles the wrapper's effect
# (the flag) is applied at trace time, once, and the optimizer's own step
# is traced in its place.
def _scheduler_wrapped_step(var, tx, args, kwargs, user_fn):
    import weakref as _weakref

    fn = var.value
    if not getattr(fn, "_wrapped_by_lr_sched", False) or var.source is None or not hasattr(var.source, "base"):
        return None
    refs = [c.cell_contents for c in (fn.__closure__ or ()) if isinstance(c.cell_contents, _weakref.ref)]
    opt = refs[0]() if len(refs) == 1 else None
    step = getattr(fn, "__wrapped__", None)
    if opt is None or step is None:
        return None
    from torch._dynamo.variables import VariableTracker

    opt._opt_called = True
    return user_fn(step).call_function(tx, [VariableTracker.build(tx, opt, var.source.base), *args], kwargs)


def _patch_optimizer_graph_break(mod) -> None:
    cls = getattr(mod, "SkipFunctionVariable", None)
    call = getattr(cls, "call_function", None)
    user_fn = getattr(mod, "UserFunctionVariable", None)
    if call is None or user_fn is None or getattr(call, "_torch_tpu", False):
        return
    import torch
    from torch.optim import optimizer

    use_grad = optimizer._use_grad_for_differentiable(lambda self: None).__code__

    def call_function(self, tx, args, kwargs):
        if _ours and self.value is torch._dynamo.graph_break and getattr(tx, "f_code", None) is use_grad:
            from torch._dynamo.variables import ConstantVariable

            return ConstantVariable.create(None)
        if _in_call:
            step = _scheduler_wrapped_step(self, tx, args, kwargs, user_fn)
            if step is not None:
                return step
            orig = _fused_optimizer_original(self.value)
            if orig is not None:
                from torch._dynamo.source import AttrSource

                # dynamo already guards on this same original (create_with_source).
                source = AttrSource(self.source, "_torchdynamo_orig_callable") if self.source else None
                return user_fn(orig, source=source).call_function(tx, args, kwargs)
        return call(self, tx, args, kwargs)

    call_function._torch_tpu = True
    cls.call_function = call_function


class _tpu_call_ctx:
    """Entered around every call of a function compiled for tpu, dynamo's
    tracing included (torch.compile's wrapper sets it as the backend's
    context). It marks the call as ours, so that the patches below act on
    tpu compiles only, and the outermost call runs with its optimizers'
    learning rates as tensors (_hyperparams: a scheduler's new lr is an
    input of the program, not a recompile)."""

    __slots__ = ("prev_call", "lr")

    def __enter__(self):
        global _in_call
        self.prev_call, _in_call = _in_call, True
        self.lr = None
        if not self.prev_call and _hyperparams._optimizers:
            self.lr = _hyperparams.lifted().__enter__()

    def __exit__(self, *exc):
        global _in_call
        _in_call = self.prev_call
        if self.lr is not None:
            self.lr.__exit__()
            self.lr = None


class _trace_backward_ctx(_tpu_call_ctx):
    """Also dynamo's trace_autograd_ops on while the call's frames are traced
    (set by _patch_compile_frame: dynamo reads it only when tracing, and setting
    dynamo's config on every call cost ~5 us a step)."""

    __slots__ = ("prev_ours",)

    def __enter__(self):
        global _ours
        super().__enter__()
        self.prev_ours, _ours = _ours, True

    def __exit__(self, *exc):
        global _ours
        _ours = self.prev_ours
        super().__exit__(*exc)


_in_call = False  # inside a call of a function compiled for tpu
_ours = False  # inside a call of a function compiled with trace_backward


# options={"trace_backward": True}: dynamo traces loss.backward() (as
# autograd.grad plus .grad updates) into the forward's graph, which the
# optimizer step joins (below), so a training step is one program and the
# autograd engine never runs. dynamo's rewrite would skip gradient hooks on the leaves
# (Tensor.register_hook, post-accumulate hooks, DDP's and FSDP's hooks on the
# gradient accumulator; the same on CPU), so it is used only for leaves
# without any (checked in C++, _has_grad_hooks) and never in a distributed
# job; otherwise backward graph-breaks and runs in the autograd engine, hooks
# included. Registering a hook on a leaf after its backward was traced raises
# (_check_hook_target): dynamo 2.14 fails to recompile a traced function into
# one that breaks at backward (a .grad size mismatch, also with aot_eager on
# CPU), and that failed compile broke later unrelated compiles in the process
# ("'m' not in cell_and_freevars"). On by default (docs/execution_modes.md);
# options={"trace_backward": False} or
# TORCH_TPU_COMPILE_TRACE_BACKWARD=0 leaves backward to the engine. A backend
# scopes dynamo's config with a `backend_ctx_ctor` (entered around every call
# of the compiled function, tracing included), but torch.compile's wrapper
# does not pass its backend's on; this sets it on the wrapper, for the tpu
# backend only.
def _trace_backward_default() -> bool:
    return os.environ.get("TORCH_TPU_COMPILE_TRACE_BACKWARD", "1") != "0"


def _patch_compile_wrapper() -> None:
    import torch

    cls = getattr(torch, "_TorchCompileWrapper", None)
    init = getattr(cls, "__init__", None)
    if init is None or getattr(init, "_torch_tpu", False):
        return

    def __init__(self, backend, mode, options, dynamic):
        init(self, backend, mode, options, dynamic)
        if getattr(self, "compiler_fn", None) is tpu_backend:
            trace = (options or {}).get("trace_backward", _trace_backward_default())
            self.backend_ctx_ctor = _trace_backward_ctx if trace else _tpu_call_ctx

    __init__._torch_tpu = True
    cls.__init__ = __init__


# Leaves whose gradient a traced backward writes (id -> weakref): a hook
# registered on one later would be skipped, so registering it raises. Not a
# guard and a recompile: dynamo (2.14) cannot recompile a function whose
# backward it traced into one that graph-breaks there while the leaves hold
# the .grad tensors the traced graph wrote (a .grad size mismatch, on CPU
# too), and the failed compile breaks later compiles in the process.
_traced_leaves: dict = {}


def _check_hook_target(t) -> None:
    ref = _traced_leaves.get(id(t))
    if ref is not None and ref() is t:
        raise RuntimeError(
            "cannot register a gradient hook on a tensor whose gradient a compiled function computes with "
            "loss.backward() traced into its graph (the traced backward would skip the hook). Register hooks "
            'before the function is first called, or compile it without options={"trace_backward": True}.')


def _patch_hook_registration() -> None:
    import torch

    for name in ("register_hook", "register_post_accumulate_grad_hook"):
        orig = getattr(torch.Tensor, name)
        if getattr(orig, "_torch_tpu", False):
            continue

        def make(orig):
            @functools.wraps(orig)
            def register(self, hook):
                if _traced_leaves:
                    _check_hook_target(self)
                return orig(self, hook)

            register._torch_tpu = True
            return register

        setattr(torch.Tensor, name, make(orig))


def _attribute_leaves(mod) -> dict:
    """{variable: tensor} for the leaf tensors this trace holds as graph
    attributes rather than inputs. dynamo makes a parameter an attribute once
    an optimizer has marked it a static address, or when the trace first
    reached it through the optimizer (a traced ``opt.zero_grad()``), and
    dynamo's ``backward()`` looks for its leaves among the graph's inputs
    only: such a loss's backward would find no leaf and compute nothing."""
    from torch._dynamo.symbolic_convert import InstructionTranslator

    tx = InstructionTranslator.current_tx()
    out = {}
    if tx is None:
        return out
    attrs = tx.output.nn_modules
    for var in tx.output.side_effects.id_to_variable.values():
        if isinstance(var, mod.TensorVariable) and var.proxy.node.op == "get_attr":
            t = attrs.get(var.proxy.node.target)
            if t is not None and t.requires_grad and t.grad_fn is None:
                out[var] = t
    return out


def _patch_dynamo_backward(mod) -> None:
    """Checks the leaves of a traced backward() for gradient hooks (see
    above)."""
    cls = getattr(mod, "TensorVariable", None)
    orig = getattr(cls, "_collect_backward_inputs", None)
    if orig is None or getattr(orig, "_torch_tpu", False):
        return

    def _collect_backward_inputs(self, vars_iter, error_on_non_leaf=False):
        attrs = {}
        if _ours and not error_on_non_leaf:
            attrs = _attribute_leaves(mod)
            vars_iter = itertools.chain(vars_iter, attrs)
        found = orig(self, vars_iter, error_on_non_leaf)
        if not _ours:  # other backends' traces are left as they are
            return found
        import torch
        from torch._dynamo.exc import unimplemented

        def fall_back(why, whose="whose hooks only the autograd engine runs"):
            unimplemented(
                gb_type="tpu: backward() left to the autograd engine", context=why,
                explanation=f"loss.backward() is not traced into the graph: {why}, {whose}.",
                hints=["Nothing to do: this is the same as without the option."])

        if not found:
            if self.has_grad_fn:
                # A loss that came into this graph with a grad_fn (made by an
                # earlier graph, or eagerly: GradScaler.scale runs outside any
                # graph) reaches leaves this graph does not hold. dynamo would
                # make backward() a no-op and every gradient would be lost.
                fall_back("the loss was computed outside this graph",
                          "whose leaves only the autograd engine reaches")
            return found
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            fall_back("a distributed job (DDP and FSDP synchronise gradients in hooks)")
        args = (var.proxy.node.meta.get("grapharg") for var in found)
        leaves = [a.example for a in args if a is not None and isinstance(a.example, torch.Tensor)]
        leaves += [attrs[var] for var in found if var in attrs]
        if any(_C._has_grad_hooks(t) for t in leaves):
            fall_back("a leaf tensor has gradient hooks")
        for t in leaves:
            _traced_leaves[id(t)] = weakref.ref(t, lambda _r, k=id(t): _traced_leaves.pop(k, None))
        return found

    _collect_backward_inputs._torch_tpu = True
    cls._collect_backward_inputs = _collect_backward_inputs
    _patch_shared_constants(cls)


# A step that calls loss.backward() and then returns the loss (or logits,
# or a metric computed from them) returns a tensor whose autograd graph the
# traced backward consumed. dynamo 2.14 then restarts the trace with a graph
# break at backward ("autograd.grad consumed returned tensor's grad_fn"), so
# backward and the optimizer step leave the program. In eager that graph
# is freed by backward() (a second backward raises), so the value is all a
# caller can use: for tpu compiles such outputs are returned detached, and
# the step stays one graph. The eager difference (requires_grad False, no
# grad_fn) is documented in docs/execution_modes.md.
def _patch_returned_outputs(mod) -> None:
    cls = getattr(mod, "OutputGraph", None)
    orig = getattr(cls, "_validate_outputs_safe_for_autograd_nodes", None)
    if orig is None or getattr(orig, "_torch_tpu", False):
        return

    def _validate_outputs_safe_for_autograd_nodes(self, rv, tx):
        if not _ours or not self.autograd_grad_consumed_grad_fns:
            return orig(self, rv, tx)
        from torch._dynamo.variables.builder import wrap_fx_proxy
        from torch._dynamo.variables.tensor import TensorVariable

        consumed = self.autograd_grad_consumed_grad_fns
        for var in rv:
            if not isinstance(var, TensorVariable) or not var.requires_grad:
                continue
            fake = var.as_proxy().node.meta.get("example_value")
            if getattr(fake, "grad_fn", None) is None:
                continue
            if mod.collect_reachable_grad_fns([(fake, None)]) & consumed:
                detached = wrap_fx_proxy(tx, self.create_proxy("call_method", "detach", (var.as_proxy(),), {}))
                # In place: the output's index is already bound to this variable.
                var.proxy = detached.proxy
                var.requires_grad = False
                var.has_grad_fn = False
        return orig(self, rv, tx)

    _validate_outputs_safe_for_autograd_nodes._torch_tpu = True
    cls._validate_outputs_safe_for_autograd_nodes = _validate_outputs_safe_for_autograd_nodes


# dynamo 2.14 keeps one shared ConstantVariable each for None, True and
# False, and reading ``t.grad`` or ``t.requires_grad`` of a tensor with a
# source gives the result that source in place: the shared None then stands
# for ``<that tensor>.grad`` in every later trace of the process, whose code
# reloads it from there instead of loading None. Seen as
# ``'opt' not in cell_and_freevars`` (or ``'m'``) in an unrelated later
# compile, on CPU backends too, and as a ``.grad = None`` written from a
# stale ``.grad``. The two readers get a fresh constant instead; this fixes
# dynamo for every backend in the process, since any of them can leave the
# shared one wrong for the next.
def _patch_shared_constants(cls) -> None:
    from torch._dynamo.variables import constant

    shared = tuple(getattr(constant, n, None) for n in
                   ("CONSTANT_VARIABLE_NONE", "CONSTANT_VARIABLE_TRUE", "CONSTANT_VARIABLE_FALSE"))
    for name in ("method_attr_grad", "method_attr_requires_grad"):
        orig = getattr(cls, name, None)
        if orig is None or getattr(orig, "_torch_tpu", False):
            continue

        def make(orig):
            @functools.wraps(orig)
            def handler(self, tx):
                r = orig(self, tx)
                if r is not None and any(r is c for c in shared):
                    r = constant.ConstantVariable(r.value)
                return r

            handler._torch_tpu = True
            return handler

        setattr(cls, name, make(orig))


def _skip_for_tpu(mod, name: str, logs: tuple, value) -> None:
    """Replaces ``mod.name``, work dynamo does only for the loggers ``logs``,
    with one that returns ``value`` inside calls of tpu-compiled functions
    while none of those loggers is on. The original stays reachable as
    ``__wrapped__`` (tests swap it)."""
    orig = getattr(mod, name, None)
    if orig is None or getattr(orig, "_torch_tpu", False):
        return
    loggers = [lg for lg in (getattr(mod, n, None) for n in logs) if lg is not None]

    def skipped(*args, **kwargs):
        if _in_call and not any(lg.isEnabledFor(logging.DEBUG) for lg in loggers):
            return value
        return skipped.__wrapped__(*args, **kwargs)

    skipped.__name__ = name
    skipped.__wrapped__ = orig
    skipped._torch_tpu = True
    setattr(mod, name, skipped)


# After building a frame's guards, dynamo times one evaluation of them for a
# debug log line and a compile metric, after flushing the CPU caches with a
# large buffer: 26-150 ms per compiled frame on these VMs, a tenth to a third
# of a small model's first compiled step. For tpu compiles it is skipped
# unless guard logging is on (TORCH_LOGS=guards), when the figure is read.
def _patch_guard_profile(mod) -> None:
    _skip_for_tpu(mod, "profile_guard_manager", ("guards_log",), 0.0)
    _recompiles.patch(mod)


# Dynamo names the function around each traced call for its trace_call log
# (TORCH_LOGS=trace_call), building the line even with the log off; the
# name comes from tokenizing the whole source file, once per file: 0.1 s of
# a small model's first compiled step (torch/optim/adamw.py, nn modules).
# For tpu compiles it is looked up only when one of those logs is on; the
# header then reads "file:line in code" without "(function)".
def _patch_funcname(mod) -> None:
    _skip_for_tpu(mod, "get_funcname", ("trace_call_log", "trace_source_log"), None)


# After a graph break (a step's opt.zero_grad(), which torch.optim keeps
# out of graphs) dynamo continues in a generated resume function, which it
# compiles only if its frame holds a tensor or a module in its locals (or
# imports torch.* by name). A step that reads its model, optimizer and data
# from module globals, as most training scripts do, has none there, so
# dynamo ran the rest of the step eagerly: forward and backward op by op
# and the autograd engine, on CPU's backends as well. For functions
# compiled for tpu, a resume function of that function is always compiled,
# as the function itself is.
def _patch_resume_frames(mod) -> None:
    orig = getattr(mod, "has_tensor_in_frame", None)
    if orig is None or getattr(orig, "_torch_tpu", False):
        return

    def has_tensor_in_frame(frame):
        if _in_call and frame.f_code.co_name.startswith("torch_dynamo_resume_in_"):
            return True
        return orig(frame)

    has_tensor_in_frame._torch_tpu = True
    mod.has_tensor_in_frame = has_tensor_in_frame
    _patch_compile_frame(mod)
    _recompiles.patch(mod)


# dynamo's trace_autograd_ops, on while it traces a frame of a function
# compiled with trace_backward (_trace_backward_ctx): dynamo reads it only
# then (variables/tensor.py and torch.py; AOTAutograd inside the backend).
def _patch_compile_frame(mod) -> None:
    orig = getattr(mod, "_compile", None)
    if orig is None or getattr(orig, "_torch_tpu", False):
        return

    @functools.wraps(orig)
    def _compile(*args, **kwargs):
        from torch._dynamo import config

        if not _ours or config.trace_autograd_ops:
            return orig(*args, **kwargs)
        config.trace_autograd_ops = True
        try:
            return orig(*args, **kwargs)
        finally:
            config.trace_autograd_ops = False

    _compile._torch_tpu = True
    mod._compile = _compile


# Module name -> what to run right after it is imported.
_AFTER_IMPORT = {
    "torch._inductor.codegen.common": _guard_inductor,
    "torch._dynamo.variables.optimizer": _patch_dynamo_optimizer,
    "torch._dynamo.variables.tensor": _patch_dynamo_backward,
    "torch._dynamo.variables.functions": _patch_optimizer_graph_break,
    "torch._dynamo.guards": _patch_guard_profile,
    "torch._dynamo.symbolic_convert": _patch_funcname,
    "torch._dynamo.convert_frame": _patch_resume_frames,
    "torch._dynamo.output_graph": _patch_returned_outputs,
}


def _install() -> None:
    _hyperparams._install()
    _patch_compile_wrapper()
    _patch_hook_registration()
    for name, patch in _AFTER_IMPORT.items():
        after_import(name, patch)
