"""Optimizer learning rates as program inputs, not baked constants.

An LR scheduler writes a new Python float into ``param_group["lr"]`` on
every step. A compiled step (``torch.compile(backend="tpu")``) would bake
that float into its program: dynamo guards on its value and recompiles for
every new one, then gives up at its recompile limit and runs the step
eagerly.

Instead, for the duration of a compiled call, each tpu optimizer group's
float ``lr`` is stood in for by a 0-d tpu tensor of its own (the
*shadow*), refreshed in place whenever the float changed. The program
reads the shadow as an input; dynamo guards on its metadata only. Outside
the call the group holds the user's float again, so schedulers,
``get_last_lr()``, logging and ``state_dict()`` see what they always did.
This is the "tensor lr with a capturable optimizer" pattern that PyTorch
recommends for compiled optimizers, applied without asking the user to
change the optimizer's construction. (A captured ``torch.tpu.graph`` holds
its numbers as constants and raises at replay if one changed: graphs.py.)

``lr`` is lifted; Adam's and AdamW's ``betas`` (OneCycleLR cycles
beta1); and SGD's ``momentum`` and ``weight_decay`` once nonzero
(OneCycleLR cycles SGD's momentum too). torch.optim's SGD tests those two
in Python (``if momentum != 0``), which a tensor would turn into a graph
break, so a tpu SGD whose group holds a lifted one steps through
``_sgd_step`` below: the same update, with the branches taken from
whether the number is lifted (lifted means nonzero when it was lifted; a
lifted number set back to 0 computes what 0 computes). The other
hyperparameters (eps, dampening, Adagrad's and RMSprop's) stay constants
of the program, and a change recompiles.
"""
from __future__ import annotations

import weakref

import torch

# Optimizers with a parameter group on tpu (registered at add_param_group).
_optimizers: weakref.WeakSet = weakref.WeakSet()
# optimizer -> {(id(group), key): [shadow (a tensor, or a pair for betas),
# the number(s) it holds]} (group dicts cannot be weakly referenced; an
# optimizer's groups live as long as it does)
_shadows: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _float(v) -> bool:
    return type(v) in (float, int)


def _lifted_keys(opt, group) -> tuple:
    """The group's hyperparameters that become tensors: those whose tensor
    form every path of this group's step accepts (also eagerly, after a
    graph break). lr: capturable and fused steps, and SGD's and Adagrad's
    always. Adam's and AdamW's betas (OneCycleLR cycles beta1): their
    capturable foreach step."""
    capturable, fused = group.get("capturable"), group.get("fused")
    keys = ()
    if capturable or fused or isinstance(opt, (torch.optim.SGD, torch.optim.Adagrad)):
        keys = ("lr",)
    if capturable and not fused and isinstance(opt, torch.optim.Adam | torch.optim.AdamW):
        keys += ("betas",)
    step = type(opt).step
    if getattr(step, "__wrapped__", step) is _sgd_step and not fused and not group.get("differentiable"):
        keys += _SGD_KEYS
    return keys


_SGD_KEYS = ("momentum", "weight_decay")


def _on_tpu(group) -> bool:
    params = group.get("params") or ()
    return bool(params) and all(p.device.type == "tpu" for p in params)


def _make_capturable(opt, group) -> None:
    """What dynamo does when it first traces an optimizer whose state is not
    yet created (its step counters then live on the device); done before the
    trace so that the first trace already takes the lr as an input."""
    if "capturable" in group and not group["capturable"] and not any(p in opt.state for p in group["params"]):
        group["capturable"] = True


def _new_scalar(value, device):
    return torch.tensor(float(value), dtype=torch.float32, device=device)


def _shadow_for(opt, group, key, value):
    """The tensor form of group[key] (a number, or a tuple of numbers for
    betas), made once and refreshed in place when the value changed."""
    groups = _shadows.get(opt)
    if groups is None:
        groups = _shadows[opt] = {}
    entry = groups.get((id(group), key))
    device = group["params"][0].device
    if entry is None:
        shadow = tuple(_new_scalar(v, device) for v in value) if key == "betas" else _new_scalar(value, device)
        entry = groups[(id(group), key)] = [shadow, value]
    elif entry[1] != value:
        # In place: the same tensors, so guards and captures see one input.
        if key == "betas":
            for t, v in zip(entry[0], value):
                t.fill_(float(v))
        else:
            entry[0].fill_(float(value))
        entry[1] = value
    return entry[0]


def _number(key, value):
    """The number(s) group[key] holds, or None where it is not lifted. A CPU
    0-d tensor lr (PyTorch's advice for compiled optimizers) is read on the
    host: as a CPU tensor inside the program it would make the step's graph
    run op by op."""
    if key == "betas":
        ok = type(value) is tuple and len(value) == 2 and all(_float(v) for v in value)
        return value if ok else None
    if _float(value):
        return value
    if isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() == 0 and not value.requires_grad:
        return value.item()
    return None


def _versions(shadow):
    return tuple(t._version for t in shadow) if type(shadow) is tuple else shadow._version


class lifted:
    """Swaps the numbers of every registered tpu optimizer group for their
    shadows on enter, and puts the numbers back on exit. A scheduler
    stepped inside the window fills a shadow in place; its new value is
    read back then (the one host read, for that rare case)."""

    __slots__ = ("swapped",)

    def __init__(self):
        self.swapped = None

    def __enter__(self):
        swapped = None
        for opt in tuple(_optimizers):
            for group in opt.param_groups:
                params = group.get("params")
                # On every compiled call: the first parameter stands for the
                # group (registration checked them all).
                if not params or params[0].device.type != "tpu":
                    continue
                _make_capturable(opt, group)
                for key in _lifted_keys(opt, group):
                    value = group.get(key)
                    number = _number(key, value)
                    if number is None:
                        continue
                    if number == 0 and key in _SGD_KEYS and (id(group), key) not in _shadows.get(opt, {}):
                        continue  # zero until it first changes: the branch stays out of the program
                    shadow = _shadow_for(opt, group, key, number)
                    group[key] = shadow
                    if swapped is None:
                        swapped = []
                    swapped.append((opt, group, key, shadow, value, _versions(shadow)))
        self.swapped = swapped
        return self

    def __exit__(self, *exc):
        swapped, self.swapped = self.swapped, None
        if swapped is None:
            return
        for opt, group, key, shadow, value, versions in swapped:
            if group.get(key) is not shadow:
                continue  # the step put something else there: keep it
            if _versions(shadow) != versions:  # filled inside the window
                number = tuple(t.item() for t in shadow) if key == "betas" else shadow.item()
                _shadows[opt][(id(group), key)][1] = number
                if isinstance(value, torch.Tensor):
                    value.fill_(number)
                else:
                    value = number
            group[key] = value


def _lifted(v) -> bool:
    return isinstance(v, torch.Tensor)


def _sgd_group(opt, group) -> None:
    """torch.optim.SGD's update for one group whose momentum or weight decay
    is a lifted tensor (the math of torch.optim.SGD's documentation)."""
    params, grads, bufs = [], [], []
    opt._init_group(group, params, grads, bufs)
    if not params:
        return
    momentum, decay, lr = group["momentum"], group["weight_decay"], group["lr"]
    g = torch._foreach_neg(grads) if group["maximize"] else list(grads)
    if _lifted(decay) or decay != 0:
        g = torch._foreach_add(g, torch._foreach_mul(params, decay))
    if _lifted(momentum) or momentum != 0:
        dampening = group["dampening"]
        for i, (p, b) in enumerate(zip(params, bufs)):
            if b is None:
                b = torch.clone(g[i]).detach()
            else:
                b.mul_(momentum).add_(g[i], alpha=1 - dampening)
            bufs[i] = b
            opt.state[p]["momentum_buffer"] = b
        g = torch._foreach_add(g, torch._foreach_mul(bufs, momentum)) if group["nesterov"] else bufs
    if _lifted(lr):
        torch._foreach_sub_(params, torch._foreach_mul(g, lr))
    else:
        torch._foreach_add_(params, g, alpha=-lr)


def _sgd_step(self, closure=None):
    """SGD.step: torch.optim's own unless a group holds a lifted momentum or
    weight decay (inside a compiled call only)."""
    if not any(_lifted(g["momentum"]) or _lifted(g["weight_decay"]) for g in self.param_groups):
        return _sgd_step.original(self, closure)
    loss = None
    if closure is not None:
        with torch.enable_grad():
            loss = closure()
    with torch.no_grad():
        for group in self.param_groups:
            _sgd_group(self, group)
    return loss


def _sgd_init_group(self, group, params, grads, bufs):
    """SGD._init_group tests `group["momentum"] != 0`; a lifted momentum is
    nonzero by construction, and reading it would be a host read."""
    momentum = group["momentum"]
    if not _lifted(momentum):
        return _sgd_init_group.original(self, group, params, grads, bufs)
    group["momentum"] = 1.0
    try:
        return _sgd_init_group.original(self, group, params, grads, bufs)
    finally:
        group["momentum"] = momentum


def _register(opt) -> None:
    if any(_on_tpu(g) for g in opt.param_groups):
        _optimizers.add(opt)


def _install() -> None:
    add = torch.optim.Optimizer.add_param_group
    if getattr(add, "_torch_tpu", False):
        return

    def add_param_group(self, param_group):
        add(self, param_group)
        _register(self)

    add_param_group.__doc__ = add.__doc__
    add_param_group._torch_tpu = True
    torch.optim.Optimizer.add_param_group = add_param_group
    # Optimizer.__init__ wraps a class's step once with its hook runner
    # (profile_hook_step, marked `hooked`); the wrapped function is replaced,
    # and the next SGD() wraps ours.
    step = torch.optim.SGD.step
    _sgd_step.original = step.__wrapped__ if getattr(step, "hooked", False) else step
    _sgd_step.__doc__ = _sgd_step.original.__doc__
    torch.optim.SGD.step = _sgd_step
    _sgd_init_group.original = torch.optim.SGD._init_group
    torch.optim.SGD._init_group = _sgd_init_group
