"""Execute the user-guide notebooks and render them to a static site.

    python -m tools.build_docs [--out docs/site] [--only 01_getting_started]

Each docs/notebooks/NN_*.py is run by `marimo export html` (which executes
every cell and exits non-zero if one raised) into OUT/NN_*.html, and OUT/
index.html links them in order under their first heading. The exported pages
load marimo's frontend from a CDN; we point them at the copy marimo ships in
its wheel (copied to OUT/assets) instead, so the site renders offline. Module
scripts do not load from file:// URLs, so view it through a local server:

    python -m http.server -d docs/site 8000
"""

from __future__ import annotations

import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import time

from tqdm import tqdm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOTEBOOKS = os.path.join(ROOT, "docs", "notebooks")
CDN = re.compile(r"https://cdn\.jsdelivr\.net/npm/@marimo-team/frontend@[^/\"']+/dist/")


def notebooks(only: list[str] | None = None) -> list[str]:
    names = sorted(n for n in os.listdir(NOTEBOOKS) if re.match(r"\d\d_.*\.py$", n))
    if only:
        names = [n for n in names if n[:-3] in only or n in only]
    return [os.path.join(NOTEBOOKS, n) for n in names]


def title(path: str) -> str:
    """The notebook's first level-1 markdown heading, else its file name."""
    with open(path) as f:
        m = re.search(r"^\s*#\s+(.+?)\s*$", f.read().split("app = marimo.App", 1)[-1], re.M)
    return m.group(1) if m else os.path.basename(path)[:-3]


def copy_frontend(out: str) -> None:
    import marimo

    static = os.path.join(os.path.dirname(marimo.__file__), "_static")
    shutil.copytree(os.path.join(static, "assets"), os.path.join(out, "assets"), dirs_exist_ok=True)
    for name in os.listdir(static):
        if name.endswith((".png", ".ico")):
            shutil.copy2(os.path.join(static, name), out)


def export(path: str, out: str, timeout: float) -> tuple[float, str | None]:
    """Runs one notebook into OUT; returns (seconds, error text or None)."""
    page = os.path.join(out, os.path.basename(path)[:-3] + ".html")
    marimo = os.path.join(os.path.dirname(sys.executable), "marimo")
    t0 = time.perf_counter()
    try:
        r = subprocess.run(
            [marimo, "export", "html", path, "-o", page, "-f"],
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=ROOT,
        )
    except subprocess.TimeoutExpired:
        return time.perf_counter() - t0, f"timed out after {timeout:.0f} s"
    dt = time.perf_counter() - t0
    if r.returncode != 0 or not os.path.exists(page):
        return dt, (r.stdout + r.stderr)[-4000:] or f"exit code {r.returncode}"
    with open(page) as f:
        text = f.read()
    with open(page, "w") as f:
        f.write(CDN.sub("", text))
    return dt, None


def write_index(out: str, pages: list[tuple[str, str, float]]) -> None:
    items = "\n".join(
        f'  <li><a href="{html.escape(name)}.html">{html.escape(t)}</a> <small>(ran in {s:.0f} s)</small></li>'
        for name, t, s in pages
    )
    with open(os.path.join(out, "index.html"), "w") as f:
        f.write(
            "<!doctype html>\n<html><head><meta charset='utf-8'><title>torch_tpu user guide</title>\n"
            "<style>body{font-family:sans-serif;max-width:46em;margin:2em auto;line-height:1.5}</style>\n"
            "</head><body>\n<h1>torch_tpu user guide</h1>\n"
            "<p>Marimo notebooks, executed on XLA:CPU when this site was built. "
            "Edit and run them with <code>marimo edit docs/notebooks</code>.</p>\n"
            f"<ol>\n{items}\n</ol>\n</body></html>\n"
        )


def build(out: str, only: list[str] | None = None, timeout: float = 300, jobs: int = 2) -> dict[str, str]:
    """Exports the notebooks, `jobs` at a time (each export is its own
    process, mostly single-threaded); returns {notebook: error} for those
    that failed."""
    from concurrent.futures import ThreadPoolExecutor

    os.makedirs(out, exist_ok=True)
    copy_frontend(out)
    paths = notebooks(only)
    pages, failed = [], {}
    with ThreadPoolExecutor(max(1, jobs)) as pool, tqdm(total=len(paths), desc="notebooks", unit="nb") as bar:
        def one(path):
            result = export(path, out, timeout)
            bar.update()
            return result

        for path, (secs, err) in zip(paths, pool.map(one, paths)):
            name = os.path.basename(path)[:-3]
            if err:
                failed[name] = err
            else:
                pages.append((name, title(path), secs))
    write_index(out, pages)
    return failed


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "site"))
    p.add_argument("--only", nargs="*", help="notebook names (without .py)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per notebook")
    p.add_argument("--jobs", type=int, default=2, help="notebooks exported at once")
    a = p.parse_args()
    failed = build(a.out, a.only, a.timeout, a.jobs)
    for name, err in failed.items():
        print(f"\n=== {name} failed ===\n{err}", file=sys.stderr)
    print(f"site: {a.out}/index.html ({'%d failed' % len(failed) if failed else 'all notebooks ran'})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
