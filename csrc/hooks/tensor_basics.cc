// The minimal op set every PrivateUse1 backend needs: allocation, views
// (metadata only, sharing the storage slot), resize, set_, copies between
// devices and .item().
#include <ATen/EmptyTensor.h>
#include <c10/core/DeviceGuard.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/_reshape_alias_native.h>
#include <ATen/ops/as_strided_native.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/view_native.h>
#include <torch/library.h>

#include "aten/device.h"
#include "aten/storage.h"
#include "ops/shape/append.h"
#include "record/op_call.h"

namespace torch_tpu {
namespace {

void check_dtype(c10::ScalarType t) {
  TORCH_CHECK_TYPE(is_supported(t), "tpu does not support dtype ", t,
                   " (supported: bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, "
                   "complex64, complex128)");
}

at::Tensor empty_memory_format(c10::IntArrayRef size, std::optional<c10::ScalarType> dtype,
                               std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                               std::optional<bool> pin_memory, std::optional<c10::MemoryFormat> fmt) {
  auto t = c10::dtype_or_default(dtype);
  check_dtype(t);
  TORCH_CHECK(!pin_memory.has_value() || !*pin_memory, "pin_memory is only for CPU tensors");
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_generic(size, tpu_allocator(), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t, fmt);
}

at::Tensor empty_strided(c10::IntArrayRef size, c10::IntArrayRef stride, std::optional<c10::ScalarType> dtype,
                         std::optional<c10::Layout> layout, std::optional<c10::Device> device,
                         std::optional<bool> pin_memory) {
  auto t = c10::dtype_or_default(dtype);
  check_dtype(t);
  c10::OptionalDeviceGuard guard(device);
  return at::detail::empty_strided_generic(size, stride, tpu_allocator(),
                                           c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), t);
}

const at::Tensor& resize_(const at::Tensor& self, c10::IntArrayRef size, std::optional<c10::MemoryFormat> fmt) {
  auto* impl = self.unsafeGetTensorImpl();
  impl->set_sizes_contiguous(size);
  if (fmt.has_value() && *fmt != c10::MemoryFormat::Preserve && *fmt != c10::MemoryFormat::Contiguous)
    impl->empty_tensor_restride(*fmt);
  int64_t numel = self.numel();
  size_t needed = numel == 0 ? 0 : (self.storage_offset() + numel) * self.itemsize();
  if (needed > self.storage().nbytes()) {
    auto& hooks = at::detail::getPrivateUse1Hooks();
    hooks.resizePrivateUse1Bytes(self.storage(), needed);
  }
  return self;
}

at::Tensor& set_source_storage_offset(at::Tensor& self, c10::Storage src, int64_t offset, c10::IntArrayRef size,
                                      c10::IntArrayRef stride) {
  at::native::checkSetStorage(self, src, offset, size, stride);
  self.unsafeGetTensorImpl()->set_storage_offset(offset);
  self.unsafeGetTensorImpl()->set_sizes_and_strides(size, stride);
  return self;
}

at::Tensor& set_source_storage(at::Tensor& self, c10::Storage src) {
  int64_t n = static_cast<int64_t>(src.nbytes() / self.itemsize());
  return set_source_storage_offset(self, src, 0, {n}, {1});
}

at::Tensor& set_source_tensor(at::Tensor& self, const at::Tensor& src) {
  return set_source_storage_offset(self, src.storage(), src.storage_offset(), src.sizes(), src.strides());
}

at::Tensor& set_empty(at::Tensor& self) {
  c10::Storage s(c10::Storage::use_byte_size_t(), 0, tpu_allocator(), true);
  return set_source_storage_offset(self, s, 0, {0}, {1});
}

// Conjugate/negative bits (lazy conj(), _neg_view()) are metadata: the
// storage holds the unconjugated values. Copies apply the difference.
at::Tensor apply_bits(at::Tensor t, bool conj, bool neg) {
  if (conj && t.is_complex()) t = t.conj_physical();
  if (neg) t = t.neg();
  return t;
}

at::Tensor copy_from(const at::Tensor& self, const at::Tensor& dst, bool non_blocking) {
  bool src_tpu = self.device().type() == c10::DeviceType::PrivateUse1;
  bool dst_tpu = dst.device().type() == c10::DeviceType::PrivateUse1;
  if (dst.numel() == 0) return dst;
  if (!src_tpu && dst_tpu) {
    TORCH_CHECK(self.device().is_cpu(), "tpu: copies from ", self.device(), " are not supported; copy to CPU first");
    at::Tensor logical = self.resolve_conj().resolve_neg().to(dst.scalar_type());
    at::Tensor host = apply_bits(logical, dst.is_conj(), dst.is_neg()).expand(dst.sizes()).contiguous();
    if (!ops::upload_with_room(host, dst)) record::copy_from_host(dst, host.const_data_ptr(), host.nbytes());
  } else if (src_tpu && !dst_tpu) {
    TORCH_CHECK(dst.device().is_cpu(), "tpu: copies to ", dst.device(), " are not supported; copy to CPU first");
    // The common case (.cpu(), a staging buffer) lands in dst directly; the
    // rest goes through a host temporary that dst.copy_ converts.
    bool direct = dst.is_contiguous() && dst.scalar_type() == self.scalar_type() && dst.sizes().equals(self.sizes()) &&
                  !self.is_conj() && !self.is_neg() && !dst.is_conj() && !dst.is_neg() &&
                  self.is_non_overlapping_and_dense() && self.is_contiguous();
    if (direct) {
      record::copy_to_host(self, dst.mutable_data_ptr(), dst.nbytes());
      return dst;
    }
    at::Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU));
    record::copy_to_host(self, host.mutable_data_ptr(), host.nbytes());
    dst.copy_(apply_bits(host, self.is_conj(), self.is_neg()));
  } else if (self.device() != dst.device()) {
    // Between two tpu devices: staged through the host (PJRT's device-to-
    // device copy is not in every plugin's API version).
    at::Tensor host = at::empty(self.sizes(), self.options().device(c10::kCPU));
    record::copy_to_host(self, host.mutable_data_ptr(), host.nbytes());
    host = apply_bits(host, self.is_conj(), self.is_neg()).to(dst.scalar_type());
    at::Tensor staged = apply_bits(host, dst.is_conj(), dst.is_neg()).expand(dst.sizes()).contiguous();
    record::copy_from_host(dst, staged.const_data_ptr(), staged.nbytes());
  } else if (!ops::convert_with_room(self, dst)) {
    bool conj = self.is_conj() != dst.is_conj() && (self.is_complex() || dst.is_complex());
    bool neg = self.is_neg() != dst.is_neg();
    auto de = to_elem(dst.scalar_type());
    record::OpCall call("copy_");
    call.input(self);
    call.attr(conj).attr(neg);
    call.output(dst);
    call.run([conj, neg, de](ir::Builder& b, const std::vector<ir::Value>& in) {
      ir::Value x = b.convert(in[0], de);
      if (conj && ir::is_complex(de)) x = b.complex(b.real(x), b.neg(b.imag(x)));
      if (neg) x = b.neg(x);
      return std::vector<ir::Value>{x};
    });
  }
  return dst;
}

at::Tensor copy_from_and_resize(const at::Tensor& self, const at::Tensor& dst) {
  if (dst.sizes() != self.sizes()) {
    if (dst.device().type() == c10::DeviceType::PrivateUse1)
      resize_(dst, self.sizes(), std::nullopt);
    else
      dst.resize_(self.sizes());
  }
  return copy_from(self, dst, false);
}

c10::Scalar local_scalar_dense(const at::Tensor& self) {
  at::Tensor host = at::empty({}, self.options().device(c10::kCPU));
  record::copy_to_host(self, host.mutable_data_ptr(), host.nbytes());
  return host.item();
}

at::Tensor& fill_scalar(at::Tensor& self, const c10::Scalar& value) {
  if (ops::fill_with_room(self, value)) return self;
  record::OpCall call("fill_");
  call.scalar(value, self.scalar_type());
  call.output(self);
  call.run([](ir::Builder&, const std::vector<ir::Value>& in) { return std::vector<ir::Value>{in[0]}; });
  return self;
}

at::Tensor& fill_tensor(at::Tensor& self, const at::Tensor& value) {
  TORCH_CHECK(value.dim() == 0, "fill_ only supports 0-dimension value tensor but got tensor with ", value.dim(),
              " dimensions.");
  record::OpCall call("fill_");
  call.input(value);
  call.output(self);
  call.run([](ir::Builder&, const std::vector<ir::Value>& in) { return std::vector<ir::Value>{in[0]}; });
  return self;
}

at::Tensor& zero_(at::Tensor& self) {
  record::OpCall call("zero_");
  call.output(self);
  auto e = to_elem(self.scalar_type());
  call.attr(static_cast<int64_t>(e));
  call.run([e](ir::Builder& b, const std::vector<ir::Value>&) { return std::vector<ir::Value>{b.constant(0, e)}; });
  return self;
}

// nn.Module.to("tpu") swaps `param.data` in place only when the CPU and tpu
// tensor types count as compatible; otherwise it creates new Parameters and
// tied weights (one Parameter in two modules) silently come apart.
bool has_compatible_shallow_copy_type(const at::Tensor& self, const at::Tensor& from) {
  auto dense = [](const at::Tensor& t) {
    return t.layout() == c10::kStrided && (t.device().is_cpu() || t.device().type() == c10::DeviceType::PrivateUse1);
  };
  if (dense(self) && dense(from)) return true;
  return self.unsafeGetTensorImpl()->has_compatible_shallow_copy_type(from.key_set());
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("_has_compatible_shallow_copy_type", has_compatible_shallow_copy_type);
  // PJRT keeps a buffer alive while queued work uses it: nothing to record.
  m.impl("record_stream", [](at::Tensor&, c10::Stream) {});
  m.impl("empty.memory_format", empty_memory_format);
  m.impl("empty_strided", empty_strided);
  m.impl("as_strided", at::native::as_strided_tensorimpl);
  m.impl("view", at::native::view);
  m.impl("_reshape_alias", at::native::_reshape_alias);
  m.impl("resize_", resize_);
  m.impl("set_.source_Storage_storage_offset", set_source_storage_offset);
  m.impl("set_.source_Storage", set_source_storage);
  m.impl("set_.source_Tensor", set_source_tensor);
  m.impl("set_", set_empty);
  m.impl("_copy_from", copy_from);
  m.impl("_copy_from_and_resize", copy_from_and_resize);
  m.impl("_local_scalar_dense", local_scalar_dense);
  m.impl("fill_.Scalar", fill_scalar);
  m.impl("fill_.Tensor", fill_tensor);
  m.impl("zero_", zero_);
}

}  // namespace
}  // namespace torch_tpu

namespace torch_tpu {
namespace {
// copy_ reaches _copy_from with the conj/neg bits still set (CPU copies
// never do). The generic bit fallback would clone the input, and clone
// copies through _copy_from again, forever; copy_from applies the bits.
TORCH_LIBRARY_IMPL(aten, Conjugate, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
TORCH_LIBRARY_IMPL(aten, Negative, m) {
  m.impl("_copy_from", torch::CppFunction::makeFallthrough());
  m.impl("_copy_from_and_resize", torch::CppFunction::makeFallthrough());
}
}  // namespace
}  // namespace torch_tpu
