"""Regenerates tests/registered_ops.txt: every ATen (aten::) op with a PrivateUse1
(tpu) kernel, one per line, sorted. Run after adding kernels:

    python -m tools.update_registered_ops
"""
from __future__ import annotations

import os
import sys

PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    "tests", "registered_ops.txt")


def registered_ops():
    import torch

    import torch_tpu  # noqa: F401  (registers the kernels)

    # aten only: other namespaces (fsdp::, ...) register lazily when their
    # Python modules are imported, so their presence depends on the caller.
    return sorted(op for op in torch._C._dispatch_get_registrations_for_dispatch_key("PrivateUse1")
                  if op.startswith("aten::"))


def main():
    ops = registered_ops()
    with open(PATH, "w") as f:
        f.write("".join(op + "\n" for op in ops))
    print(f"wrote {len(ops)} ops to {os.path.relpath(PATH)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
