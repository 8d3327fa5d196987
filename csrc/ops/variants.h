// One declaration per op gives its functional, in-place and out= kernels, as
// ATen's structured kernels do. An op is a type with
//   static constexpr const char* kName;              // for error messages
//   static M meta(const at::Tensor& self, Args... args);  // checks; result sizes/dtype/device
//     (M is OutMeta, or a struct deriving from it that also carries what impl
//     needs, so nothing is computed twice)
//   static void impl(const at::Tensor& out, const M& m, const at::Tensor& self, Args... args);
//                                                    // writes the result; `m` is what meta returned
// and optionally
//   static std::optional<c10::ScalarType> same_dtype_out(const at::Tensor& self, Args... args);
//                                                    // the dtype out= must have, checked before meta
//     (TensorIterator ops with all operands one dtype check it before their
//     dtype dispatch: abs(bool, out=int) gets "Found dtype", not "not implemented")
//   static void check_out(const at::Tensor& out, const M& m, const at::Tensor& self, Args... args);
//                                                    // an op's own rule for out='s dtype, after meta
//   static void inplace_rule(const at::Tensor& self, const M& m, Args... args);
//                                                    // an op's own in-place check, in place of the usual
// and register_variants<Op>(m, "neg") registers neg, neg_ and neg.out from
// it. PyTorch's rules live here once: out= checks the dtype cast and resizes
// (warning when a non-empty out changes shape), in-place requires the result
// shape to be self's and the result dtype castable to self's.
#pragma once
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>
#include <torch/library.h>

#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/common.h"

namespace torch_tpu::ops {

// How out='s dtype may differ from the result's: castable (TensorIterator
// ops that cast to outputs, e.g. add, sin), the same (TensorIterator ops with
// all operands one dtype, e.g. abs, floor), exactly (other structured
// kernels), or out's own (reductions such as sum, whose out= decides the
// dtype they accumulate in; impl reads it from out, and any rule it has
// lives in the op's check_out).
enum class OutDtype : uint8_t { kCastable, kSame, kExact, kOwn };

struct OutMeta {
  std::vector<int64_t> sizes;
  c10::ScalarType dtype = c10::kFloat;
  c10::Device device = c10::kCPU;
  OutDtype out_dtype = OutDtype::kCastable;
  // The functional result takes its operands' layout (TensorIterator ops);
  // false: contiguous (reductions and other structured kernels).
  bool operand_layout = true;
};

namespace detail {
// The strides of the first tensor operand of the result's shape whose
// elements are dense and do not overlap, when that tensor is not
// contiguous (empty: contiguous). TensorIterator gives its outputs its
// operands' layout in the same way, so `(q * 2).transpose(1, 2).view(...)`
// works on tpu wherever it works on CPU.
inline void layout_from(std::vector<int64_t>& strides, bool& decided, c10::IntArrayRef sizes, const at::Tensor& t) {
  if (decided || !t.defined() || t.device().is_cpu() || t.sizes() != sizes || !t.is_non_overlapping_and_dense()) return;
  decided = true;
  if (!t.is_contiguous()) strides = t.strides().vec();
}
template <class T>
void layout_from(std::vector<int64_t>&, bool&, c10::IntArrayRef, const T&) {}
}  // namespace detail

template <class Op, class... Args>
struct Variants {
  static at::Tensor functional(const at::Tensor& self, Args... args) {
    auto m = Op::meta(self, args...);
    std::vector<int64_t> strides;
    bool decided = false;
    if (m.operand_layout) {
      detail::layout_from(strides, decided, m.sizes, self);
      (detail::layout_from(strides, decided, m.sizes, args), ...);
    }
    at::Tensor out = strides.empty()
                         ? empty_tpu(m.sizes, m.dtype, m.device)
                         : at::empty_strided(m.sizes, strides, at::TensorOptions().dtype(m.dtype).device(m.device));
    Op::impl(out, m, self, args...);
    return out;
  }
  static at::Tensor& inplace(at::Tensor& self, Args... args) {
    auto m = Op::meta(self, args...);
    if constexpr (requires { Op::inplace_rule(self, m, args...); })
      Op::inplace_rule(self, m, args...);
    else
      check_inplace(self, m.sizes, m.dtype);
    Op::impl(self, m, self, args...);
    return self;
  }
  static at::Tensor& out(const at::Tensor& self, Args... args, at::Tensor& out) {
    if constexpr (requires { Op::same_dtype_out(self, args...); }) {
      if (auto dt = Op::same_dtype_out(self, args...)) check_same_dtype_out(out, *dt);
    }
    auto m = Op::meta(self, args...);
    if constexpr (requires { Op::check_out(out, m, self, args...); }) Op::check_out(out, m, self, args...);
    if (m.out_dtype == OutDtype::kSame) check_same_dtype_out(out, m.dtype);
    if (m.out_dtype == OutDtype::kExact) check_structured_out(out, m.dtype);
    if (m.out_dtype == OutDtype::kOwn)
      at::native::resize_output(out, m.sizes);
    else
      prepare_out(out, m.sizes, m.dtype, Op::kName);
    Op::impl(out, m, self, args...);
    return out;
  }
};

namespace detail {
template <class Op, class M, class... Args>
  requires std::is_base_of_v<OutMeta, M>
Variants<Op, Args...> variants_of(M (*)(const at::Tensor&, Args...));
}  // namespace detail
// The Variants of `Op`, with the argument types of Op::meta after self.
template <class Op>
using VariantsOf = decltype(detail::variants_of<Op>(&Op::meta));

// Schema names of the three forms. The plain rule: "neg" gives neg, neg_ and
// neg.out. Overloads give all three, because ATen names them irregularly
// (pow.Tensor_Scalar, pow_.Scalar, pow.Tensor_Scalar_out); an empty name
// skips that form.
struct VariantNames {
  std::string functional, inplace, out;
  VariantNames(const char* base)  // NOLINT: "neg" is the common case
      : functional(base), inplace(std::string(base) + "_"), out(std::string(base) + ".out") {}
  VariantNames(std::string f, std::string i, std::string o)
      : functional(std::move(f)), inplace(std::move(i)), out(std::move(o)) {}
};

// Registers the forms whose names are non-empty.
template <class Op>
void register_variants(torch::Library& m, const VariantNames& names) {
  using V = VariantsOf<Op>;
  if (!names.functional.empty()) m.impl(names.functional.c_str(), TORCH_FN(V::functional));
  if (!names.inplace.empty()) m.impl(names.inplace.c_str(), TORCH_FN(V::inplace));
  if (!names.out.empty()) m.impl(names.out.c_str(), TORCH_FN(V::out));
}

}  // namespace torch_tpu::ops
