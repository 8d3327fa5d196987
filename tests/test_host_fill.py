"""Whole-storage fills run on the host, not as programs (OpCall::try_host_fill),
and an optimizer's lazily created state stays out of its first step's graph."""
from __future__ import annotations

import pytest
import torch

import torch_tpu  # noqa: F401
from torch_tpu import debug

DTYPES = [torch.float32, torch.float64, torch.bfloat16, torch.float16, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_fills_match_cpu_without_compiling(dtype):
    values = [0, 1, -3, 2.5, float("inf")]
    if dtype == torch.bool:
        values = [True, False]
    elif not dtype.is_floating_point:
        values = [0, 1, 7] + ([-3] if dtype != torch.uint8 else [])
    debug.reset_metrics()
    for v in values:
        torch.testing.assert_close(torch.full((3, 5), v, dtype=dtype, device="tpu").cpu(),
                                   torch.full((3, 5), v, dtype=dtype), equal_nan=True)
        x, xc = torch.ones(4, 4, dtype=dtype, device="tpu"), torch.ones(4, 4, dtype=dtype)
        torch.testing.assert_close(x.fill_(v).cpu(), xc.fill_(v))
        torch.testing.assert_close(torch.zeros_like(x).cpu(), torch.zeros_like(xc))
    m = debug.metrics()
    assert m["host_fills"] >= 3 * len(values)
    assert "fill_" not in m["compiles_by_op"] and "zero_" not in m["compiles_by_op"]


def test_partial_fills_and_fills_of_queued_values_stay_correct():
    base = torch.arange(20.0).view(4, 5)
    y = base.to("tpu")
    y[1].fill_(-2.0)  # part of a storage: a program, not a host fill
    y[:, 3].zero_()
    ref = base.clone()
    ref[1].fill_(-2.0)
    ref[:, 3].zero_()
    torch.testing.assert_close(y.cpu(), ref)
    # A whole overwrite of a value still in the compile-ahead queue wins over it.
    z = torch.randn(64, device="tpu").exp()
    z.zero_()
    torch.testing.assert_close(z.cpu(), torch.zeros(64))


def test_large_fills_still_run_as_programs():
    debug.reset_metrics()
    x = torch.zeros(2_000_000, device="tpu")  # 8 MB, above the host-fill limit
    assert x.sum().item() == 0.0
    assert debug.metrics()["host_fills"] == 0


@pytest.mark.parametrize("mode", ["strict", "fused"])
def test_adamw_first_step_is_the_steady_state_program(mode):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    ref = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 4))
    ref.load_state_dict(model.state_dict())
    model.to("tpu")
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    ropt = torch.optim.AdamW(ref.parameters(), lr=1e-2)
    x, y = torch.randn(32, 8), torch.randn(32, 4)
    mode_ = torch.tpu.EagerMode.DEFER_AND_FUSE if mode == "fused" else torch.tpu.EagerMode.DEFER_NEVER
    with torch.tpu.set_eager_mode(mode_):
        for step in range(3):
            for m_, o_, xx, yy in ((model, opt, x.to("tpu"), y.to("tpu")), (ref, ropt, x, y)):
                o_.zero_grad()
                torch.nn.functional.mse_loss(m_(xx), yy).backward()
                o_.step()
            if step == 0:
                after_first = debug.metrics()["compiles_by_op"].get("fused", (0, 0))[0]
        torch.tpu.synchronize()
        # Step 1 creates the moments (zeros_like) outside its graph, so steps
        # 2 and 3 run the program step 1 compiled.
        assert debug.metrics()["compiles_by_op"].get("fused", (0, 0))[0] == after_first
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.detach().cpu(), q.detach())
