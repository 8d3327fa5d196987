// Factory ops with data-independent contents: arange, linspace, eye. The
// output length is static (it is the tensor's shape), while start/step/end
// are runtime scalars so e.g. arange(0, n) and arange(5, n + 5) share one
// executable. full/zeros/ones and *_like decompose to empty + fill_ upstream.
#include <ATen/native/Resize.h>
#include <torch/library.h>

#include <cmath>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

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

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("arange.start_out", arange_out);
  m.impl("linspace.out", linspace_out);
  m.impl("eye.out", eye_out);
  m.impl("eye.m_out", eye_m_out);
}

}  // namespace
}  // namespace torch_tpu::ops
