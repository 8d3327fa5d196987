"""Why a function compiled for tpu compiled again, in words a user can act on.

dynamo recompiles a frame when one of its guards fails: a size it
specialised on changed, a Python number it baked in changed, an object it
relied on changed shape. It says so only under ``TORCH_LOGS=recompiles``.
For tpu compiles each failed guard is read here, named (the number, with
its optimizer and group, or the size), warned about once per cause with the
fix, and kept for ``torch_tpu.debug.compile_report()``.
"""
from __future__ import annotations

import re
import warnings

# cause -> [count, fix]
causes: dict[str, list] = {}

_SIZE = re.compile(r"tensor '(?P<name>.+?)' size mismatch at index (?P<dim>\d+)\. expected (?P<was>\d+), "
                   r"actual (?P<now>\d+)")
_GROUP = re.compile(r"^(?P<expr>.*?\.param_groups\[(?P<group>\d+)\]\['(?P<key>\w+)'\](?:\[\d+\])?) "
                    r"== (?P<was>.+?)\s*(#|$)")
_NUMBER = re.compile(r"^(?P<expr>\S+) == (?P<was>-?(?:\d+\.?\d*(?:e[-+]?\d+)?|inf|nan))\s*(#|$)")


class RecompileWarning(UserWarning):
    """A function compiled with backend="tpu" compiled again (torch_tpu.debug.compile_report() lists every cause)."""


def explain(reason: str) -> tuple[str, str] | None:
    """(cause, fix) for one of dynamo's guard-failure lines, or None for a
    structural change (new optimizer state, a new object) that settles after
    the first steps."""
    line = re.sub(r"^\d+/\d+: ", "", reason.strip().lstrip("- ").strip())  # dynamo's compile id
    m = _SIZE.search(line)
    if m:
        return (f"the size of {m['name']} (dim {m['dim']}) changed from {m['was']} to {m['now']}",
                "mark the dimension dynamic (torch._dynamo.mark_dynamic(t, dim)) or compile with dynamic=True; "
                "or pad to a few fixed lengths")
    m = _GROUP.match(line)
    if m:
        owner = re.sub(r"^[GL]\['(\w+)'\]$", r"\1", m["expr"].split(".param_groups")[0])
        return (f"param_groups[{m['group']}]['{m['key']}'] of the optimizer {owner} changed",
                "the lr, Adam's and AdamW's betas, and SGD's momentum and weight decay are inputs of the program "
                "and may change freely; other hyperparameters (eps, dampening, Adam's weight decay) are constants "
                "of it: change them rarely")
    m = _NUMBER.match(line)
    if m:
        return (f"the Python number {m['expr']} changed",
                "pass a value that changes between calls as a tensor, or keep it constant")
    return None


def note(reasons: list[str]) -> None:
    """Records the causes of one recompile and warns once about each new one."""
    for reason in reasons:
        for line in reason.splitlines():
            found = explain(line)
            if found is None:
                continue
            cause, fix = found
            # One warning per place, whatever the values (a number that
            # changes every step would otherwise warn every step).
            key = re.sub(r"changed from .*", "", cause)
            entry = causes.get(key)
            if entry is None:
                entry = causes[key] = [0, cause, fix]
            entry[0] += 1
            entry[1] = cause
            # A size's first change is dynamo's automatic dynamic at work (it
            # recompiles once with that size symbolic): warned about only if
            # the size makes it compile again after that.
            if entry[0] == (2 if cause.startswith("the size") else 1):
                warnings.warn(f'torch.compile(backend="tpu") compiled again because {cause}. Fix: {fix}.',
                              RecompileWarning, stacklevel=2)


def report() -> list[str]:
    return [f"  {n}x: {cause}. Fix: {fix}." for n, cause, fix in sorted(causes.values(), key=lambda e: -e[0])]


def patch(mod) -> None:
    """Wraps dynamo's get_and_maybe_log_recompilation_reasons, where it is
    defined (guards.py) and where it was imported by name (convert_frame.py,
    which calls it)."""
    orig = getattr(mod, "get_and_maybe_log_recompilation_reasons", None)
    if orig is None or getattr(orig, "_torch_tpu", False):
        return
    from torch_tpu import _dynamo_patches

    def get_and_maybe_log_recompilation_reasons(*args, **kwargs):
        reasons = orig(*args, **kwargs)
        if _dynamo_patches._in_call and not kwargs.get("skip_logging"):
            note(reasons)
        return reasons

    get_and_maybe_log_recompilation_reasons._torch_tpu = True
    mod.get_and_maybe_log_recompilation_reasons = get_and_maybe_log_recompilation_reasons
