// trace: the sum of a matrix's main diagonal, as one reduce over the
// iota == iota mask; integers accumulate in int64 and bool is refused, as
// on CPU.
#include <torch/library.h>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

using c10::ScalarType;
using ir::Dims;

Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

// --- trace -------------------------------------------------------------------------------
at::Tensor trace(const at::Tensor& self) {
  TORCH_CHECK(self.dim() == 2, "trace: expected a matrix, but got tensor with dim ", self.dim());
  ScalarType t = self.scalar_type();
  TORCH_CHECK_NOT_IMPLEMENTED(t != c10::kBool, "\"trace\" not implemented for 'Bool'");
  ScalarType rt = c10::isIntegralType(t, /*includeBool=*/true) ? c10::kLong : t;
  at::Tensor out = empty_tpu({}, rt, self.device());
  auto ct = opmath(rt);
  ElemType e = to_elem(ct);
  Dims d = dims_of(self);
  record::OpCall call("trace");
  call.attr(static_cast<int64_t>(ct));
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value x = b.convert(in[0], e);
    Value diag = b.compare(b.iota(d, 0, ElemType::kS64), b.iota(d, 1, ElemType::kS64), Direction::kEq);
    return Values{b.reduce(b.select(diag, x, full_like(b, 0, x)), zero(b, e), {0, 1}, BinaryOp::kAdd)};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) { m.impl("trace", trace); }

}  // namespace
}  // namespace torch_tpu::ops
