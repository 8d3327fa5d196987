"""Benchmarks shipped with torch_tpu: ``python -m torch_tpu.bench`` (training
steps in every mode, side by side with PyTorch CPU eager, Inductor and JAX)
and ``python -m torch_tpu.bench ops`` (eager per-op latency)."""
