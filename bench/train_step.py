"""Training-step throughput in every mode: moved to torch_tpu.bench.train
(``python -m torch_tpu.bench``); this path keeps working."""
from torch_tpu.bench.train import main

if __name__ == "__main__":
    main()
