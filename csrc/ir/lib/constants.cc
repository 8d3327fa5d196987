#include "ir/lib/constants.h"

#include <cstdint>
#include <limits>

namespace torch_tpu::ir {

Value full_like(Builder& b, double v, Value like) { return b.constant(v, b.elem(like), b.dims(like)); }
Value zero(Builder& b, ElemType t, const Dims& dims) { return b.constant(0, t, dims); }
Value one(Builder& b, ElemType t, const Dims& dims) { return b.constant(1, t, dims); }

Value lowest(Builder& b, ElemType t) {
  switch (t) {
    case ElemType::kPred:
    case ElemType::kU8:
    case ElemType::kU32:
    case ElemType::kU64:
      return b.constant(0, t);
    case ElemType::kS8:
      return b.constant(std::numeric_limits<int8_t>::min(), t);
    case ElemType::kS16:
      return b.constant(std::numeric_limits<int16_t>::min(), t);
    case ElemType::kS32:
      return b.constant(std::numeric_limits<int32_t>::min(), t);
    case ElemType::kS64:
      // Not exactly representable as a double literal: pass the bits.
      return b.constant_bits(static_cast<uint64_t>(std::numeric_limits<int64_t>::min()), t);
    default:
      return b.constant(-std::numeric_limits<double>::infinity(), t);
  }
}

Value highest(Builder& b, ElemType t) {
  switch (t) {
    case ElemType::kPred:
      return b.constant(1, t);
    case ElemType::kS8:
      return b.constant(std::numeric_limits<int8_t>::max(), t);
    case ElemType::kU8:
      return b.constant(std::numeric_limits<uint8_t>::max(), t);
    case ElemType::kS16:
      return b.constant(std::numeric_limits<int16_t>::max(), t);
    case ElemType::kS32:
      return b.constant(std::numeric_limits<int32_t>::max(), t);
    case ElemType::kU32:
      return b.constant(std::numeric_limits<uint32_t>::max(), t);
    case ElemType::kS64:
      return b.constant_bits(static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), t);
    case ElemType::kU64:
      return b.constant_bits(std::numeric_limits<uint64_t>::max(), t);
    default:
      return b.constant(std::numeric_limits<double>::infinity(), t);
  }
}

}  // namespace torch_tpu::ir
