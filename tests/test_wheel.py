"""The wheel a user installs: built from this tree, installed into a fresh venv
that already has torch, and used from outside the source tree.

Slow by nature (a compile in build/wheel, which is incremental after the first
run, and a torch install into the new venv), so it is one test doing the whole
journey a user would.
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
        pip = [vpy, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
        _run([*pip, f"torch=={TORCH_VERSION}"], env=env)
        _run([*pip, whl], env=env)

        # From a directory outside the source tree, so nothing resolves to it.
        work = tmp / "elsewhere"
        work.mkdir()
        r = _run([vpy, "-c", SMOKE, str(ROOT)], cwd=work, env=env)
        assert "wheel smoke ok" in r.stdout
