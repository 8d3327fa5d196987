// Helpers shared by the random-op files (random.cc, gamma.cc): drawing the
// call's counter range from the tpu generator, and turning the PHILOX bits
// that the program draws itself into uniforms and normals.
#pragma once
#include <ATen/core/Generator.h>

#include <optional>

#include "ops/common.h"

namespace torch_tpu::ops::rng {

constexpr double kPi = 3.14159265358979323846;

// Reserves counters for `words` 32-bit random words and adds (seed, offset)
// as the call's next two runtime scalars (see random.cc).
void add_rng_state(record::OpCall& call, const std::optional<at::Generator>& gen, const at::Tensor& self,
                   uint64_t words);
// Random bits of `bits_type` (u32 or u64) shaped `dims`.
Value random_bits(Builder& b, Value seed, Value offset, const Dims& dims, ElemType bits_type);
// Uniform floats in [0, 1) of element type `ft` (f32 or f64), every value exact.
Value uniform01(Builder& b, Value seed, Value offset, const Dims& dims, ElemType ft);
// Standard normals by Box-Muller; two uniforms per output.
Value std_normal(Builder& b, Value seed, Value offset, const Dims& dims, ElemType ft);

// Float outputs are computed in f64 for double tensors, else in f32 (and
// converted to bf16/f16 on store).
inline c10::ScalarType compute_type(c10::ScalarType t) { return t == c10::kDouble ? c10::kDouble : c10::kFloat; }
// 32-bit words one uniform of the compute type takes.
inline uint64_t words_per(c10::ScalarType compute) { return compute == c10::kDouble ? 2 : 1; }

}  // namespace torch_tpu::ops::rng
