"""Recurrent layers and weight normalization against PyTorch CPU
(csrc/ops/nn/rnn.cc: the fused LSTM and GRU cells ATen uses on accelerators;
csrc/ops/nn/weight_norm.cc). CPU composes the cells from pointwise ops, so
these compare two different implementations of the same maths."""
import pytest
import torch
import torch.nn as nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from tests.helpers import TPU


def _compare_module(make, inputs, atol=1e-5, rtol=1e-4, post=lambda out: out):
    torch.manual_seed(0)
    cpu = make()
    torch.manual_seed(0)
    tpu = make().to(TPU)  # not deepcopy: legacy weight_norm modules refuse it
    out_c = post(cpu(*inputs))
    out_t = post(tpu(*torch.utils._pytree.tree_map(lambda x: x.to(TPU) if isinstance(x, torch.Tensor) else x, inputs)))
    flat_c = [t for t in torch.utils._pytree.tree_leaves(out_c) if isinstance(t, torch.Tensor)]
    flat_t = [t for t in torch.utils._pytree.tree_leaves(out_t) if isinstance(t, torch.Tensor)]
    assert len(flat_c) == len(flat_t)
    loss_c = sum((o.float() * (i + 1)).sum() for i, o in enumerate(flat_c))
    loss_t = sum((o.float() * (i + 1)).sum() for i, o in enumerate(flat_t))
    for c, t in zip(flat_c, flat_t):
        torch.testing.assert_close(t.detach().cpu(), c.detach(), atol=atol, rtol=rtol)
    loss_c.backward()
    loss_t.backward()
    for (name, pc), pt in zip(cpu.named_parameters(), tpu.parameters()):
        torch.testing.assert_close(pt.grad.cpu(), pc.grad, atol=atol * 10, rtol=rtol, msg=lambda m: f"{name}: {m}")


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("batch_first", [True, False])
def test_lstm_gru_match_cpu(cls, bias, batch_first):
    x = torch.randn(3, 5, 4) if batch_first else torch.randn(5, 3, 4)
    _compare_module(lambda: cls(4, 6, num_layers=2, bias=bias, batch_first=batch_first), [x])


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_bidirectional_with_initial_state(cls):
    x = torch.randn(5, 2, 3)
    h0 = torch.randn(4, 2, 5)
    state = (h0, torch.randn(4, 2, 5)) if cls is nn.LSTM else h0
    _compare_module(lambda: cls(3, 5, num_layers=2, bidirectional=True), [x, state])


def test_lstm_with_projection():
    _compare_module(lambda: nn.LSTM(4, 8, proj_size=3), [torch.randn(5, 2, 4)])


@pytest.mark.parametrize("cls", [nn.LSTM, nn.GRU])
def test_packed_sequences(cls):
    x = torch.randn(6, 3, 4)
    lengths = torch.tensor([6, 4, 2])

    class Packed(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn = cls(4, 5)

        def forward(self, x):
            out, _ = self.rnn(pack_padded_sequence(x, lengths))
            return pad_packed_sequence(out)[0]

    _compare_module(Packed, [x])


@pytest.mark.parametrize("cls", [nn.LSTMCell, nn.GRUCell])
def test_cells(cls):
    _compare_module(lambda: cls(4, 7), [torch.randn(3, 4)])


def test_lstm_bfloat16():
    # bfloat16 keeps 8 bits of mantissa: tolerances as the other bf16 tests.
    _compare_module(lambda: nn.LSTM(4, 6).to(torch.bfloat16), [torch.randn(5, 3, 4, dtype=torch.bfloat16)],
                    atol=2e-2, rtol=2e-2)


def test_fused_cell_checks_shapes():
    g = torch.randn(2, 8, device=TPU)
    with pytest.raises(RuntimeError, match="expected gates of size"):
        torch.ops.aten._thnn_fused_lstm_cell(g, g, torch.randn(2, 3, device=TPU))
    with pytest.raises(RuntimeError, match="same 2-D size"):
        torch.ops.aten._thnn_fused_gru_cell(g, torch.randn(2, 6, device=TPU), torch.randn(2, 2, device=TPU))


@pytest.mark.parametrize("dim", [0, -1])
def test_weight_norm_parametrization(dim):
    _compare_module(lambda: nn.utils.parametrizations.weight_norm(nn.Linear(5, 4), dim=dim), [torch.randn(3, 5)])


def test_legacy_weight_norm_on_conv():
    _compare_module(lambda: nn.utils.weight_norm(nn.Conv2d(2, 3, 3)), [torch.randn(1, 2, 6, 6)])


def test_sparse_embedding_says_tpu_gradients_are_dense():
    e = nn.Embedding(10, 3, sparse=True).to(TPU)
    idx = torch.tensor([1, 2], device=TPU)
    with pytest.raises(NotImplementedError, match="tpu has dense gradients only"):
        e(idx)
    with torch.no_grad():  # inference needs no gradient: it runs
        torch.testing.assert_close(e(idx).cpu(), e.weight.detach().cpu()[[1, 2]])
