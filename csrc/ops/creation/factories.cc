// Factory ops with data-independent contents: arange, linspace, logspace (a
// power of linspace), eye, triu_indices/tril_indices and
// _efficientzerotensor (a plain zero tensor: autograd only needs its
// values). The output length is static (it is the tensor's shape), while
// start/step/end are runtime scalars so e.g. arange(0, n) and arange(5, n +
// 5) share one executable. full/zeros/ones and *_like decompose to empty +
// fill_ upstream.
#include <ATen/native/Resize.h>
#include <ATen/ops/linspace.h>
#include <ATen/ops/pow.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;
using ir::Dims;

// The type PyTorch CPU accumulates range factories in: double for
// float/double, float for the half types, int64 for integers.
c10::ScalarType arange_acc(c10::ScalarType t) {
  if (t == c10::kFloat || t == c10::kDouble) return c10::kDouble;
  if (t == c10::kHalf || t == c10::kBFloat16) return c10::kFloat;
  return c10::kLong;
}

void check_not_bool(c10::ScalarType t, const char* name) {
  TORCH_CHECK_NOT_IMPLEMENTED(t != c10::kBool, "\"", name, "\" not implemented for 'Bool'");
}

// --- arange ------------------------------------------------------------------

at::Tensor& arange_out(const c10::Scalar& start, const c10::Scalar& end, const c10::Scalar& step, at::Tensor& out) {
  auto dtype = out.scalar_type();
  check_not_bool(dtype, "arange_cpu");
  auto acc = arange_acc(dtype);
  // Same length computation and checks as ATen's range factories.
  double size_d;
  if (acc == c10::kLong) {
    int64_t xs = start.to<int64_t>(), xe = end.to<int64_t>(), xstep = step.to<int64_t>();
    TORCH_CHECK(xstep != 0, "step must be nonzero");
    TORCH_CHECK((xstep > 0 && xe >= xs) || (xstep < 0 && xe <= xs),
                "upper bound and lower bound inconsistent with step sign");
    int64_t sgn = (xstep > 0) - (xstep < 0);
    size_d = static_cast<double>((xe - xs + xstep - sgn) / xstep);  // integer division, as ATen
  } else {
    double xs = start.to<double>(), xe = end.to<double>(), xstep = step.to<double>();
    TORCH_CHECK(std::isfinite(xs) && std::isfinite(xe), "unsupported range: ", xs, " -> ", xe);
    TORCH_CHECK(xstep != 0, "step must be nonzero");
    TORCH_CHECK((xstep > 0 && xe >= xs) || (xstep < 0 && xe <= xs),
                "upper bound and lower bound inconsistent with step sign");
    size_d = std::ceil((xe - xs) / xstep);
  }
  TORCH_CHECK(size_d >= 0 && size_d <= static_cast<double>(std::numeric_limits<int64_t>::max()),
              "invalid size, possible overflow?");
  int64_t size = static_cast<int64_t>(size_d);
  if (out.numel() != size) at::native::resize_output(out, {size});

  record::OpCall call("arange");
  call.attr(static_cast<int64_t>(acc));
  call.scalar(start, acc);
  call.scalar(step, acc);
  call.output(out);
  ElemType e = to_elem(acc);
  call.run([&](Builder& b, const Values& in) {
    Dims d{size};
    Value i = b.iota(d, 0, e);
    Value r = b.add(b.broadcast_to(in[0], d), b.mul(i, b.broadcast_to(in[1], d)));
    return Values{r};
  });
  return out;
}

// --- linspace ----------------------------------------------------------------

at::Tensor& linspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  auto dtype = out.scalar_type();
  if (out.numel() != steps) at::native::resize_output(out, {steps});
  if (steps == 0) return out;
  // Integers: start/end are first cast to the integer type, the step and
  // positions are computed in double and truncated (as ATen's CPU kernel).
  bool integral = c10::isIntegralType(dtype, /*includeBool=*/true);
  c10::ScalarType compute = integral || dtype == c10::kDouble ? c10::kDouble : c10::kFloat;
  record::OpCall call("linspace");
  call.attr(static_cast<int64_t>(compute)).attr(steps);
  call.scalar(start, dtype);
  call.scalar(end, dtype);
  call.output(out);
  ElemType ce = to_elem(compute);
  call.run([&](Builder& b, const Values& in) {
    Dims d{steps};
    Value s = b.convert(in[0], ce), e = b.convert(in[1], ce);
    if (steps == 1) return Values{b.broadcast_to(s, d)};
    Value step = b.div(b.sub(e, s), b.constant(static_cast<double>(steps - 1), ce));
    // The first half counts up from start, the second half down from end,
    // so both endpoints are exact.
    Value idx = b.iota(d, 0, ElemType::kS64);
    Value fi = b.convert(idx, ce);
    Value back = b.convert(b.sub(b.constant(static_cast<double>(steps - 1), ElemType::kS64, d), idx), ce);
    Value lo = b.add(b.broadcast_to(s, d), b.mul(b.broadcast_to(step, d), fi));
    Value hi = b.sub(b.broadcast_to(e, d), b.mul(b.broadcast_to(step, d), back));
    Value first_half = b.compare(idx, b.constant(static_cast<double>(steps / 2), ElemType::kS64, d), Direction::kLt);
    return Values{b.select(first_half, lo, hi)};
  });
  return out;
}

// --- eye ---------------------------------------------------------------------

at::Tensor& eye_m_out(int64_t n, int64_t m, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be greater or equal to 0, got ", n);
  TORCH_CHECK(m >= 0, "m must be greater or equal to 0, got ", m);
  at::native::resize_output(out, {n, m});
  record::OpCall call("eye");
  call.output(out);
  call.run([&](Builder& b, const Values&) {
    Dims d{n, m};
    return Values{b.compare(b.iota(d, 0, ElemType::kS64), b.iota(d, 1, ElemType::kS64), Direction::kEq)};
  });
  return out;
}

at::Tensor& eye_out(int64_t n, at::Tensor& out) { return eye_m_out(n, n, out); }

// --- logspace ------------------------------------------------------------------

at::Tensor& logspace_out(const c10::Scalar& start, const c10::Scalar& end, int64_t steps, double base,
                         at::Tensor& out) {
  TORCH_CHECK(steps >= 0, "number of steps must be non-negative");
  ScalarType dt = out.scalar_type();
  // Integers: exponents and powers in double, truncated on the way out (as CPU).
  ScalarType compute = c10::isIntegralType(dt, true) || dt == c10::kDouble ? c10::kDouble : c10::kFloat;
  at::Tensor e = at::linspace(start, end, steps, at::TensorOptions().dtype(compute).device(out.device()));
  at::Tensor p = at::pow(c10::Scalar(base), e);
  if (out.numel() != steps) at::native::resize_output(out, {steps});
  out.copy_(p);
  return out;
}

// --- triu_indices / tril_indices ---------------------------------------------------------

// Number of (i, j) in a row x col grid with j - i <= offset (lower) or
// j - i >= offset (upper); known at trace time, so no host sync.
int64_t tri_count(int64_t row, int64_t col, int64_t offset, bool lower) {
  int64_t n = 0;
  for (int64_t i = 0; i < row; ++i) {
    if (lower)
      n += std::clamp<int64_t>(i + offset + 1, 0, col);
    else
      n += col - std::clamp<int64_t>(i + offset, 0, col);
  }
  return n;
}

template <bool kLower>
at::Tensor tri_indices(int64_t row, int64_t col, int64_t offset, std::optional<ScalarType> dtype,
                       std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                       std::optional<bool> pin_memory) {
  (void)pin_memory;
  const char* name = kLower ? "tril_indices" : "triu_indices";
  ScalarType t = dtype.value_or(c10::kLong);
  TORCH_CHECK_NOT_IMPLEMENTED(t == c10::kLong || t == c10::kInt, "\"", name, "\" not implemented for '",
                              c10::toString(t), "'");
  TORCH_CHECK(row >= 0, "row must be non-negative, got", row);
  TORCH_CHECK(col >= 0, "col must be non-negative, got", col);
  TORCH_CHECK(layout.value_or(c10::kStrided) == c10::kStrided, name, ": only strided layout is supported");
  // Offsets beyond the grid's diagonals all mean the same; clamping keeps
  // the program's constants small and exact.
  offset = std::clamp<int64_t>(offset, -row - 1, col + 1);
  int64_t n = tri_count(row, col, offset, kLower);
  c10::Device dev = device.value_or(c10::Device(c10::DeviceType::PrivateUse1, 0));
  at::Tensor out = empty_tpu({2, n}, t, dev);
  if (n == 0) return out;
  record::OpCall call(name);
  call.attr(row).attr(col).attr(offset);
  call.output(out);
  call.run([&](Builder& b, const Values&) {
    std::vector<int64_t> grid{row, col};
    Value i = b.iota(grid, 0, ElemType::kS64), j = b.iota(grid, 1, ElemType::kS64);
    Value keep = b.compare(b.sub(j, i), b.constant(static_cast<double>(offset), ElemType::kS64, grid),
                           kLower ? Direction::kLe : Direction::kGe);
    // Kept cells keep their row-major index; the rest sort past the end.
    Value flat = b.add(b.mul(i, b.constant(static_cast<double>(col), ElemType::kS64, grid)), j);
    Value key = b.select(keep, flat, b.constant(static_cast<double>(row * col), ElemType::kS64, grid));
    Value sorted = b.sort({b.reshape(key, {row * col})}, 0, false)[0];
    Value k = b.slice(sorted, {0}, {n}, {1});
    Value c = b.constant(static_cast<double>(col), ElemType::kS64, {n});
    Value ri = b.reshape(b.div(k, c), {1, n});
    Value ci = b.reshape(b.rem(k, c), {1, n});
    return Values{b.concatenate({ri, ci}, 0)};
  });
  return out;
}

// --- _efficientzerotensor ----------------------------------------------------------------
at::Tensor efficientzerotensor(c10::IntArrayRef size, std::optional<ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory) {
  c10::Device dev = device.value_or(c10::Device("tpu"));
  at::Tensor out = empty_tpu(size, dtype.value_or(default_float()), dev);
  if (out.numel() == 0) return out;
  record::OpCall call("_efficientzerotensor");
  call.output(out);
  Dims d(size.begin(), size.end());
  call.attr(size);
  call.run([&](Builder& b, const Values&) { return Values{zero(b, to_elem(out.scalar_type()), d)}; });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", arange_out);
  m.impl("linspace.out", linspace_out);
  m.impl("eye.out", eye_out);
  m.impl("eye.m_out", eye_m_out);
  m.impl("logspace.out", logspace_out);
  m.impl("triu_indices", tri_indices<false>);
  m.impl("tril_indices", tri_indices<true>);
  m.impl("_efficientzerotensor", efficientzerotensor);
}

}  // namespace
}  // namespace torch_tpu::ops
