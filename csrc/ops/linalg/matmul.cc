// Matrix products: mm, bmm, addmm, baddbmm, addbmm, addmv, dot/vdot, with
// functional, in-place and out= forms. matmul/linear/mv are composite in
// ATen and reach these. All lower to one stablehlo.dot_general; bf16/f16
// accumulate in f32 (preferred_element_type) and round once at the end, and
// f32 products honour torch.set_float32_matmul_precision.
#include <ATen/Context.h>
#include <ATen/ExpandUtils.h>
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
namespace {

enum class Kind : int64_t { kMM, kBMM, kMV, kDot, kAddBMM };

void check_dtype_supported(c10::ScalarType t, const char* what) {
  TORCH_CHECK_NOT_IMPLEMENTED(t != c10::kBool && !c10::isComplexType(t), "\"", what, "\" not implemented for '",
                              c10::toString(t), "'");
}

std::vector<int64_t> product_shape(Kind k, const at::Tensor& a, const at::Tensor& b) {
  switch (k) {
    case Kind::kMM:
      return {a.size(0), b.size(1)};
    case Kind::kBMM:
      return {a.size(0), a.size(1), b.size(2)};
    case Kind::kMV:
      return {a.size(0)};
    case Kind::kDot:
      return {};
    case Kind::kAddBMM:
      return {a.size(1), b.size(2)};
  }
  return {};
}

// out = beta * self + alpha * (a @ b). `self` undefined means a plain
// product. beta == 0 drops `self` entirely (NaN/inf in it must not leak,
// as in PyTorch), which changes the program, so it is part of the key.
void gemm(Kind k, const at::Tensor& a, const at::Tensor& b, const at::Tensor& self, const c10::Scalar& beta,
          const c10::Scalar& alpha, const at::Tensor& out) {
  auto dtype = a.scalar_type();
  std::vector<int64_t> shape = product_shape(k, a, b);
  bool use_self = self.defined() && !(beta.isIntegral(true) ? beta.toLong() == 0 : beta.toDouble() == 0.0);
  bool scaled = self.defined();  // addmm-family: alpha applies
  const char* prec = precision_for(dtype);
  ElemType acc = opmath_elem(dtype);
  // XLA:CPU runs some bf16 x bf16 -> f32 dots (e.g. with a broadcast
  // operand) in a thunk that rejects mixed types at run time. Widening the
  // operands first gives the same result (bf16/f16 products are exact in
  // f32) and leaves TPUs/GPUs their native mixed-precision dot.
  bool widen = acc != to_elem(dtype) && client().platform_name() == "cpu";
  record::OpCall call("gemm");
  call.attr(static_cast<int64_t>(k)).attr(use_self).attr(scaled).attr(std::string_view(prec)).attr(widen);
  call.input(a);
  call.input(b);
  // alpha/beta in the accumulation type: a bf16 alpha would be rounded.
  auto sdt = (dtype == c10::kHalf || dtype == c10::kBFloat16) ? c10::kFloat : dtype;
  if (scaled) call.scalar(alpha, sdt);
  if (use_self) {
    call.input(self);
    call.scalar(beta, sdt);
  }
  call.output(out);
  call.run([&](Builder& bd, const Values& in) {
    Value x = in[0], y = in[1];
    if (widen) {
      x = bd.convert(x, acc);
      y = bd.convert(y, acc);
    }
    Value p;
    switch (k) {
      case Kind::kMM:
        p = bd.dot_general(x, y, {}, {}, {1}, {0}, acc, prec);
        break;
      case Kind::kBMM:
        p = bd.dot_general(x, y, {0}, {0}, {2}, {1}, acc, prec);
        break;
      case Kind::kMV:
        p = bd.dot_general(x, y, {}, {}, {1}, {0}, acc, prec);
        break;
      case Kind::kDot:
        p = bd.dot_general(x, y, {}, {}, {0}, {0}, acc, prec);
        break;
      case Kind::kAddBMM:
        p = bd.dot_general(x, y, {}, {}, {0, 2}, {0, 1}, acc, prec);
        break;
    }
    if (scaled) {
      Value al = bd.broadcast_to(bd.convert(in[2], acc), shape);
      p = bd.mul(p, al);
    }
    if (use_self) {
      Value s = bd.broadcast_to(bd.convert(in[3], acc), shape);
      Value be = bd.broadcast_to(bd.convert(in[4], acc), shape);
      p = bd.add(bd.mul(s, be), p);
    }
    return Values{p};
  });
}

// --- shape checks (PyTorch CPU's messages) -----------------------------------

void check_mm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 2, "self must be a matrix");
  TORCH_CHECK(b.dim() == 2, "mat2 must be a matrix");
  TORCH_CHECK(a.size(1) == b.size(0), "mat1 and mat2 shapes cannot be multiplied (", a.size(0), "x", a.size(1), " and ",
              b.size(0), "x", b.size(1), ")");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(),
              "expected m1 and m2 to have the same dtype, but got: ", a.scalar_type(), " != ", b.scalar_type());
  check_dtype_supported(a.scalar_type(), "addmm_impl_cpu_");
}

void check_bmm(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 3, "batch1 must be a 3D tensor");
  TORCH_CHECK(b.dim() == 3, "batch2 must be a 3D tensor");
  TORCH_CHECK(b.size(0) == a.size(0) && b.size(1) == a.size(2),
              "Expected size for first two dimensions of batch2 tensor to be: [", a.size(0), ", ", a.size(2),
              "] but got: [", b.size(0), ", ", b.size(1), "].");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "expected scalar type ", a.scalar_type(), " but found ",
              b.scalar_type());
  check_dtype_supported(a.scalar_type(), "bmm");
}

void check_mv(const at::Tensor& self, const at::Tensor& mat, const at::Tensor& vec) {
  TORCH_CHECK(mat.dim() == 2 && vec.dim() == 1 && self.dim() <= 1, "vector + matrix @ vector expected, got ",
              self.dim(), ", ", mat.dim(), ", ", vec.dim());
  TORCH_CHECK(mat.size(1) == vec.size(0) && (mat.size(0) == self.numel() || self.numel() == 1),
              "size mismatch, got input (", self.dim() == 0 ? 1 : self.size(0), "), mat (", mat.size(0), "x",
              mat.size(1), "), vec (", vec.size(0), ")");
  TORCH_CHECK(mat.scalar_type() == vec.scalar_type(), "expected scalar type ", mat.scalar_type(), " but found ",
              vec.scalar_type());
  check_dtype_supported(mat.scalar_type(), "addmv_impl_cpu");
}

void check_dot(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() == 1 && b.dim() == 1, "1D tensors expected, but got ", a.dim(), "D and ", b.dim(), "D tensors");
  TORCH_CHECK(a.scalar_type() == b.scalar_type(), "dot : expected both vectors to have same dtype, but found ",
              a.scalar_type(), " and ", b.scalar_type());
  TORCH_CHECK(a.numel() == b.numel(), "inconsistent tensor size, expected tensor [", a.numel(), "] and src [",
              b.numel(), "] to have the same number of elements, but got ", a.numel(), " and ", b.numel(),
              " elements respectively");
  check_dtype_supported(a.scalar_type(), "dot");
}

// `self` of the add* ops must broadcast to the product's shape and share
// its dtype.
void check_self(const at::Tensor& self, const at::Tensor& mat2, c10::IntArrayRef shape) {
  at::expand_size(self, shape);  // throws PyTorch's expand error
  TORCH_CHECK(self.scalar_type() == mat2.scalar_type(), "self and mat2 must have the same dtype, but got ",
              self.scalar_type(), " and ", mat2.scalar_type());
}

void check_kind(Kind k, const at::Tensor& a, const at::Tensor& b) {
  switch (k) {
    case Kind::kMM:
      check_mm(a, b);
      break;
    case Kind::kBMM:
      check_bmm(a, b);
      break;
    case Kind::kDot:
      check_dot(a, b);
      break;
    case Kind::kAddBMM:
      check_bmm(a, b);
      break;
    case Kind::kMV:
      break;  // checked by callers (needs self)
  }
}

// --- plain products: mm, bmm, dot --------------------------------------------

// A product's result: a's dtype, exactly, and contiguous.
OutMeta product_meta(Kind k, const at::Tensor& a, const at::Tensor& b) {
  OutMeta m{product_shape(k, a, b), a.scalar_type(), a.device(), OutDtype::kExact};
  m.operand_layout = false;
  return m;
}

template <Kind K>
struct Product {
  static constexpr const char* kName = "mm";
  static OutMeta meta(const at::Tensor& a, const at::Tensor& b) {
    check_kind(K, a, b);
    return product_meta(K, a, b);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& a, const at::Tensor& b) {
    gemm(K, a, b, at::Tensor(), 0, 1, out);
  }
};

// --- add* forms: addmm, baddbmm, addbmm, addmv -------------------------------

template <Kind K>
void check_add(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b) {
  if (K == Kind::kMV) {
    check_mv(self, a, b);
    TORCH_CHECK(self.scalar_type() == a.scalar_type(), "expected scalar type ", a.scalar_type(), " but found ",
                self.scalar_type());
    return;
  }
  check_kind(K, a, b);
  check_self(self, b, product_shape(K, a, b));
}

// self * beta + alpha * (a @ b), in its three forms.
template <Kind K>
struct AddOp {
  static constexpr const char* kName = "addmm";
  static OutMeta meta(const at::Tensor& self, const at::Tensor& a, const at::Tensor& b, const c10::Scalar&,
                      const c10::Scalar&) {
    check_add<K>(self, a, b);
    return product_meta(K, a, b);
  }
  static void inplace_rule(const at::Tensor& self, const OutMeta& m, const at::Tensor&, const at::Tensor&,
                           const c10::Scalar&, const c10::Scalar&) {
    TORCH_CHECK(self.sizes().equals(m.sizes), "The input tensor must be a matrix with size ", m.sizes, ", but got a ",
                self.dim(), "-D tensor with size ", self.sizes());
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const at::Tensor& a,
                   const at::Tensor& b, const c10::Scalar& beta, const c10::Scalar& alpha) {
    gemm(K, a, b, self, beta, alpha, out);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Product<Kind::kMM>>(m, {"mm", "", "mm.out"});
  register_variants<Product<Kind::kBMM>>(m, {"bmm", "", "bmm.out"});
  register_variants<Product<Kind::kDot>>(m, {"dot", "", "dot.out"});
  // vdot conjugates its first argument; on real dtypes (all this supports) it is dot.
  register_variants<Product<Kind::kDot>>(m, {"vdot", "", "vdot.out"});
  register_variants<AddOp<Kind::kMM>>(m, {"addmm", "addmm_", "addmm.out"});
  register_variants<AddOp<Kind::kBMM>>(m, {"baddbmm", "baddbmm_", "baddbmm.out"});
  register_variants<AddOp<Kind::kAddBMM>>(m, {"addbmm", "addbmm_", "addbmm.out"});
  register_variants<AddOp<Kind::kMV>>(m, {"addmv", "addmv_", "addmv.out"});
}

}  // namespace
}  // namespace torch_tpu::ops
