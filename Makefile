# The two commands a newcomer needs: `make demo` and `make test`.
# Both run the idempotent set-up first (scripts/setup.sh).
PY := .venv/bin/python
export PJRT_NPROC ?= 2

.PHONY: setup demo test test-cc test-py test-keys test-modes test-wheel bench bench-train lint format wheel docs clean

setup:
	@scripts/setup.sh

demo: setup
	$(PY) examples/train_mlp.py

test: setup test-cc test-py test-keys test-modes

test-cc:
	./build/cc_tests --gtest_brief=1

# tests/ops runs once, in test-keys below: the key check only adds work to a
# cache hit, so that run covers everything a plain run would.
test-py:
	$(PY) -m pytest -q -p no:cacheprovider tests --ignore=tests/ops

# The op tests, with every cache hit re-verified (TORCH_TPU_CHECK_KEYS):
# a kernel whose key misses something its lowering captures fails here.
test-keys:
	TORCH_TPU_CHECK_KEYS=1 $(PY) -m pytest -q -p no:cacheprovider tests/ops

# The model acceptance tests and the OpInfo regression slice again in fused
# eager, and the model tests through torch.compile(backend="tpu").
test-modes:
	TORCH_TPU_DEFER_AND_FUSE=1 $(PY) -m pytest -q -p no:cacheprovider tests/models tests/opinfo tests/test_views.py
	TORCH_TPU_TEST_COMPILE=1 $(PY) -m pytest -q -p no:cacheprovider tests/models

# Builds the wheel in build/wheel, installs it into a fresh venv beside the
# same torch, and runs a smoke test outside the source tree.
test-wheel: setup
	$(PY) -m pytest -q -p no:cacheprovider tests/test_wheel.py

# The user guide: runs every Marimo notebook (docs/notebooks) and renders it
# to static HTML in docs/site (view: python -m http.server -d docs/site).
docs: setup
	$(PY) -m tools.build_docs --out docs/site

wheel: setup
	$(PY) -m pip wheel --no-build-isolation --no-deps -w dist .

# Check mode: clang-format (csrc/, .clang-format) and ruff (pyproject.toml).
CXX_SOURCES = $(shell git ls-files 'csrc/*.cc' 'csrc/*.h')
lint: setup
	.venv/bin/clang-format --dry-run -Werror $(CXX_SOURCES)
	.venv/bin/ruff check .
	.venv/bin/python -m tools.bench_tables --check
	.venv/bin/python -m tools.check_layers

format: setup
	.venv/bin/clang-format -i $(CXX_SOURCES)
	.venv/bin/ruff check --fix .

bench: setup
	$(PY) -m torch_tpu.bench ops

# Training steps/s in every mode, beside PyTorch CPU, Inductor and JAX
# (optional: pip install -r requirements-bench.txt).
bench-train: setup
	$(PY) -m torch_tpu.bench

clean:
	rm -rf build dist torch_tpu/_C*.so
