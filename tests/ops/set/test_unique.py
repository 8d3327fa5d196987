"""unique / unique_consecutive vs CPU (csrc/ops/set/unique.cc)."""
import pytest
import torch

from tests.helpers import check

# --- unique ---------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.bool])
def test_unique(dtype):
    x = torch.tensor([[3, 1, 2, 3], [1, 0, 0, 7]]).to(dtype)
    for inv in [False, True]:
        for cnt in [False, True]:
            check(lambda x: torch.unique(x, return_inverse=inv, return_counts=cnt), x)
            check(lambda x: torch.unique_consecutive(x, return_inverse=inv, return_counts=cnt), x)
    check(lambda x: torch.unique(x), x.t())
    check(lambda x: torch.unique(x, sorted=True, return_inverse=True), x[:, 1:])


def test_unique_empty_and_bf16():
    check(lambda x: torch.unique(x, return_inverse=True, return_counts=True), torch.empty(0))
    check(lambda x: torch.unique(x, return_counts=True), torch.tensor([1.5, -0.5, 1.5, 2.0]).bfloat16())
    check(lambda x: torch.unique_consecutive(x, return_counts=True, dim=0), torch.tensor([1, 1, 2, 2, 2, 1]))
