# The two commands a newcomer needs: `make demo` and `make test`.
# Both run the idempotent set-up first (scripts/setup.sh).
PY := .venv/bin/python
export PJRT_NPROC ?= 2

.PHONY: setup demo test test-cc test-py bench clean

setup:
	@scripts/setup.sh

demo: setup
	$(PY) examples/train_mlp.py

test: setup test-cc test-py

test-cc:
	./build/cc_tests --gtest_brief=1

test-py:
	$(PY) -m pytest -q -p no:cacheprovider tests

bench: setup
	$(PY) bench/eager_op_latency.py

clean:
	rm -rf build torch_tpu/_C*.so
