"""Checks that csrc/ folders include only the layers below them.

    python -m tools.check_layers

Each folder of csrc/ is a layer (docs/architecture.md, "Layers"); a file may
include headers of its own layer and of the layers LAYERS allows it. An
include that points up fails the check, naming the file and the layer, so
a new upward dependency is caught in `make lint` rather than in review.
The build checks the same order for symbols (CMakeLists.txt, tt_check_*).
EXCEPTIONS would list an include that must point up, with its reason; the
check fails when a listed one is gone, so the list stays true.
"""
from __future__ import annotations

import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# layer -> the layers it may include (besides itself).
LAYERS = {
    "runtime": set(),
    "ir": {"runtime"},  # runtime/log.h
    "compile": {"runtime"},
    "aten": {"runtime", "ir", "compile"},
    "record": {"runtime", "ir", "compile", "aten"},
    "eager": {"runtime", "ir", "compile", "aten", "record"},
    "ops": {"runtime", "ir", "compile", "aten", "record"},
    "hooks": {"runtime", "ir", "compile", "aten", "record", "eager", "ops"},
    "python": {"runtime", "ir", "compile", "aten", "record", "eager", "ops", "hooks"},
}

# (file, included layer) -> why, for an include that must point up. None
# does: the build's layer checks (CMakeLists.txt, tt_check_*) would refuse
# the link anyway.
EXCEPTIONS: dict = {}

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/', re.M)


def violations(root: str = ROOT) -> set:
    found = set()
    for path in glob.glob(os.path.join(root, "csrc", "**", "*"), recursive=True):
        if not path.endswith((".cc", ".h")):
            continue
        rel = os.path.relpath(path, root).replace(os.sep, "/")
        layer = rel.split("/")[1]
        if layer not in LAYERS:
            continue
        with open(path) as f:
            for inc in _INCLUDE.findall(f.read()):
                if inc in LAYERS and inc != layer and inc not in LAYERS[layer]:
                    found.add((rel, inc))
    return found


def main() -> int:
    found = violations()
    new = sorted(found - EXCEPTIONS.keys())
    gone = sorted(EXCEPTIONS.keys() - found)
    for rel, inc in new:
        layer = rel.split("/")[1]
        print(f"{rel}: includes {inc}/, a layer above {layer}/ (allowed: {', '.join(sorted(LAYERS[layer])) or 'none'})")
    for rel, inc in gone:
        print(f"{rel} no longer includes {inc}/: remove it from EXCEPTIONS in tools/check_layers.py")
    return 1 if new or gone else 0


if __name__ == "__main__":
    sys.exit(main())
