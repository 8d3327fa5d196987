"""Every ATen op registered for the tpu (PrivateUse1) key is listed in
tests/registered_ops.txt; a kernel that disappears (a lost TORCH_LIBRARY_IMPL
line, a merge accident) fails here. New kernels are fine: regenerate the list
with `python -m tools.update_registered_ops`."""
import warnings

from tools.update_registered_ops import PATH, registered_ops


def _committed():
    with open(PATH) as f:
        return {line.strip() for line in f if line.strip()}


def test_no_registered_op_disappeared():
    now = set(registered_ops())
    committed = _committed()
    gone = sorted(committed - now)
    new = sorted(now - committed)
    if new:
        warnings.warn(f"{len(new)} newly registered ops (e.g. {', '.join(new[:5])}) are not in "
                      "tests/registered_ops.txt: run `python -m tools.update_registered_ops`")
    assert not gone, (f"{len(gone)} ops lost their tpu kernel: {', '.join(gone[:30])}"
                      + (" ..." if len(gone) > 30 else ""))


def test_list_is_sorted_and_unique():
    with open(PATH) as f:
        lines = [line.strip() for line in f if line.strip()]
    assert lines == sorted(set(lines)), "regenerate with `python -m tools.update_registered_ops`"


def test_op_index_is_current():
    # docs/op_index.md maps each ATen op to the file registering its kernel.
    from tools.update_registered_ops import INDEX, render_index

    with open(INDEX) as f:
        committed = f.read()
    assert committed == render_index(registered_ops()), "regenerate with `python -m tools.update_registered_ops`"
