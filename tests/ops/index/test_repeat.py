"""repeat_interleave vs CPU (csrc/ops/index/repeat.cc)."""
import torch

from tests.helpers import both_raise, check


def test_repeat_interleave():
    r = torch.tensor([2, 0, 3, 1])
    check(torch.repeat_interleave, r)
    check(torch.repeat_interleave, r.int())
    check(torch.repeat_interleave, torch.tensor([0, 0], dtype=torch.long))
    check(lambda r: torch.repeat_interleave(r, output_size=6), r)
    x = torch.randn(4, 3)
    check(lambda x: torch.repeat_interleave(x, r.to(x.device), dim=0), x, grad=True)
    check(lambda x: torch.repeat_interleave(x, 2, dim=1), x.bfloat16())
    both_raise(RuntimeError, torch.repeat_interleave, torch.tensor([1, -1]))
    both_raise(RuntimeError, torch.repeat_interleave, torch.tensor([[1, 2]]))
