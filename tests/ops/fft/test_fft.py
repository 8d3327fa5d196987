"""FFTs (_fft_c2c/_fft_r2c/_fft_c2r through torch.fft and stft) on tpu
against PyTorch CPU (csrc/ops/fft/fft.cc)."""
import pytest
import torch

from tests.helpers import both_raise, check


def rand(*shape, dtype=torch.float32):
    return torch.randn(*shape, dtype=dtype)


def crand(*shape, dtype=torch.complex64):
    return torch.randn(*shape, dtype=dtype)


# --- FFTs ---------------------------------------------------------------------------

NORMS = [None, "forward", "ortho"]


@pytest.mark.parametrize("norm", NORMS)
def test_fft_c2c(norm):
    x = crand(6, 8)
    check(lambda t: torch.fft.fft(t, norm=norm), x)
    check(lambda t: torch.fft.ifft(t, norm=norm), x)
    check(lambda t: torch.fft.fft2(t, norm=norm), x)
    check(lambda t: torch.fft.ifftn(t, norm=norm), x)
    check(lambda t: torch.fft.fft(t, dim=0, norm=norm), x)
    check(lambda t: torch.fft.fft(t, n=5, norm=norm), x)  # crop
    check(lambda t: torch.fft.fft(t, n=11, norm=norm), x)  # zero-pad


@pytest.mark.parametrize("norm", NORMS)
def test_fft_r2c(norm):
    x = rand(5, 8)
    check(lambda t: torch.fft.fft(t, norm=norm), x)
    check(lambda t: torch.fft.rfft(t, norm=norm), x)
    check(lambda t: torch.fft.rfft(t, dim=0, norm=norm), x)  # odd length
    check(lambda t: torch.fft.rfft2(t, norm=norm), x)
    check(lambda t: torch.fft.rfftn(t, dim=(1, 0), norm=norm), x)
    check(lambda t: torch.fft.ihfft(t, norm=norm), x)
    check(lambda t: torch.fft.ifft(t, norm=norm), x)


@pytest.mark.parametrize("norm", NORMS)
def test_fft_c2r(norm):
    x = crand(5, 6)
    check(lambda t: torch.fft.irfft(t, norm=norm), x)
    check(lambda t: torch.fft.irfft(t, n=9, norm=norm), x)
    check(lambda t: torch.fft.irfft2(t, norm=norm), x)
    check(lambda t: torch.fft.irfftn(t, s=(4, 7), norm=norm), x)
    check(lambda t: torch.fft.hfft(t, norm=norm), x)
    check(lambda t: torch.fft.hfft2(t, norm=norm), x)


def test_fft_noncontiguous_and_3d():
    x = rand(4, 6, 10)
    check(lambda t: torch.fft.rfft(t[:, ::2, 1:]), x)
    check(lambda t: torch.fft.fftn(t.transpose(0, 2)), x)
    check(lambda t: torch.fft.fftn(t, dim=(0, 2)), x)
    check(lambda t: torch.fft.rfftn(t), x)
    check(lambda t: torch.fft.irfftn(torch.fft.rfftn(t), s=t.shape), x)
    c = crand(3, 4, 5, 6)
    check(lambda t: torch.fft.fftn(t), c)  # 4 transformed dims
    check(lambda t: torch.fft.fftn(t.permute(3, 1, 0, 2)[1:], dim=(0, 2)), c)


def test_fft_double():
    check(lambda t: torch.fft.rfft(t), rand(4, 8, dtype=torch.float64))
    check(lambda t: torch.fft.fft(t), crand(4, 8, dtype=torch.complex128))
    check(lambda t: torch.fft.irfft(t), crand(4, 8, dtype=torch.complex128))


def test_fft_int_input():
    check(lambda t: torch.fft.fft(t), torch.arange(8))


def test_fft_out():
    x = rand(4, 8)
    check(lambda t: torch.fft.rfft(t, out=torch.empty(0, dtype=torch.complex64, device=t.device)), x)
    c = crand(4, 8)
    check(lambda t: torch.fft.fft(t, out=torch.empty(4, 8, dtype=torch.complex64, device=t.device)), c)


def test_fft_kernel_out_forms():
    # The kernels' own out= forms: values into an empty or a strided out.
    x, c = torch.randn(4, 8), torch.randn(4, 8, dtype=torch.complex64)
    check(lambda t, o: (torch.ops.aten._fft_r2c.out(t, [1], 0, True, out=o), o)[1], x,
          torch.empty(0, dtype=torch.complex64))
    check(lambda t, o: (torch.ops.aten._fft_c2c.out(t, [0, 1], 2, False, out=o[:, ::2]), o)[1], c,
          torch.zeros(4, 16, dtype=torch.complex64))
    check(lambda t, o: (torch.ops.aten._fft_c2r.out(t, [1], 1, 14, out=o), o)[1], c, torch.empty(0))


def test_fft_errors():
    both_raise(RuntimeError, lambda t: torch.fft.fft(t, n=0), rand(4))
    both_raise(IndexError, lambda t: torch.fft.fft(t, dim=3), rand(4))


# --- gradients -----------------------------------------------------------------------

def test_fft_grads():
    x = rand(4, 8)
    check(lambda t: torch.fft.fft(t).abs().sum(), x, grad=True)
    check(lambda t: torch.view_as_real(torch.fft.rfft(t)), x, grad=True)
    check(lambda t: torch.fft.rfft2(t, norm="ortho").abs(), x, grad=True)
    check(lambda t: torch.fft.irfft(t), x, grad=True)
    check(lambda t: torch.fft.hfft(t, n=10), x, grad=True)
    check(lambda t: torch.fft.irfftn(t, s=(4, 6)), x, grad=True)
    check(lambda t: torch.view_as_real(torch.fft.ifft(t).resolve_conj()), x, grad=True)
    check(lambda t: torch.view_as_real(torch.fft.ihfft(t).resolve_conj()), x, grad=True)
    check(lambda a, b: torch.view_as_real(torch.complex(a, b) * torch.polar(a.abs(), b)), x, rand(4, 8), grad=True)


def test_stft():
    x = rand(2, 64)
    w = torch.hann_window(16)
    check(lambda t, win: torch.stft(t, 16, hop_length=4, window=win, return_complex=True), x, w)
    check(lambda t: torch.stft(t, 16, hop_length=4, center=False, return_complex=True, onesided=False), x)
