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
#include <array>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
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
  // The functional result's strides, where the op decides them itself (the
  // layout of ATen's meta result, as pooling keeps channels-last); they
  // take precedence over operand_layout.
  std::vector<int64_t> strides;
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

// A several-result op's result: contiguous, or with the strides its meta gives.
inline at::Tensor empty_result(const OutMeta& m) {
  if (m.strides.empty()) return empty_tpu(m.sizes, m.dtype, m.device);
  return at::empty_strided(m.sizes, m.strides, at::TensorOptions().dtype(m.dtype).device(m.device));
}

// out='s dtype against the result's, by the result's OutDtype rule.
inline void check_out_dtype(const at::Tensor& out, const OutMeta& m) {
  if (m.out_dtype == OutDtype::kSame) check_same_dtype_out(out, m.dtype);
  if (m.out_dtype == OutDtype::kExact) check_structured_out(out, m.dtype);
}
// The dtype rule, then out resized to the result's shape (with PyTorch's
// warning when a non-empty out changes shape).
inline void check_and_resize_out(at::Tensor& out, const OutMeta& m, const char* name) {
  check_out_dtype(out, m);
  if (m.out_dtype == OutDtype::kOwn)
    at::native::resize_output(out, m.sizes);
  else
    prepare_out(out, m.sizes, m.dtype, name);
}
}  // namespace detail

// `Self` is meta's first parameter: `const at::Tensor&`, or a Python number
// for the overloads that take one first (isin.Scalar_Tensor, pow.Scalar),
// which have no in-place form.
template <class Op, class Self, class... Args>
struct Variants {
  static constexpr bool kHasInplace = std::is_same_v<Self, const at::Tensor&>;
  static at::Tensor functional(Self self, Args... args) {
    auto m = Op::meta(self, args...);
    std::vector<int64_t> strides = m.strides;
    bool decided = !strides.empty();
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
  static at::Tensor& inplace(at::Tensor& self, Args... args)
    requires std::is_same_v<Self, const at::Tensor&>
  {
    auto m = Op::meta(self, args...);
    if constexpr (requires { Op::inplace_rule(self, m, args...); })
      Op::inplace_rule(self, m, args...);
    else
      check_inplace(self, m.sizes, m.dtype);
    Op::impl(self, m, self, args...);
    return self;
  }
  static at::Tensor& out(Self self, Args... args, at::Tensor& out) {
    if constexpr (requires { Op::same_dtype_out(self, args...); }) {
      if (auto dt = Op::same_dtype_out(self, args...)) check_same_dtype_out(out, *dt);
    }
    auto m = Op::meta(self, args...);
    if constexpr (requires { Op::check_out(out, m, self, args...); }) Op::check_out(out, m, self, args...);
    detail::check_and_resize_out(out, m, Op::kName);
    Op::impl(out, m, self, args...);
    return out;
  }
};

// Ops with several results: values and indices (max.dim, sort, topk,
// kthvalue, max_pool2d_with_indices), min and max (aminmax), a factor and
// its info code (linalg_cholesky_ex), or more (linalg_lu: P, L, U). meta
// returns a ResultsMeta<N> (or a struct deriving from it) describing each
// result; impl writes them all. There is no in-place form. out= checks and
// resizes each result's tensor by its OutDtype rule, in order, as CPU's
// structured kernels do. The functional results are contiguous unless meta
// gives their strides. impl is
//   static void impl(const at::Tensor& r0, ..., const at::Tensor& rN_1, const M& m,
//                    const at::Tensor& self, Args... args);
// and an op's own rule for the out tensors goes in
//   static void check_out(const at::Tensor& r0, ..., const M& m, const at::Tensor& self, Args... args);
// which runs in place of the per-result dtype checks.
template <size_t N>
struct ResultsMeta {
  std::array<OutMeta, N> results;
};
using PairMeta = ResultsMeta<2>;

// Values in self's dtype and int64 indices, each out= of exactly that dtype
// (max.dim, sort, topk, kthvalue: CPU's structured kernels).
inline PairMeta values_and_indices(const at::Tensor& self, const std::vector<int64_t>& sizes) {
  PairMeta m;
  m.results[0] = OutMeta{sizes, self.scalar_type(), self.device(), OutDtype::kExact, false};
  m.results[1] = OutMeta{sizes, c10::kLong, self.device(), OutDtype::kExact, false};
  return m;
}

// A result shaped, typed and laid out as ATen's meta kernel gives it
// (`meta`, a meta tensor; `dtype` overrides its dtype), out= of exactly its
// dtype: CPU's structured kernels keep channels-last inputs' layouts
// (pooling) and give linear algebra results column-major strides.
inline OutMeta like_meta(const at::Tensor& meta, c10::Device device,
                         std::optional<c10::ScalarType> dtype = std::nullopt) {
  OutMeta o{meta.sizes().vec(), dtype.value_or(meta.scalar_type()), device, OutDtype::kExact, false};
  o.strides = meta.strides().vec();
  return o;
}
// The results of an op whose meta kernel returned `metas` (a tuple of meta
// tensors), each as like_meta gives it.
template <class... T>
ResultsMeta<sizeof...(T)> results_like(const std::tuple<T...>& metas, c10::Device device) {
  ResultsMeta<sizeof...(T)> m;
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((m.results[I] = like_meta(std::get<I>(metas), device)), ...);
  }(std::index_sequence_for<T...>{});
  return m;
}

namespace detail {
template <size_t I>
using TensorRef = at::Tensor&;
template <size_t I>
using TensorValue = at::Tensor;
// N of the ResultsMeta<N> that M derives from.
template <size_t N>
constexpr size_t result_count(const ResultsMeta<N>*) {
  return N;
}
}  // namespace detail

template <class Op, class Seq, class... Args>
struct MultiVariants;
template <class Op, size_t... I, class... Args>
struct MultiVariants<Op, std::index_sequence<I...>, Args...> {
  static constexpr bool kHasInplace = false;
  static std::tuple<detail::TensorValue<I>...> functional(const at::Tensor& self, Args... args) {
    auto m = Op::meta(self, args...);
    std::array<at::Tensor, sizeof...(I)> r{detail::empty_result(m.results[I])...};
    Op::impl(r[I]..., m, self, args...);
    return {r[I]...};
  }
  static std::tuple<detail::TensorRef<I>...> out(const at::Tensor& self, Args... args, detail::TensorRef<I>... outs) {
    auto m = Op::meta(self, args...);
    if constexpr (requires { Op::check_out(outs..., m, self, args...); }) {
      Op::check_out(outs..., m, self, args...);
      (at::native::resize_output(outs, m.results[I].sizes), ...);
    } else {
      (detail::check_and_resize_out(outs, m.results[I], Op::kName), ...);
    }
    Op::impl(outs..., m, self, args...);
    return {outs...};
  }
};

namespace detail {
template <class Op, class M, class Self, class... Args>
  requires std::is_base_of_v<OutMeta, M>
Variants<Op, Self, Args...> variants_of(M (*)(Self, Args...));
template <class Op, class M, class... Args>
  requires requires(const M* m) { result_count(m); }
MultiVariants<Op, std::make_index_sequence<result_count(static_cast<const M*>(nullptr))>, Args...> variants_of(
    M (*)(const at::Tensor&, Args...));
}  // namespace detail
// The Variants (or MultiVariants) of `Op`, with the argument types of
// Op::meta after self.
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

// Registers the forms whose names are non-empty. A several-result op has no
// in-place form: its names are {functional, "", out}; nor has an op whose
// first argument is a number.
template <class Op>
void register_variants(torch::Library& m, const VariantNames& names) {
  using V = VariantsOf<Op>;
  if (!names.functional.empty()) m.impl(names.functional.c_str(), TORCH_FN(V::functional));
  if constexpr (V::kHasInplace) {
    if (!names.inplace.empty()) m.impl(names.inplace.c_str(), TORCH_FN(V::inplace));
  } else {
    TORCH_INTERNAL_ASSERT(names.inplace.empty(), names.functional, " has no in-place form");
  }
  if (!names.out.empty()) m.impl(names.out.c_str(), TORCH_FN(V::out));
}

}  // namespace torch_tpu::ops
