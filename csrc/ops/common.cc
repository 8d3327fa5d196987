#include "ops/common.h"

#include "ops/shape/append.h"
#include "record/driver.h"

#include <algorithm>

#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/empty_strided.h>
#include <c10/core/ScalarType.h>

#include <limits>

namespace torch_tpu::ops {

at::Tensor empty_tpu(c10::IntArrayRef sizes, c10::ScalarType dtype, c10::Device device) {
  return at::empty(sizes, at::TensorOptions().dtype(dtype).device(device));
}

at::Tensor empty_like_tpu(const at::Tensor& like, std::optional<c10::ScalarType> dtype) {
  return empty_tpu(like.sizes(), dtype.value_or(like.scalar_type()), like.device());
}

void prepare_out(at::Tensor& out, c10::IntArrayRef sizes, c10::ScalarType result_dtype, const char* op) {
  TORCH_CHECK(c10::canCast(result_dtype, out.scalar_type()), "result type ", result_dtype,
              " can't be cast to the desired output type ", out.scalar_type());
  at::native::resize_output(out, sizes);
}

void check_structured_out(const at::Tensor& out, c10::ScalarType dtype) {
  TORCH_CHECK(out.scalar_type() == dtype, "Expected out tensor to have dtype ", c10::scalarTypeToTypeMeta(dtype),
              ", but got ", out.dtype(), " instead");
}

void check_same_dtype_out(const at::Tensor& out, c10::ScalarType dtype) {
  TORCH_CHECK(out.scalar_type() == dtype, "Found dtype ", out.scalar_type(), " but expected ", dtype);
}

std::vector<int64_t> strides_in(c10::IntArrayRef sizes, c10::MemoryFormat format) {
  if (format == c10::MemoryFormat::ChannelsLast && sizes.size() == 4) return c10::get_channels_last_strides_2d(sizes);
  if (format == c10::MemoryFormat::ChannelsLast3d && sizes.size() == 5) return c10::get_channels_last_strides_3d(sizes);
  return {};
}

at::Tensor meta_of(const at::Tensor& t) {
  if (!t.defined()) return t;
  return at::empty_strided(t.sizes(), t.strides(), t.options().device(c10::kMeta));
}

void check_float(const at::Tensor& t, const char* kernel) {
  TORCH_CHECK_NOT_IMPLEMENTED(c10::isFloatingType(t.scalar_type()), "\"", kernel, "\" not implemented for '",
                              c10::toString(t.scalar_type()), "'");
}

void check_inplace(const at::Tensor& self, c10::IntArrayRef shape, c10::ScalarType result_dtype) {
  TORCH_CHECK(c10::canCast(result_dtype, self.scalar_type()), "result type ", result_dtype,
              " can't be cast to the desired output type ", self.scalar_type());
  TORCH_CHECK(self.sizes().equals(shape), "output with shape ", self.sizes(), " doesn't match the broadcast shape ",
              shape);
}

std::vector<int64_t> broadcast_shape(const std::vector<Operand>& ins) {
  std::vector<int64_t> shape;
  for (const Operand& o : ins) {
    if (!o.t.defined()) continue;
    shape = at::infer_size(shape, o.t.sizes());
  }
  return shape;
}

namespace {

// Operands and result of an elementwise op over tensors with room
// (shape/append.h), read and written as their whole storages: one program
// per storage size where generate()'s glue would compile one per length.
// nullopt unless every tensor operand has the result's shape and one room.
std::optional<std::pair<std::vector<Operand>, at::Tensor>> over_room(const std::vector<Operand>& ins,
                                                                     const at::Tensor& out) {
  int64_t room = 0;
  std::vector<Operand> whole;
  for (const Operand& o : ins) {
    if (!o.t.defined() || (o.t.dim() == 0 && o.t.device().is_cpu())) {
      whole.push_back(o);
      continue;
    }
    const int64_t r = room_of(o.t);
    if (r == 0 || (room != 0 && r != room) || !o.t.sizes().equals(out.sizes())) return std::nullopt;
    room = r;
    whole.emplace_back(whole_of(o.t));
  }
  if (room == 0) return std::nullopt;
  std::optional<at::Tensor> w = whole_out(out, room);
  if (!w) return std::nullopt;
  return std::make_pair(std::move(whole), *w);
}

void pointwise_into(std::string_view name, const std::vector<Operand>& ins, const at::Tensor& out,
                    c10::ScalarType compute, const PointwiseFn& fn, int64_t variant) {
  record::OpCall call(name);
  call.attr(static_cast<int64_t>(compute)).attr(variant);
  // Elementwise work on contiguous tensors of one shape depends on the
  // element count alone: key and read them as 1-D, so [8, 128, 256] and
  // [1024, 256] share one program (fewer compiles on a cold start). Only
  // for programs of one op: in a recorded graph the op stays in its
  // tensors' shape, which XLA's SPMD partitioner needs (a weight split on
  // its columns has no split on its flat form).
  const bool flat = record::current_driver().one_program_per_call() && out.dim() > 1 && out.is_contiguous() &&
                    std::all_of(ins.begin(), ins.end(), [&](const Operand& o) {
                      return !o.t.defined() || (o.t.dim() == 0 && o.t.device().is_cpu()) ||
                             (o.t.sizes() == out.sizes() && o.t.is_contiguous());
                    });
  if (flat) call.flat_views();
  for (const Operand& o : ins) {
    if (o.t.defined())
      call.input(o.t);
    else
      call.scalar(*o.s, compute);
  }
  call.output(out);
  ElemType ce = to_elem(compute);
  std::vector<int64_t> shape =
      flat ? std::vector<int64_t>{out.numel()} : std::vector<int64_t>(out.sizes().begin(), out.sizes().end());
  call.run([&](Builder& b, const Values& in) {
    Values xs;
    for (Value v : in) xs.push_back(b.broadcast_to(b.convert(v, ce), shape));
    return Values{fn(b, xs)};
  });
}

}  // namespace

void pointwise(std::string_view name, const std::vector<Operand>& ins, const at::Tensor& out, c10::ScalarType compute,
               const PointwiseFn& fn, int64_t variant) {
  if (auto r = over_room(ins, out)) return pointwise_into(name, r->first, r->second, compute, fn, variant);
  pointwise_into(name, ins, out, compute, fn, variant);
}

int64_t wrap_dim(int64_t dim, int64_t rank) {
  int64_t r = rank == 0 ? 1 : rank;
  TORCH_CHECK_INDEX(dim >= -r && dim < r, "Dimension out of range (expected to be in range of [", -r, ", ", r - 1,
                    "], but got ", dim, ")");
  return dim < 0 ? dim + r : dim;
}

c10::ScalarType default_float() { return c10::typeMetaToScalarType(c10::get_default_dtype()); }

c10::ScalarType float_result(c10::ScalarType t) {
  return c10::isFloatingType(t) || c10::isComplexType(t) ? t : default_float();
}

c10::ScalarType opmath(c10::ScalarType t) { return (t == c10::kHalf || t == c10::kBFloat16) ? c10::kFloat : t; }

const char* precision_for(c10::ScalarType t) {
  if (t == c10::kDouble) return "HIGHEST";
  if (t != c10::kFloat) return "DEFAULT";
  switch (at::globalContext().float32MatmulPrecision()) {
    case at::Float32MatmulPrecision::HIGHEST:
      return "HIGHEST";
    case at::Float32MatmulPrecision::HIGH:
      return "HIGH";
    case at::Float32MatmulPrecision::MEDIUM:
      return "DEFAULT";
  }
  return "DEFAULT";
}

}  // namespace torch_tpu::ops
