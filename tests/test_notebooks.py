"""The user guide (docs/notebooks): every notebook executes without an
exception, and the rendered static site shows its outputs in a real browser.

Building the site runs each notebook through `marimo export html`, which exits
non-zero when any cell raises. Then headless Chromium (Debian's `chromium`,
installed by scripts/setup.sh) loads the index and the first chapter from a
local HTTP server, offline, and we check the DOM it rendered, not the page
source: the notebook's data also sits in the page as JSON, so text found only
there would prove nothing.
"""

import http.server
import os
import re
import shutil
import subprocess
import threading

import pytest

from tools import build_docs

pytestmark = pytest.mark.timeout(1800)

FIRST = "01_getting_started"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(site folder, {notebook: error}) for one build of every notebook."""
    out = str(tmp_path_factory.mktemp("docs") / "site")
    return out, build_docs.build(out)


@pytest.mark.parametrize("name", [os.path.basename(p)[:-3] for p in build_docs.notebooks()])
def test_notebook_runs(site, name):
    out, failed = site
    assert name not in failed, f"{name} raised while executing:\n{failed[name]}"
    assert os.path.getsize(os.path.join(out, name + ".html")) > 10_000


def test_guide_has_every_chapter():
    names = [os.path.basename(p)[:-3] for p in build_docs.notebooks()]
    assert [n[:2] for n in names] == [f"{i:02d}" for i in range(1, 13)], names
    titles = [build_docs.title(p) for p in build_docs.notebooks()]
    assert all(t.startswith(f"{i}. ") for i, t in enumerate(titles, 1)), titles


def _browser():
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    assert exe, "chromium is missing: scripts/setup.sh installs Debian's chromium package"
    return exe


@pytest.fixture(scope="module")
def server(site):
    out, _ = site

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=out, **kw)

        def log_message(self, *a):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def _chromium(*args, url):
    cmd = [_browser(), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=15000", *args, url]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


def _rendered(dom: str) -> str:
    """The DOM without <script> bodies (where the notebook's JSON lives)."""
    return re.sub(r"<script\b.*?</script>", "", dom, flags=re.S | re.I)


def test_index_links_chapters_in_order(site, server):
    dom = _rendered(_chromium("--dump-dom", url=server + "/index.html"))
    links = re.findall(r'<a href="(\d\d_[^"]+)\.html">', dom)
    assert links == sorted(links) and links[0] == FIRST, links
    assert len(links) == len(build_docs.notebooks())


def test_first_chapter_renders_outputs_in_a_browser(site, server, tmp_path):
    import torch

    import torch_tpu  # noqa: F401

    url = f"{server}/{FIRST}.html"
    dom = _rendered(_chromium("--dump-dom", url=url))
    outputs = re.findall(r'data-cell-role="output".*?(?=data-cell-role="output"|$)', dom, flags=re.S)
    assert outputs, "no cell output areas were rendered"
    text = " ".join(re.sub(r"<[^>]+>", " ", o) for o in outputs)
    assert f"Device name: {torch.tpu.get_device_name()}" in re.sub(r"\s+", " ", text)
    assert any(re.search(r'<img[^>]+src="data:image/png;base64,', o) for o in outputs), "no chart image rendered"

    shot = tmp_path / "page.png"
    _chromium("--window-size=1200,2400", f"--screenshot={shot}", url=url)
    import matplotlib.image

    pixels = matplotlib.image.imread(str(shot))
    assert pixels.shape[0] == 2400 and pixels.shape[1] == 1200
    assert pixels.std() > 0.05, "the screenshot is blank"
