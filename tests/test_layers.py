"""tools/check_layers.py: the layer check make lint runs."""
from __future__ import annotations

from tools import check_layers


def test_the_tree_has_no_upward_include_beyond_the_listed_exceptions():
    assert check_layers.violations() == set(check_layers.EXCEPTIONS)


def test_an_upward_include_is_found(tmp_path):
    (tmp_path / "csrc" / "record").mkdir(parents=True)
    (tmp_path / "csrc" / "record" / "bad.cc").write_text('#include "eager/fused_driver.h"\n#include "aten/storage.h"\n')
    (tmp_path / "csrc" / "ir").mkdir()
    (tmp_path / "csrc" / "ir" / "ok.h").write_text('#include "runtime/log.h"\n#include "ir/graph.h"\n')
    assert check_layers.violations(str(tmp_path)) == {("csrc/record/bad.cc", "eager")}
