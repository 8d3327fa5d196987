#include "ir/lib/math.h"

namespace torch_tpu::ir {

ElemType compute_type(ElemType t) { return (t == ElemType::kBF16 || t == ElemType::kF16) ? ElemType::kF32 : t; }

Value upcast(Builder& b, Value x) {
  ElemType t = compute_type(b.elem(x));
  return t == b.elem(x) ? x : b.convert(x, t);
}

Value is_nan(Builder& b, Value x) { return b.compare(x, x, Direction::kNe); }

}  // namespace torch_tpu::ir
