"""The wheel a user installs: built from this tree, installed into a fresh venv
that already has torch (linked in from this environment), and used from
outside the source tree.

Slow by nature (a compile in build/wheel, which is incremental after the first
run), so it is one test doing the whole journey a user would.
"""

import email.parser
import importlib.metadata
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import zipfile

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = pathlib.Path(__file__).resolve().parents[1]
TORCH_VERSION = importlib.metadata.version("torch").split("+")[0]

SMOKE = r"""
import os, sys
import torch                                    # autoloads torch_tpu (torch.backends entry point)
import torch_tpu
assert "site-packages" in torch_tpu.__file__, torch_tpu.__file__
assert not torch_tpu.__file__.startswith(sys.argv[1]), "imported the source tree"
x = torch.arange(6.0, device="tpu")
y = (x * 2 + 1).reshape(2, 3).sum(dim=1)
assert y.device.type == "tpu"
torch.testing.assert_close(y.cpu(), torch.tensor([9.0, 27.0]))
print("wheel smoke ok", torch.__version__, torch.tpu.get_device_name())
"""


def _run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed ({r.returncode}):\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    return r


def torch_closure():
    """torch and every distribution it requires (markers evaluated here)."""
    seen, todo = {}, ["torch"]
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # an optional or platform-excluded requirement
        seen[name] = dist
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return seen


def _link_installed(dists, site):
    # The new venv gets this torch by symlink, not by a second install: torch's
    # CUDA wheels are ~5.5 GB, and a second copy per run has filled CI's disk.
    # pip sees the linked dist-info as installed, so it still resolves and
    # installs everything the wheel needs that torch does not bring.
    tops = set()
    for dist in dists.values():
        for f in dist.files or []:
            top = pathlib.PurePosixPath(f).parts[0]
            if top != ".." and not top.endswith(".pth"):
                tops.add(pathlib.Path(dist.locate_file(top)))
    assert any(t.name == "torch" for t in tops), tops
    for src in tops:
        if src.exists() and not (site / src.name).exists():
            (site / src.name).symlink_to(src)


@pytest.mark.timeout(2400)
def test_wheel_builds_installs_and_runs():
    with tempfile.TemporaryDirectory(prefix="torch_tpu_wheel_") as tmp:
        tmp = pathlib.Path(tmp)
        dist = tmp / "dist"
        _run(
            [sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "-q", "-w", dist, ROOT],
            cwd=ROOT,
        )
        wheels = list(dist.glob("*.whl"))
        assert len(wheels) == 1, wheels
        whl = wheels[0]
        tag = f"cp{sys.version_info.major}{sys.version_info.minor}"
        assert re.fullmatch(rf"torch_tpu-0\.1\.0-{tag}-{tag}-linux_x86_64\.whl", whl.name), whl.name

        # Self-contained: the extension, the package, the entry point, the
        # license, and a torch pin to the release the extension was built with.
        with zipfile.ZipFile(whl) as z:
            names = z.namelist()
            assert any(re.fullmatch(r"torch_tpu/_C\.cpython-.*\.so", n) for n in names), names
            assert "torch_tpu/__init__.py" in names and "torch_tpu/cache/__main__.py" in names
            info = next(n.rsplit("/", 1)[0] for n in names if n.endswith(".dist-info/METADATA"))
            meta = email.parser.Parser().parsestr(z.read(f"{info}/METADATA").decode())
            entry_points = z.read(f"{info}/entry_points.txt").decode()
            assert any(n.startswith(f"{info}/licenses/LICENSE") for n in names), names
        assert meta["License-Expression"] == "Apache-2.0"
        assert meta["Requires-Python"] == ">=3.11"
        requires = meta.get_all("Requires-Dist")
        assert f"torch=={TORCH_VERSION}" in requires, requires
        assert "xla-cpu-pjrt==0.0.1" in requires, requires
        assert "[torch.backends]" in entry_points and "torch_tpu._loader:load" in entry_points

        # A fresh venv that already has torch (the same release), then the wheel;
        # pip resolves the rest of its dependencies (the XLA:CPU plugin, tqdm).
        venv = tmp / "venv"
        _run([getattr(sys, "_base_executable", sys.executable), "-m", "venv", venv])
        vpy = venv / "bin" / "python"
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        site = pathlib.Path(_run([vpy, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"]).stdout.strip())
        _link_installed(torch_closure(), site)
        pip = [vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, whl], env=env)
        listed = _run([vpy, "-m", "pip", "list", "--format=freeze"], env=env).stdout
        assert "xla_cpu_pjrt==0.0.1" in listed.replace("-", "_"), listed

        # From a directory outside the source tree, so nothing resolves to it.
        work = tmp / "elsewhere"
        work.mkdir()
        r = _run([vpy, "-c", SMOKE, str(ROOT)], cwd=work, env=env)
        assert "wheel smoke ok" in r.stdout
