"""softmax / log_softmax forward and backward vs CPU (csrc/ops/nn/softmax.cc)."""
import pytest
import torch

from tests.helpers import TPU, both_raise, check

FLOATS = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax(dtype, dim):
    x = torch.randn(4, 5, 3, dtype=dtype)
    check(lambda x: torch.softmax(x, dim), x, grad=True)
    check(lambda x: torch.log_softmax(x, dim), x, grad=True)


def test_softmax_stable_and_views():
    # Without subtracting the max, exp(1000) overflows to inf.
    x = torch.tensor([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -1002.0]])
    check(lambda x: torch.softmax(x, 1), x, grad=True)
    check(lambda x: torch.log_softmax(x, 1), x, grad=True)
    check(lambda x: torch.softmax(x.t(), 0), torch.randn(5, 4), grad=True)
    check(lambda x: torch.log_softmax(x[1:, ::2], -1), torch.randn(5, 8), grad=True)
    check(lambda x: torch.softmax(x, 0), torch.tensor(2.5), grad=True)
    # -inf logits (masked attention) give exact zeros
    check(lambda x: torch.softmax(x, -1), torch.tensor([[0.0, float("-inf"), 1.0]]))
    out = torch.empty(0, device=TPU)
    torch._softmax(x.to(TPU), 1, False, out=out)
    torch.testing.assert_close(out.cpu(), torch.softmax(x, 1))
    both_raise(IndexError, lambda x: torch.softmax(x, 2), x)


def test_out_forms_match_cpu():
    # The out= forms of the forward and backward kernels, into an empty out
    # (resized) and into one of the result's shape, against CPU. (CPU's
    # kernels write a transposed out as if it were contiguous, so it is no
    # reference there.)
    A = torch.ops.aten
    x, g = torch.randn(3, 4), torch.randn(3, 4)
    fns = [lambda x, g, o: A._softmax(x, 1, False, out=o),
           lambda x, g, o: A._log_softmax(x, 0, False, out=o),
           lambda x, g, o: A._softmax_backward_data(g, x.softmax(1), 1, torch.float32, grad_input=o),
           lambda x, g, o: A._log_softmax_backward_data(g, x.log_softmax(1), 1, torch.float32, out=o)]
    for fn in fns:
        for make in (lambda d: torch.empty(0, device=d), lambda d: torch.empty(3, 4, device=d)):
            want = fn(x, g, make("cpu"))
            got = fn(x.to(TPU), g.to(TPU), make(TPU))
            assert got.stride() == want.stride()
            torch.testing.assert_close(got.cpu(), want)
