"""Build-time metadata for the wheel: pin the torch it was compiled against.

torch_tpu's extension links libtorch's C++ API, which has no ABI promise across
releases, so the wheel may only be installed beside the torch release that
built it. scikit-build-core calls ``dynamic_metadata`` while building
(``[tool.scikit-build.metadata.dependencies]`` in pyproject.toml); the build runs without
isolation, so the torch imported here is the one CMake compiles against.
"""

from __future__ import annotations

from importlib.metadata import version


def torch_requirement() -> str:
    # "2.14.1+cu130" -> "torch==2.14.1": a public-version pin also matches
    # local builds of that release (PEP 440).
    return "torch==" + version("torch").split("+")[0]


def dynamic_metadata(field: str, settings: dict) -> list[str]:
    assert field == "dependencies", field
    return [torch_requirement(), *settings.get("requires", [])]
