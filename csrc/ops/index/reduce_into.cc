#include "ops/index/reduce_into.h"

#include <string>

#include "ir/lib/constants.h"
#include "ir/types.h"
#include "record/op_call.h"

namespace torch_tpu::ops {

ir::Value reduce_into(ir::Builder& b, ir::Value self, ir::Value src, std::string_view red, bool include_self,
                      ir::BinaryOp comb, ir::BinaryOp count_comb, const ScatterAt& scatter) {
  using ir::Direction;
  using ir::Value;
  ir::ElemType e = b.elem(self);
  ir::Dims shape = b.dims(self);
  Value base = self;
  if (!include_self) {
    // Places that receive updates start from the reduction's identity.
    Value ident = red == "amax"   ? ir::lowest(b, e)
                  : red == "amin" ? ir::highest(b, e)
                  : red == "prod" ? ir::one(b, e)
                                  : ir::zero(b, e);
    base = scatter(self, ident, std::nullopt);
  }
  Value r = scatter(base, src, comb);
  if (red != "mean") return r;
  Value z = ir::zero(b, e, shape), one = ir::one(b, e, shape);
  Value cnt = scatter(include_self ? one : z, ir::one(b, e), count_comb);
  Value safe = b.select(b.compare(cnt, z, Direction::kEq), one, cnt);
  Value q = b.div(r, safe);
  if (!ir::is_float(e) && !ir::is_complex(e)) {
    // Integer mean rounds toward -inf like CPU's floor division (counts are positive).
    Value rem = b.rem(r, safe);
    Value adj = b.and_(b.compare(rem, z, Direction::kNe), b.compare(rem, z, Direction::kLt));
    q = b.select(adj, b.sub(q, one), q);
  }
  return q;
}

void record_reduce_into(const char* name, const at::Tensor& self, int64_t d, const at::Tensor& index,
                        const at::Tensor& src, std::string_view red, bool include_self, ir::BinaryOp comb,
                        ir::BinaryOp count_comb, PlaceAlong place, const at::Tensor& out) {
  std::string r(red);
  record::OpCall call(name);
  call.attr(d).attr(std::string_view(r)).attr(include_self);
  call.input(self);
  call.input(index);
  call.input(src);
  call.output(out);
  call.run([&](ir::Builder& b, const std::vector<ir::Value>& in) {
    ir::Value idx = in[1];
    auto at = [&](ir::Value base, ir::Value updates, std::optional<ir::BinaryOp> c) {
      return place(b, base, idx, updates, d, c);
    };
    return std::vector<ir::Value>{reduce_into(b, in[0], in[2], r, include_self, comb, count_comb, at)};
  });
}

}  // namespace torch_tpu::ops
