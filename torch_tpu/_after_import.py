"""Patches that run right after a module is imported (or at once, if it
already is), so that importing torch_tpu never pays for importing what it
patches: dynamo, Inductor, accelerate."""
from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable

_PATCHES: dict[str, list[Callable]] = {}


class _Hook(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        patches = _PATCHES.get(fullname)
        if not patches:
            return None
        sys.meta_path.remove(self)  # find the real spec without us
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        exec_module = spec.loader.exec_module

        def exec_then_patch(module):
            exec_module(module)
            for patch in patches:
                patch(module)

        spec.loader.exec_module = exec_then_patch
        return spec


def after_import(name: str, patch: Callable) -> None:
    """Calls patch(module) once `name` is imported: now, if it already is."""
    mod = sys.modules.get(name)
    if mod is not None:
        patch(mod)
        return
    _PATCHES.setdefault(name, []).append(patch)
    if not any(isinstance(f, _Hook) for f in sys.meta_path):
        sys.meta_path.insert(0, _Hook())
