"""`python -m torch_tpu.cache info|list|clear|prune`: inspect the compilation cache."""
from __future__ import annotations

import argparse
import sys

from torch_tpu.cache import _fmt_age, _fmt_bytes, clear, entries, prune, settings


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m torch_tpu.cache", description=__doc__)
    p.add_argument("command", choices=["info", "list", "clear", "prune"])
    p.add_argument("--tier", choices=["disk", "shared"], default="disk")
    p.add_argument("--max-bytes", type=int, default=None, help="prune target (default: the configured cap)")
    a = p.parse_args(argv)
    s = settings()
    d = s["disk_dir"] if a.tier == "disk" else s["shared_dir"]
    if not d:
        print(f"the {a.tier} tier is disabled (see TORCH_TPU_CACHE_DIR / TORCH_TPU_SHARED_CACHE_DIR)")
        return 0
    ents = entries(a.tier)
    if a.command == "info":
        total = sum(e["bytes"] for e in ents)
        saved = sum(e["compile_ms"] for e in ents)
        print(f"tier:       {a.tier}\ndirectory:  {d}\nentries:    {len(ents)}\nsize:       {_fmt_bytes(total)}"
              f" (cap {_fmt_bytes(s['max_bytes'])})\ncompile time stored: {saved / 1000:.1f} s")
    elif a.command == "list":
        print(f"{'key (op-environment)':<20} {'op':<24} {'size':>9} {'used':>6} {'hits':>6} {'compile':>10}")
        for e in sorted(ents, key=lambda e: e["age_s"]):
            key = e["file"].rsplit("/", 1)[-1].removesuffix(".xex")
            short = key[:8] + "-" + key.split("-")[-1][:8] if "-" in key else key[:17]
            stale = "" if e["current"] else "  (other plugin/CPU/version)"
            print(f"{short:<20} {e['name'][:24]:<24} {_fmt_bytes(e['bytes']):>9} {_fmt_age(e['age_s']):>6}"
                  f" {e['hits']:>6} {e['compile_ms']:>8.1f}ms{stale}")
    elif a.command == "clear":
        print(f"removed {clear(a.tier)} entries from {d}")
    else:
        cap = a.max_bytes if a.max_bytes is not None else s["max_bytes"]
        print(f"removed {prune(cap, a.tier)} entries from {d} (cap {_fmt_bytes(cap)})")
    return 0




if __name__ == "__main__":
    sys.exit(main())
