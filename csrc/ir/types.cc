#include "ir/types.h"

namespace torch_tpu::ir {

const char* mlir_name(ElemType t) {
  switch (t) {
    case ElemType::kPred:
      return "i1";
    case ElemType::kS8:
      return "i8";
    case ElemType::kS16:
      return "i16";
    case ElemType::kS32:
      return "i32";
    case ElemType::kS64:
      return "i64";
    case ElemType::kU8:
      return "ui8";
    case ElemType::kU32:
      return "ui32";
    case ElemType::kU64:
      return "ui64";
    case ElemType::kF16:
      return "f16";
    case ElemType::kBF16:
      return "bf16";
    case ElemType::kF32:
      return "f32";
    case ElemType::kF64:
      return "f64";
    case ElemType::kC64:
      return "complex<f32>";
    case ElemType::kC128:
      return "complex<f64>";
  }
  return "?";
}

int byte_size(ElemType t) {
  switch (t) {
    case ElemType::kPred:
    case ElemType::kS8:
    case ElemType::kU8:
      return 1;
    case ElemType::kS16:
    case ElemType::kF16:
    case ElemType::kBF16:
      return 2;
    case ElemType::kS32:
    case ElemType::kU32:
    case ElemType::kF32:
      return 4;
    case ElemType::kS64:
    case ElemType::kU64:
    case ElemType::kF64:
    case ElemType::kC64:
      return 8;
    case ElemType::kC128:
      return 16;
  }
  return 0;
}

std::string TensorType::mlir() const {
  std::string s = "tensor<";
  for (int64_t d : dims) {
    s += std::to_string(d);
    s += 'x';
  }
  s += mlir_name(elem);
  s += '>';
  return s;
}

}  // namespace torch_tpu::ir
