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
#include "record/op_call.h"
#include "ir/builder.h"
#include "ir/lib/constants.h"
#include "ir/lib/indexing.h"
#include "ir/lib/math.h"

namespace torch_tpu::ops {

using ir::BinaryOp;
using ir::Builder;
using ir::Dims;
using ir::Direction;
using ir::ElemType;
using ir::UnaryOp;
using ir::Value;
// The IR helper library (ir/lib), used unqualified by every family.
using ir::cumsum;
using ir::full_like;
using ir::gather_along;
using ir::gather_rows;
using ir::highest;
using ir::inclusive_scan;
using ir::iota_dims;
using ir::is_nan;
using ir::lowest;
using ir::one;
using ir::scatter_rows;
using ir::zero;
using Values = std::vector<Value>;

// A new tpu tensor (uninitialised; reading it gives zeros).
at::Tensor empty_tpu(c10::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device);
at::Tensor empty_like_tpu(const at::Tensor& like, std::optional<c10::ScalarType> dtype = std::nullopt);

// PyTorch's out= rules: checks the dtype cast, resizes (warning when a
// non-empty out is resized, as ATen does).
void prepare_out(at::Tensor& out, c10::IntArrayRef sizes, c10::ScalarType result_dtype, const char* op);
// Stricter out= dtype rules, with CPU's messages. Structured kernels that are
// not TensorIterator ops (tril, gather, sort, ...) want out's dtype exactly.
void check_structured_out(const at::Tensor& out, c10::ScalarType dtype);
// TensorIterator ops whose operands must all share one dtype (ATen's
// unary_op: abs, neg, floor, ...; clamp with Scalar bounds).
void check_same_dtype_out(const at::Tensor& out, c10::ScalarType dtype);
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

// PyTorch's "opmath" type: half types compute in float32, others in themselves.
c10::ScalarType opmath(c10::ScalarType t);
// Strides of a dense tensor of `sizes` in `format` (a layout's
// suggest_memory_format()); empty for contiguous. Ops whose CPU kernels
// keep a channels-last input's layout (upsampling) give their results these.
std::vector<int64_t> strides_in(c10::IntArrayRef sizes, c10::MemoryFormat format);

// An empty meta tensor with t's sizes, strides and dtype (undefined stays
// undefined): lets a kernel run ATen's own shape checks without data.
at::Tensor meta_of(const at::Tensor& t);
// NotImplementedError like CPU's dtype dispatch for float-only kernels:
// "\"<kernel>\" not implemented for '<dtype>'".
void check_float(const at::Tensor& t, const char* kernel);
inline constexpr ElemType kS64 = ElemType::kS64;
// A tensor's sizes as IR dims.
inline Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }
inline ElemType opmath_elem(c10::ScalarType t) { return ir::compute_type(to_elem(t)); }
// dot_general/convolution precision for operands of dtype `t`, following
// torch.set_float32_matmul_precision (highest/high/medium -> HIGHEST/HIGH/DEFAULT).
const char* precision_for(c10::ScalarType t);

}  // namespace torch_tpu::ops
