// Shared ATen glue for op families: tensor allocation, out= handling, type
// promotion and broadcasting, and the `pointwise` helper that most
// elementwise kernels reduce to. Lowerings stay in IR terms (ir::Builder).
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <optional>
#include <string_view>
#include <vector>

#include "aten/device.h"
#include "eager/op_call.h"
#include "ir/builder.h"

namespace torch_tpu::ops {

using ir::Builder;
using ir::ElemType;
using ir::Value;
using Values = std::vector<Value>;

// A new tpu tensor (uninitialised; reading it gives zeros).
at::Tensor empty_tpu(c10::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device);
at::Tensor empty_like_tpu(const at::Tensor& like, std::optional<c10::ScalarType> dtype = std::nullopt);

// PyTorch's out= rules: checks the dtype cast, resizes (warning when a
// non-empty out is resized, as ATen does).
void prepare_out(at::Tensor& out, c10::IntArrayRef sizes, c10::ScalarType result_dtype, const char* op);
// In-place rules: the broadcast shape must equal self's and the result
// type must be castable to self's dtype.
void check_inplace(const at::Tensor& self, c10::IntArrayRef broadcast_shape, c10::ScalarType result_dtype);

// Tensor-or-Python-number operand of a pointwise op.
struct Operand {
  at::Tensor t;
  std::optional<c10::Scalar> s;
  Operand(const at::Tensor& tensor) : t(tensor) {}   // NOLINT
  Operand(const c10::Scalar& scalar) : s(scalar) {}  // NOLINT
};

using PointwiseFn = std::function<Value(Builder&, const Values&)>;

// Computes `fn` elementwise into `out` (already shaped to the broadcast
// shape). Each operand is converted to `compute` and broadcast first.
// `variant` distinguishes different fns sharing one `name` in the key.
void pointwise(std::string_view name, const std::vector<Operand>& ins, const at::Tensor& out, c10::ScalarType compute,
               const PointwiseFn& fn, int64_t variant = 0);

// Broadcast shape of tensors (PyTorch's error message on mismatch).
std::vector<int64_t> broadcast_shape(const std::vector<Operand>& ins);

// Convenience for reductions etc.: normalise a possibly-negative dim.
int64_t wrap_dim(int64_t dim, int64_t rank);
c10::ScalarType default_float();
// The float dtype ops like exp/sqrt compute in (ints and bool -> default float).
c10::ScalarType float_result(c10::ScalarType t);
// Arithmetic shorthands for lowerings (same-shape operands).
inline Value add(Builder& b, Value x, Value y) { return b.binary("stablehlo.add", x, y); }
inline Value sub(Builder& b, Value x, Value y) { return b.binary("stablehlo.subtract", x, y); }
inline Value mul(Builder& b, Value x, Value y) { return b.binary("stablehlo.multiply", x, y); }
inline Value div(Builder& b, Value x, Value y) { return b.binary("stablehlo.divide", x, y); }

// PyTorch's "opmath" type: half types compute in float32, others in themselves.
c10::ScalarType opmath(c10::ScalarType t);
inline ElemType opmath_elem(c10::ScalarType t) { return to_elem(opmath(t)); }
// dot_general/convolution precision for operands of dtype `t`, following
// torch.set_float32_matmul_precision (highest/high/medium -> HIGHEST/HIGH/DEFAULT).
const char* precision_for(c10::ScalarType t);

// `x` gathered along dim `d` at integer indices `idx` (shape [n] or [n, 1]):
// dim d of the result has size n.
Value gather_along(Builder& b, Value x, int64_t d, Value idx);

// Zero/one/min/max constants of an element type.
Value zero(Builder& b, ElemType t, const std::vector<int64_t>& dims = {});
Value one(Builder& b, ElemType t, const std::vector<int64_t>& dims = {});
Value lowest(Builder& b, ElemType t);   // -inf for floats, min for ints
Value highest(Builder& b, ElemType t);  // +inf for floats, max for ints

}  // namespace torch_tpu::ops
