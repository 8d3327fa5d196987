"""Data-dependent control flow inside compiled graphs: a captured program
must never bake in a value read on the host while it was recorded."""
from __future__ import annotations

import pytest
import torch

TPU = torch.device("tpu")

pytestmark = pytest.mark.usefixtures("fresh_dynamo")


def _branchy(p, x):
    return torch.cond(p.sum() > 0, lambda x: (x.sin() * 2).sum(), lambda x: (x.cos() - 1).sum(), (x,))


@pytest.mark.parametrize("signs", [(1, -1, 1, -1), (-1, 1, 1, -1)])
def test_cond_gradient_follows_the_branch_taken_on_every_call(signs):
    # The backward graph takes the forward's predicate as an input and reads
    # it on the host to choose a branch; that read flushed nothing, so the
    # first call's branch was captured and replayed: from the second call
    # with the other branch, x.grad was the wrong branch's (off by up to
    # 2.2) while the loss was right.
    cf = torch.compile(_branchy, backend="tpu")
    x0 = torch.randn(5)
    for s in signs:
        p = torch.full((3,), float(s))
        x, xt = x0.clone().requires_grad_(), x0.to(TPU).requires_grad_()
        expected = _branchy(p, x)
        expected.backward()
        got = cf(p.to(TPU), xt)
        got.backward()
        torch.testing.assert_close(got.cpu(), expected.detach())
        torch.testing.assert_close(xt.grad.cpu(), x.grad)


def test_an_input_read_on_the_host_is_not_baked_into_a_captured_program():
    # The same hazard without torch.cond: a graph whose op reads an input's
    # value on the host (here through torch.cond in an inference graph).
    def f(flag, x):
        return torch.cond(flag, lambda x: x + 1, lambda x: x - 1, (x,))

    cf = torch.compile(f, backend="tpu")
    x = torch.randn(4)
    for flag in (True, False, True, False):
        t = torch.tensor(flag)
        torch.testing.assert_close(cf(t.to(TPU), x.to(TPU)).cpu(), f(t, x))
