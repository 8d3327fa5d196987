// Element and tensor types of the IR (StableHLO's, not torch's).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::ir {

enum class ElemType : uint8_t { kPred, kS8, kS16, kS32, kS64, kU8, kU32, kU64, kF16, kBF16, kF32, kF64, kC64, kC128 };

const char* mlir_name(ElemType t);  // "i1", "i32", "bf16", ...
int byte_size(ElemType t);
inline bool is_float(ElemType t) {
  return t == ElemType::kF16 || t == ElemType::kBF16 || t == ElemType::kF32 || t == ElemType::kF64;
}
inline bool is_complex(ElemType t) { return t == ElemType::kC64 || t == ElemType::kC128; }
// The real type of a complex type's parts (f32 for c64); other types map to themselves.
inline ElemType component(ElemType t) {
  return t == ElemType::kC64 ? ElemType::kF32 : t == ElemType::kC128 ? ElemType::kF64 : t;
}
// The complex type whose parts are `t` (f32 -> c64, f64 -> c128).
inline ElemType complex_of(ElemType t) { return t == ElemType::kF64 ? ElemType::kC128 : ElemType::kC64; }
inline bool is_signed_int(ElemType t) {
  return t == ElemType::kS8 || t == ElemType::kS16 || t == ElemType::kS32 || t == ElemType::kS64;
}

struct TensorType {
  ElemType elem = ElemType::kF32;
  std::vector<int64_t> dims;

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
  int rank() const { return static_cast<int>(dims.size()); }
  std::string mlir() const;  // "tensor<2x3xf32>"
  bool operator==(const TensorType& o) const { return elem == o.elem && dims == o.dims; }
};

}  // namespace torch_tpu::ir
