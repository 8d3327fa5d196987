"""torchvision's ResNet-18 trained 3 steps with SGD(momentum, weight decay)
on tpu vs CPU, BatchNorm in training mode, CPU fallback off."""
import torch
import torch.nn.functional as F
import torchvision

from tests.helpers import TPU
from tests.models._harness import compare_training


def test_resnet18_sgd_momentum():
    torch.manual_seed(0)
    model = torchvision.models.resnet18(num_classes=10)
    g = torch.Generator().manual_seed(1)
    # Batch 8 at 32x32: layer4 runs at 1x1, so its BatchNorm normalizes over
    # only N values per channel. With N=4, or with lr >= 0.01, three steps
    # are chaotic even on CPU alone (float32 vs float64 CPU losses differ by
    # 0.05..0.3 at step 3), so no tolerance could tell a bug from rounding.
    batches = [(torch.randn(8, 3, 32, 32, generator=g), torch.randint(0, 10, (8,), generator=g))
               for _ in range(3)]

    def loss_fn(m, x, y):
        return F.cross_entropy(m(x), y)

    def make_opt(params):
        return torch.optim.SGD(params, lr=0.002, momentum=0.9, weight_decay=1e-4)

    # Tolerances, from measuring both devices against a float64 CPU run of
    # the same 3 steps: CPU's float32 grads are off by up to 4.5e-5 on
    # conv1.weight (|g| up to 3.6; the BatchNorm backward divides by
    # per-channel stds of few values) and <1e-5 on the others, tpu's by
    # 2.4e-5 and <1e-5; losses (~2.3) by <6e-6 on both. The bounds leave
    # ~2x headroom over the sum of the two errors.
    compare_training(model, make_opt, loss_fn, batches,
                     loss_tol=dict(atol=3e-5, rtol=1e-5), grad_tol=dict(atol=1.5e-4, rtol=1e-4))
