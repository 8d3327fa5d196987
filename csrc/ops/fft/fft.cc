// ATen's FFT primitives (_fft_r2c, _fft_c2c, _fft_c2r and their out=
// forms) on stablehlo.fft. torch.fft.*, stft and the FFT backward formulas
// all reduce to these three. stablehlo.fft transforms trailing dims only,
// so each requested dim is transposed to the end, transformed and moved
// back; a multi-dim transform is the composition of 1-D ones.
//
// ATen's `normalization`: 0 none, 1 by 1/sqrt(n), 2 by 1/n, where n is the
// product of the signal sizes; inverse transforms are unscaled unless asked.
// stablehlo's IFFT/IRFFT already divide by n, which is undone here.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;
using ir::Dims;

// `kind` along dim d of x with transform length n.
Value fft_along(Builder& b, Value x, int64_t d, const char* kind, int64_t n) {
  int64_t r = b.type(x).rank();
  Dims perm, inv(r);
  for (int64_t i = 0; i < r; ++i)
    if (i != d) perm.push_back(i);
  perm.push_back(d);
  for (int64_t i = 0; i < r; ++i) inv[perm[i]] = i;
  return b.transpose(b.fft(b.transpose(x, perm), kind, {n}), inv);
}

// The factor turning stablehlo's result into ATen's for signal size n.
double scale_for(int64_t normalization, bool inverse, double n) {
  double s = normalization == 1 ? 1.0 / std::sqrt(n) : normalization == 2 ? 1.0 / n : 1.0;
  return inverse ? s * n : s;
}

Value scaled(Builder& b, Value x, double s) {
  if (s == 1.0) return x;
  return b.mul(x, b.constant(s, b.elem(x), b.dims(x)));
}

std::vector<int64_t> checked_dims(const at::Tensor& self, c10::IntArrayRef dim) {
  std::vector<int64_t> ds;
  for (int64_t d : dim) {
    int64_t w = wrap_dim(d, self.dim());
    TORCH_CHECK(std::find(ds.begin(), ds.end(), w) == ds.end(), "FFT dims must be unique");
    ds.push_back(w);
  }
  return ds;
}

void check_norm(int64_t normalization) {
  TORCH_CHECK(normalization >= 0 && normalization <= 2, "Invalid normalization mode: ", normalization);
}

// --- r2c -----------------------------------------------------------------------

std::vector<int64_t> r2c_sizes(const at::Tensor& self, const std::vector<int64_t>& ds, bool onesided) {
  std::vector<int64_t> out(self.sizes().begin(), self.sizes().end());
  if (onesided && !ds.empty()) out[ds.back()] = out[ds.back()] / 2 + 1;
  return out;
}

void r2c_run(const at::Tensor& self, const std::vector<int64_t>& ds, int64_t normalization, bool onesided,
             const at::Tensor& out) {
  ScalarType t = self.scalar_type();
  TORCH_CHECK(t == c10::kFloat || t == c10::kDouble, "_fft_r2c: expected a float or double input, got ", t);
  TORCH_CHECK(!ds.empty(), "_fft_r2c must transform at least one axis");
  for (int64_t d : ds) TORCH_CHECK(self.size(d) > 0, "Invalid number of data points (0) specified");
  record::OpCall call("_fft_r2c");
  call.input(self);
  call.attr(c10::IntArrayRef(ds)).attr(normalization).attr(onesided);
  call.output(out);
  double n = 1;
  for (int64_t d : ds) n *= static_cast<double>(self.size(d));
  ElemType ce = ir::complex_of(to_elem(t));
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    if (onesided) {
      x = fft_along(b, x, ds.back(), "RFFT", sizes[ds.back()]);
    } else {
      x = b.convert(x, ce);
      x = fft_along(b, x, ds.back(), "FFT", sizes[ds.back()]);
    }
    for (size_t i = 0; i + 1 < ds.size(); ++i) x = fft_along(b, x, ds[i], "FFT", sizes[ds[i]]);
    return Values{scaled(b, x, scale_for(normalization, false, n))};
  });
}

// Each transform's checked dims ride from meta to impl.
struct FftMeta : OutMeta {
  std::vector<int64_t> ds;
};
FftMeta fft_meta(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization) {
  check_norm(normalization);
  FftMeta m;
  m.ds = checked_dims(self, dim);
  m.device = self.device();
  m.operand_layout = false;
  return m;
}

struct FftR2C {
  static constexpr const char* kName = "_fft_r2c";
  static FftMeta meta(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, bool onesided) {
    FftMeta m = fft_meta(self, dim, normalization);
    m.sizes = r2c_sizes(self, m.ds, onesided);
    m.dtype = c10::toComplexType(self.scalar_type());
    return m;
  }
  static void impl(const at::Tensor& out, const FftMeta& m, const at::Tensor& self, c10::IntArrayRef,
                   int64_t normalization, bool onesided) {
    r2c_run(self, m.ds, normalization, onesided, out);
  }
};

// --- c2c -----------------------------------------------------------------------

void c2c_run(const at::Tensor& self, const std::vector<int64_t>& ds, int64_t normalization, bool forward,
             const at::Tensor& out) {
  TORCH_CHECK(self.is_complex(), "_fft_c2c: expected a complex input tensor, got ", self.scalar_type());
  for (int64_t d : ds) TORCH_CHECK(self.size(d) > 0, "Invalid number of data points (0) specified");
  record::OpCall call("_fft_c2c");
  call.input(self);
  call.attr(c10::IntArrayRef(ds)).attr(normalization).attr(forward);
  call.output(out);
  double n = 1;
  for (int64_t d : ds) n *= static_cast<double>(self.size(d));
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    for (int64_t d : ds) x = fft_along(b, x, d, forward ? "FFT" : "IFFT", sizes[d]);
    return Values{scaled(b, x, ds.empty() ? 1.0 : scale_for(normalization, !forward, n))};
  });
}

struct FftC2C {
  static constexpr const char* kName = "_fft_c2c";
  static FftMeta meta(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, bool) {
    FftMeta m = fft_meta(self, dim, normalization);
    m.sizes = self.sizes().vec();
    m.dtype = self.scalar_type();
    return m;
  }
  static void impl(const at::Tensor& out, const FftMeta& m, const at::Tensor& self, c10::IntArrayRef,
                   int64_t normalization, bool forward) {
    c2c_run(self, m.ds, normalization, forward, out);
  }
};

// --- c2r -----------------------------------------------------------------------

std::vector<int64_t> c2r_sizes(const at::Tensor& self, const std::vector<int64_t>& ds, int64_t last_dim_size) {
  std::vector<int64_t> out(self.sizes().begin(), self.sizes().end());
  out[ds.back()] = last_dim_size;
  return out;
}

void c2r_run(const at::Tensor& self, const std::vector<int64_t>& ds, int64_t normalization, int64_t last_dim_size,
             const at::Tensor& out) {
  TORCH_CHECK(self.is_complex(), "_fft_c2r: expected a complex input tensor, got ", self.scalar_type());
  TORCH_CHECK(!ds.empty(), "_fft_c2r must transform at least one axis");
  TORCH_CHECK(last_dim_size >= 1, "Invalid number of data points (", last_dim_size, ") specified");
  for (int64_t d : ds) TORCH_CHECK(self.size(d) > 0, "Invalid number of data points (0) specified");
  record::OpCall call("_fft_c2r");
  call.input(self);
  call.attr(c10::IntArrayRef(ds)).attr(normalization).attr(last_dim_size);
  call.output(out);
  double n = static_cast<double>(last_dim_size);
  for (size_t i = 0; i + 1 < ds.size(); ++i) n *= static_cast<double>(self.size(ds[i]));
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    Value x = in[0];
    for (size_t i = 0; i + 1 < ds.size(); ++i) x = fft_along(b, x, ds[i], "IFFT", sizes[ds[i]]);
    // IRFFT wants exactly n/2+1 input points: ATen reads only those
    // (zero-padding a shorter input).
    int64_t d = ds.back(), want = last_dim_size / 2 + 1, have = sizes[d];
    if (have > want) {
      Dims start(sizes.size(), 0), limit = b.dims(x), step(sizes.size(), 1);
      limit[d] = want;
      x = b.slice(x, start, limit, step);
    } else if (have < want) {
      Dims lo(sizes.size(), 0), hi(sizes.size(), 0), interior(sizes.size(), 0);
      hi[d] = want - have;
      x = b.pad(x, zero(b, b.elem(x)), lo, hi, interior);
    }
    x = fft_along(b, x, d, "IRFFT", last_dim_size);
    return Values{scaled(b, x, scale_for(normalization, true, n))};
  });
}

struct FftC2R {
  static constexpr const char* kName = "_fft_c2r";
  static FftMeta meta(const at::Tensor& self, c10::IntArrayRef dim, int64_t normalization, int64_t last_dim_size) {
    FftMeta m = fft_meta(self, dim, normalization);
    TORCH_CHECK(!m.ds.empty(), "_fft_c2r must transform at least one axis");
    m.sizes = c2r_sizes(self, m.ds, last_dim_size);
    m.dtype = c10::toRealValueType(self.scalar_type());
    return m;
  }
  static void impl(const at::Tensor& out, const FftMeta& m, const at::Tensor& self, c10::IntArrayRef,
                   int64_t normalization, int64_t last_dim_size) {
    c2r_run(self, m.ds, normalization, last_dim_size, out);
  }
};

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<FftR2C>(m, {"_fft_r2c", "", "_fft_r2c.out"});
  register_variants<FftC2C>(m, {"_fft_c2c", "", "_fft_c2c.out"});
  register_variants<FftC2R>(m, {"_fft_c2r", "", "_fft_c2r.out"});
}

}  // namespace torch_tpu::ops
