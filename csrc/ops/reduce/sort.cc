// sort (stable, descending) and topk: one XLA stable sort carrying an iota
// for the int64 indices. NaN orders as the largest value, like torch.
#include <torch/library.h>

#include "ops/common.h"
#include "ops/variants.h"

namespace torch_tpu::ops {
using ir::Dims;

namespace {

// One stable sort of `self` along `d`, carrying an iota for the int64
// indices; the first `k` of each row (all of them for sort).
void sort_into(const char* name, const at::Tensor& self, int64_t d, bool descending, int64_t k,
               const at::Tensor& values, const at::Tensor& indices) {
  Dims shape(self.sizes().begin(), self.sizes().end());
  record::OpCall call(name);
  call.attr(d).attr(descending).attr(k);
  call.input(self);
  call.output(values);
  call.output(indices);
  call.run([&](Builder& b, const Values& in) {
    if (shape.empty()) return Values{in[0], zero(b, ElemType::kS64)};
    Value iota = b.iota(shape, d, ElemType::kS64);
    Values s = b.sort({in[0], iota}, d, descending);
    if (k == shape[d]) return s;
    Dims start(shape.size(), 0), lim = shape, st(shape.size(), 1);
    lim[d] = k;
    return Values{b.slice(s[0], start, lim, st), b.slice(s[1], start, lim, st)};
  });
}

struct SortMeta : PairMeta {
  int64_t dim = 0;
};

struct Sort {
  static constexpr const char* kName = "sort";
  static SortMeta meta(const at::Tensor& self, std::optional<bool>, int64_t dim, bool) {
    SortMeta m;
    m.dim = wrap_dim(dim, self.dim());
    static_cast<PairMeta&>(m) = values_and_indices(self, self.sizes().vec());
    return m;
  }
  static void impl(const at::Tensor& values, const at::Tensor& indices, const SortMeta& m, const at::Tensor& self,
                   std::optional<bool>, int64_t, bool descending) {
    sort_into("sort", self, m.dim, descending, self.dim() == 0 ? 1 : self.size(m.dim), values, indices);
  }
};

struct TopkMeta : PairMeta {
  int64_t dim = 0, k = 0;
};

struct Topk {
  static constexpr const char* kName = "topk";
  static TopkMeta meta(const at::Tensor& self, c10::SymInt k_s, int64_t dim, bool, bool) {
    TopkMeta m;
    m.k = k_s.expect_int();
    // As CPU, whose topk kernel has no bool instantiation (sort does).
    TORCH_CHECK(self.scalar_type() != c10::kBool, "topk does not support bool dtypes on tpu");
    m.dim = wrap_dim(dim, self.dim());
    int64_t n = self.dim() == 0 ? 1 : self.size(m.dim);
    TORCH_CHECK(m.k >= 0 && m.k <= n, "selected index k out of range");
    std::vector<int64_t> oshape(self.sizes().begin(), self.sizes().end());
    if (!oshape.empty()) oshape[m.dim] = m.k;
    static_cast<PairMeta&>(m) = values_and_indices(self, std::move(oshape));
    return m;
  }
  static void impl(const at::Tensor& values, const at::Tensor& indices, const TopkMeta& m, const at::Tensor& self,
                   c10::SymInt, int64_t, bool largest, bool) {
    sort_into("topk", self, m.dim, largest, m.k, values, indices);
  }
};

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Sort>(m, {"sort.stable", "", "sort.values_stable"});
  register_variants<Topk>(m, {"topk", "", "topk.values"});
}

}  // namespace
}  // namespace torch_tpu::ops
