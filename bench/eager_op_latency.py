"""Eager per-op latency: moved to torch_tpu.bench.ops
(``python -m torch_tpu.bench ops``); this path keeps working."""
from torch_tpu.bench.ops import main

if __name__ == "__main__":
    main()
