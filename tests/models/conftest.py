# Model tests import torchvision, directly or through transformers (which
# loads it whenever it is installed): declare the ops its CUDA-built library
# would have defined first (see _torchvision.py).
from tests.models._torchvision import declare_missing_ops

declare_missing_ops()
