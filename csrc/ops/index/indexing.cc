// Indexing: index_select, gather/scatter (+reduce variants), index_add /
// index_copy / index_fill, masked_fill / masked_select / masked_scatter,
// nonzero and nonzero_static, advanced indexing (index.Tensor,
// _index_put_impl_) and embedding_dense_backward. All lower to
// stablehlo.gather / scatter; XLA clamps out-of-range gather indices and
// drops out-of-range scatter updates (see index/checks.h for the optional
// host-side check). Ops whose result size depends on data (nonzero,
// masked_select) sync with the host to count the selected elements first;
// nonzero_static has a fixed size and needs no sync.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/empty_strided.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_add.h>
#include <ATen/ops/index_copy.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/scatter_add.h>
#include <ATen/ops/scatter_reduce.h>
#include <torch/library.h>

#include <algorithm>
#include <optional>
#include <sstream>
#include <utility>

#include "ops/common.h"
#include "ops/variants.h"
#include "ops/shape/append.h"
#include "ops/index/checks.h"
#include "ops/index/reduce_into.h"
#include "record/driver.h"

namespace torch_tpu::ops {

// Output sizes that depend on the data: the element count is read on the host.
const record::SyncSite kNonzeroSync{"nonzero", record::SyncReason::kDataDependentShape};
const record::SyncSite kMaskedSelectSync{"masked_select", record::SyncReason::kDataDependentShape};
using ir::Dims;

namespace {

Dims to_dims(c10::IntArrayRef a) { return Dims(a.begin(), a.end()); }
Dims range(int64_t lo, int64_t hi) {
  Dims d;
  for (int64_t i = lo; i < hi; ++i) d.push_back(i);
  return d;
}

// Combiner for a scatter reduction; bool add/multiply are or/and.
BinaryOp combiner(std::string_view reduce, ElemType e) {
  bool pred = e == ElemType::kPred;
  if (reduce == "add" || reduce == "sum") return pred ? BinaryOp::kOr : BinaryOp::kAdd;
  if (reduce == "multiply" || reduce == "prod") return pred ? BinaryOp::kAnd : BinaryOp::kMul;
  if (reduce == "amax") return pred ? BinaryOp::kOr : BinaryOp::kMax;
  if (reduce == "amin") return pred ? BinaryOp::kAnd : BinaryOp::kMin;
  TORCH_CHECK(false, "unknown reduction ", reduce);
}

// Wraps negative indices like Python (x[-1]); s64 result.
Value wrap_index(Builder& b, Value idx, int64_t size) {
  Value v = b.convert(idx, kS64);
  Value neg = b.compare(v, zero(b, kS64, b.dims(v)), Direction::kLt);
  return b.select(neg, b.add(v, b.constant(size, kS64, b.dims(v))), v);
}

// --- gather / scatter along a dim (torch.gather semantics) ---------------------

// Full coordinates for every element of `index`: [..., rank], with `index`
// on `dim` and the element's own position elsewhere.
Value dim_coords(Builder& b, Value index, int64_t dim) {
  Dims shp = b.dims(index);
  int64_t r = shp.size();
  Dims cs = shp;
  cs.push_back(1);
  Values parts;
  for (int64_t d = 0; d < r; ++d) {
    Value p = d == dim ? b.convert(index, kS64) : b.iota(shp, d, kS64);
    parts.push_back(b.reshape(p, cs));
  }
  return b.concatenate(parts, r);
}

Value gather_dim(Builder& b, Value self, Value index, int64_t dim) {
  if (b.type(self).rank() == 0) self = b.reshape(self, {1});
  if (b.type(index).rank() == 0) index = b.reshape(index, {1});
  int64_t r = b.type(self).rank();
  Dims out = b.dims(index);
  return b.gather(self, dim_coords(b, index, dim), {}, range(0, r), range(0, r), r, Dims(r, 1), out);
}

Value scatter_dim(Builder& b, Value self, Value index, Value updates, int64_t dim, std::optional<BinaryOp> comb) {
  Dims shape = b.dims(self);
  if (shape.empty()) {
    self = b.reshape(self, {1});
    if (b.type(index).rank() == 0) index = b.reshape(index, {1});
  }
  if (b.type(index).rank() == 0) index = b.reshape(index, {1});
  int64_t r = b.type(self).rank();
  Dims ishape = b.dims(index);
  if (b.type(updates).rank() == 0) {
    updates = b.broadcast_to(updates, ishape);
  } else {
    if (b.type(updates).rank() != r) updates = b.reshape(updates, Dims(r, 1));
    updates = b.slice(updates, Dims(r, 0), ishape, Dims(r, 1));
  }
  updates = b.convert(updates, b.elem(self));
  Value res = b.scatter(self, dim_coords(b, index, dim), updates, {}, range(0, r), range(0, r), r, comb);
  return b.reshape(res, shape);
}

struct DimMeta : OutMeta {
  int64_t dim = 0;
};

// gather: out= must have self's dtype, as CPU's structured kernel.
struct Gather {
  static constexpr const char* kName = "gather";
  static DimMeta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index, bool sparse_grad) {
    at::Tensor mg = at::gather(meta_of(self), dim, meta_of(index), sparse_grad);  // ATen's checks and shape
    DimMeta m;
    static_cast<OutMeta&>(m) = OutMeta{mg.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kExact, false};
    m.dim = wrap_dim(dim, self.dim());
    return m;
  }
  static void impl(const at::Tensor& out, const DimMeta& m, const at::Tensor& self, int64_t, const at::Tensor& index,
                   bool) {
    const int64_t d = m.dim;
    check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kGather);
    record::OpCall call("gather");
    call.attr(d);
    call.input(self);
    call.input(index);
    call.output(out);
    call.run([d](Builder& b, const Values& in) { return Values{gather_dim(b, in[0], in[1], d)}; });
  }
};

// Shared by the scatter family: `src` is a tensor or a scalar value.
void scatter_impl(const char* name, const at::Tensor& self, int64_t dim, const at::Tensor& index, const Operand& src,
                  std::optional<BinaryOp> comb, const at::Tensor& out) {
  int64_t d = wrap_dim(dim, self.dim());
  check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kGather);
  record::OpCall call(name);
  call.attr(d).attr(comb ? static_cast<int64_t>(*comb) + 1 : int64_t{0}).attr(src.t.defined());
  call.input(self);
  call.input(index);
  if (src.t.defined())
    call.input(src.t);
  else
    call.scalar(*src.s, self.scalar_type());
  call.output(out);
  call.run([&](Builder& b, const Values& in) { return Values{scatter_dim(b, in[0], in[1], in[2], d, comb)}; });
}

// The scatter family writes self's shape and dtype, and out= must have
// exactly that dtype (CPU's structured kernels); ATen's meta kernel checks
// the arguments. In place, self is the out.
OutMeta like_self(const at::Tensor& self) {
  return OutMeta{self.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kExact, false};
}

// scatter.src / .value (Src a tensor or a number), without a reduction.
template <class Src>
struct Scatter {
  static constexpr const char* kName = "scatter";
  static OutMeta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index, Src src) {
    if constexpr (std::is_same_v<Src, const at::Tensor&>)
      at::scatter(meta_of(self), dim, meta_of(index), meta_of(src));
    else
      at::scatter(meta_of(self), dim, meta_of(index), src);
    return like_self(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   Src src) {
    scatter_impl("scatter", self, dim, index, src, std::nullopt, out);
  }
};

// scatter.reduce / .value_reduce ("add" or "multiply").
template <class Src>
struct ScatterReduce {
  static constexpr const char* kName = "scatter";
  static OutMeta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index, Src src, c10::string_view reduce) {
    if constexpr (std::is_same_v<Src, const at::Tensor&>)
      at::scatter(meta_of(self), dim, meta_of(index), meta_of(src), reduce);
    else
      at::scatter(meta_of(self), dim, meta_of(index), src, reduce);
    return like_self(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   Src src, c10::string_view reduce) {
    scatter_impl("scatter", self, dim, index, src, combiner(reduce, to_elem(self.scalar_type())), out);
  }
};

struct ScatterAdd {
  static constexpr const char* kName = "scatter_add";
  static OutMeta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src) {
    at::scatter_add(meta_of(self), dim, meta_of(index), meta_of(src));
    return like_self(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   const at::Tensor& src) {
    scatter_impl("scatter_add", self, dim, index, src, combiner("add", to_elem(self.scalar_type())), out);
  }
};

// scatter_reduce.two: sum, prod, mean, amax and amin, with or without self.
struct ScatterReduceTwo {
  static constexpr const char* kName = "scatter_reduce";
  static OutMeta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& src,
                      c10::string_view reduce, bool include_self) {
    at::scatter_reduce(meta_of(self), dim, meta_of(index), meta_of(src), reduce, include_self);
    return like_self(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   const at::Tensor& src, c10::string_view reduce, bool include_self) {
    int64_t d = wrap_dim(dim, self.dim());
    check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kGather);
    ElemType e = to_elem(self.scalar_type());
    record_reduce_into("scatter_reduce", self, d, index, src, reduce, include_self,
                       combiner(reduce == "mean" ? "sum" : reduce, e), combiner("sum", e), scatter_dim, out);
  }
};

// --- index_select / index_add / index_copy / index_fill --------------------------

void check_index_vector(const at::Tensor& index, const char* op) {
  TORCH_CHECK_INDEX(index.dim() <= 1, op, "(): Index is supposed to be a vector");
  TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt, op,
              "(): Expected dtype int32 or int64 for index");  // RuntimeError, as CPU
}

// Gather of whole slices along `dim` at positions `index` (1-d).
Value select_slices(Builder& b, Value self, Value index, int64_t dim) {
  if (b.type(self).rank() == 0) self = b.reshape(self, {1});
  Dims shape = b.dims(self);
  int64_t r = shape.size();
  int64_t n = b.type(index).numel();
  Value idx = b.reshape(wrap_index(b, index, shape[dim]), {n, 1});
  Dims sizes = shape, out = shape;
  sizes[dim] = 1;
  out[dim] = n;
  Dims offs;
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) offs.push_back(i);
  return b.gather(self, idx, offs, {dim}, {dim}, 1, sizes, out);
}

// Scatter of whole slices `updates` (self's shape with dim -> n) along dim.
Value scatter_slices(Builder& b, Value self, Value index, Value updates, int64_t dim, std::optional<BinaryOp> comb) {
  Dims shape = b.dims(self);
  if (shape.empty()) self = b.reshape(self, {1});
  Dims s1 = b.dims(self);
  int64_t r = s1.size();
  int64_t n = b.type(index).numel();
  Dims ushape = s1;
  ushape[dim] = n;
  updates = b.convert(updates, b.elem(self));
  updates = b.type(updates).numel() == 1 && b.type(updates).rank() == 0 ? b.broadcast_to(updates, ushape)
                                                                        : b.reshape(updates, ushape);
  Value idx = b.reshape(wrap_index(b, index, s1[dim]), {n, 1});
  Dims win;
  for (int64_t i = 0; i < r; ++i)
    if (i != dim) win.push_back(i);
  return b.reshape(b.scatter(self, idx, updates, win, {dim}, {dim}, 1, comb), shape);
}

std::vector<int64_t> index_select_shape(const at::Tensor& self, int64_t d, const at::Tensor& index) {
  std::vector<int64_t> s(self.sizes().begin(), self.sizes().end());
  if (!s.empty())
    s[d] = index.numel();
  else
    TORCH_CHECK_INDEX(index.numel() == 1, "index_select(): Index to scalar can have only 1 value, got ", index.numel(),
                      " value(s)");
  return s;
}

// The selections whose result has self's dtype (index_select,
// masked_select): out= must have it too, in PyTorch's words.
template <class Op>
struct SameDtypeSelection {
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor& self, const auto&...) {
    TORCH_CHECK(self.scalar_type() == out.scalar_type(), Op::kName,
                "(): self and result must have the same scalar type");
  }
};

struct IndexSelect : SameDtypeSelection<IndexSelect> {
  static constexpr const char* kName = "index_select";
  struct Meta : OutMeta {
    int64_t dim = 0;
  };
  static Meta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index) {
    check_index_vector(index, "index_select");
    Meta m;
    m.dim = wrap_dim(dim, self.dim());
    m.sizes = index_select_shape(self, m.dim, index);
    m.dtype = self.scalar_type();
    m.device = self.device();
    m.operand_layout = false;
    return m;
  }
  static void impl(const at::Tensor& out, const Meta& m, const at::Tensor& self, int64_t, const at::Tensor& index) {
    const int64_t d = m.dim;
    check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kSelect);
    record::OpCall call("index_select");
    call.attr(d);
    call.input(self);
    call.input(index);
    call.output(out);
    call.run([d](Builder& b, const Values& in) { return Values{select_slices(b, in[0], in[1], d)}; });
  }
};

struct IndexAdd {
  static constexpr const char* kName = "index_add";
  static OutMeta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source,
                      const c10::Scalar& alpha) {
    at::index_add(meta_of(self), dim, meta_of(index), meta_of(source), alpha);
    // CPU's check, which the Python meta kernel lacks.
    TORCH_CHECK(index.scalar_type() == c10::kLong || index.scalar_type() == c10::kInt,
                "index_add_(): Expected dtype int32/int64 for index but got: ", index.scalar_type());
    return like_self(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   const at::Tensor& source, const c10::Scalar& alpha) {
    int64_t d = wrap_dim(dim, self.dim());
    check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kSelect);
    record::OpCall call("index_add");
    call.attr(d);
    call.input(self);
    call.input(index);
    call.input(source);
    call.scalar(alpha, self.scalar_type());
    call.output(out);
    call.run([d](Builder& b, const Values& in) {
      ElemType e = b.elem(in[0]);
      Value src = b.convert(in[2], e);
      Value upd = e == ElemType::kPred ? b.and_(src, b.broadcast_to(in[3], b.dims(src)))
                                       : b.mul(src, b.broadcast_to(in[3], b.dims(src)));
      return Values{scatter_slices(b, in[0], in[1], upd, d, combiner("add", e))};
    });
  }
};

struct IndexCopy {
  static constexpr const char* kName = "index_copy";
  static OutMeta meta(const at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& source) {
    at::index_copy(meta_of(self), dim, meta_of(index), meta_of(source));
    // CPU's check, which the Python meta kernel lacks.
    TORCH_CHECK(index.scalar_type() == c10::kLong, "index_copy_(): Expected a long tensor for index, but got ",
                index.scalar_type());
    return like_self(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& self, int64_t dim, const at::Tensor& index,
                   const at::Tensor& source) {
    int64_t d = wrap_dim(dim, self.dim());
    check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kSelect);
    record::OpCall call("index_copy");
    call.attr(d);
    call.input(self);
    call.input(index);
    call.input(source);
    call.output(out);
    call.run(
        [d](Builder& b, const Values& in) { return Values{scatter_slices(b, in[0], in[1], in[2], d, std::nullopt)}; });
  }
};

at::Tensor& index_fill_impl(at::Tensor& self, int64_t dim, const at::Tensor& index, const Operand& value) {
  TORCH_CHECK_INDEX(index.dim() <= 1, "Index has to be a vector/scalar");
  TORCH_CHECK_INDEX(index.scalar_type() == c10::kLong, "index_fill_(): Expected dtype int64 for index.");  // as CPU
  if (value.t.defined())
    TORCH_CHECK(value.t.dim() == 0, "index_fill_ only supports a 0-dimensional value tensor, but got tensor with ",
                value.t.dim(), " dimension(s).");
  int64_t d = wrap_dim(dim, self.dim());
  check_index_range(index, d, self.dim() == 0 ? 1 : self.size(d), IndexErrorStyle::kAdvanced);
  record::OpCall call("index_fill");
  call.attr(d);
  call.input(self);
  call.input(index);
  if (value.t.defined())
    call.input(value.t);
  else
    call.scalar(*value.s, self.scalar_type());
  call.output(self);
  call.run([&](Builder& b, const Values& in) {
    Value v = b.convert(in[2], b.elem(in[0]));
    return Values{scatter_slices(b, in[0], in[1], v, d, std::nullopt)};
  });
  return self;
}
at::Tensor& index_fill_scalar(at::Tensor& self, int64_t dim, const at::Tensor& index, const c10::Scalar& v) {
  return index_fill_impl(self, dim, index, v);
}
at::Tensor& index_fill_tensor(at::Tensor& self, int64_t dim, const at::Tensor& index, const at::Tensor& v) {
  return index_fill_impl(self, dim, index, v);
}

// --- masked ops ----------------------------------------------------------------------

void check_bool_mask(const at::Tensor& mask, const char* op) {
  TORCH_CHECK(mask.scalar_type() == c10::kBool, op, " only supports boolean masks, but got mask with dtype ",
              mask.scalar_type());
}

at::Tensor& masked_fill_impl(at::Tensor& self, const at::Tensor& mask, const Operand& value) {
  check_bool_mask(mask, "masked_fill_");
  check_inplace(self, broadcast_shape({self, mask}), self.scalar_type());
  // Position ids filled where generate()'s attention mask is 0: both with
  // room (shape/append.h), filled whole, one program per storage size.
  const int64_t room = room_of(self);
  const bool whole = room > 0 && room_of(mask) == room && mask.sizes().equals(self.sizes()) &&
                     (!value.t.defined() || value.t.device().is_cpu());
  Dims shape = whole ? Dims{room} : to_dims(self.sizes());
  record::OpCall call("masked_fill");
  call.attr(value.t.defined());
  call.input(whole ? whole_of(self) : self);
  call.input(whole ? whole_of(mask) : mask);
  if (value.t.defined())
    call.input(value.t);
  else
    call.scalar(*value.s, self.scalar_type());
  call.output(whole ? whole_of(self) : self);
  call.run([&](Builder& b, const Values& in) {
    Value m = b.broadcast_to(in[1], shape);
    Value v = b.broadcast_to(b.convert(in[2], b.elem(in[0])), shape);
    return Values{b.select(m, v, in[0])};
  });
  return self;
}
at::Tensor& masked_fill_scalar(at::Tensor& self, const at::Tensor& mask, const c10::Scalar& v) {
  return masked_fill_impl(self, mask, v);
}
// Whether every value of dtype `from` (inf and nan included) converts to `to`
// without overflow in c10's checked_convert sense.
bool always_fits(c10::ScalarType from, c10::ScalarType to) {
  if (from == to || from == c10::kBool) return true;
  auto range = [](c10::ScalarType t) -> std::optional<std::pair<double, double>> {
    switch (t) {
      case c10::kBool:
        return std::pair{0.0, 1.0};
      case c10::kByte:
        return std::pair{0.0, 255.0};
      case c10::kChar:
        return std::pair{-128.0, 127.0};
      case c10::kShort:
        return std::pair{-32768.0, 32767.0};
      case c10::kInt:
        return std::pair{-2147483648.0, 2147483647.0};
      case c10::kLong:
        return std::pair{-9223372036854775808.0, 9223372036854775807.0};
      case c10::kHalf:
        return std::pair{-65504.0, 65504.0};
      case c10::kBFloat16:
        return std::pair{-3.3895313892515355e38, 3.3895313892515355e38};
      case c10::kFloat:
        return std::pair{-3.4028234663852886e38, 3.4028234663852886e38};
      case c10::kDouble:
        return std::pair{-1.7976931348623157e308, 1.7976931348623157e308};
      default:
        return std::nullopt;
    }
  };
  auto f = range(from), t = range(to);
  if (!f || !t) return false;
  if (c10::isFloatingType(from) && !c10::isFloatingType(to)) return false;  // inf, nan
  return t->first <= f->first && f->second <= t->second;
}

at::Tensor& masked_fill_tensor(at::Tensor& self, const at::Tensor& mask, const at::Tensor& v) {
  TORCH_CHECK(v.dim() == 0, "masked_fill_ only supports a 0-dimensional value tensor, but got tensor with ", v.dim(),
              " dimension(s).");
  // CPU fills with value.item() converted to self's dtype, which raises
  // "value cannot be converted to type ... without overflow". Read the value
  // (a host sync) only when its dtype may hold such a value.
  if (!always_fits(v.scalar_type(), self.scalar_type())) {
    check_bool_mask(mask, "masked_fill_");
    return masked_fill_impl(self, mask, v.item());
  }
  return masked_fill_impl(self, mask, v);
}

// Number of true/nonzero elements of `t` broadcast to `shape` (host sync).
int64_t count_true(const at::Tensor& t, c10::IntArrayRef shape) {
  return t.to(c10::kCPU).expand(shape).count_nonzero().item<int64_t>();
}

// Stable-sorts the flattened `xs` so elements where `pred` holds come
// first, keeping their order; returns the first n of each.
Values compact(Builder& b, Value pred, const Values& xs, int64_t n) {
  int64_t total = b.type(pred).numel();
  Value flat = b.reshape(pred, {total});
  Value key = b.select(flat, zero(b, ElemType::kS32, {total}), one(b, ElemType::kS32, {total}));
  Values ops{key};
  for (Value x : xs) ops.push_back(b.reshape(x, {total}));
  Values s = b.sort(ops, 0, false);
  Values r;
  for (size_t i = 1; i < s.size(); ++i) r.push_back(b.slice(s[i], {0}, {n}, {1}));
  return r;
}

at::Tensor& nonzero_out(const at::Tensor& self, at::Tensor& out) {
  TORCH_CHECK(out.scalar_type() == c10::kLong,
              "nonzero: Expected out tensor to have scalar type Long but got scalar type", out.scalar_type());
  kNonzeroSync();
  int64_t n = count_true(self, self.sizes());
  int64_t r = self.dim();
  at::native::resize_output(out, {n, r});
  Dims shape = to_dims(self.sizes());
  record::OpCall call("nonzero");
  call.attr(n);
  call.input(self);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    int64_t total = b.type(in[0]).numel();
    Value pred = b.compare(in[0], zero(b, b.elem(in[0]), shape), Direction::kNe);
    Value flat = compact(b, pred, {b.iota({total}, 0, kS64)}, n)[0];
    Values cols;
    int64_t stride = 1;
    std::vector<int64_t> strides(r);
    for (int64_t d = r - 1; d >= 0; --d) strides[d] = stride, stride *= shape[d];
    for (int64_t d = 0; d < r; ++d) {
      Value c = b.div(flat, b.constant(strides[d], kS64, {n}));
      c = b.rem(c, b.constant(shape[d], kS64, {n}));
      cols.push_back(b.reshape(c, {n, 1}));
    }
    return Values{b.concatenate(cols, 1)};
  });
  return out;
}

at::Tensor nonzero_tpu(const at::Tensor& self) {
  at::Tensor out = empty_tpu({0}, c10::kLong, self.device());
  return nonzero_out(self, out);
}

struct MaskedSelect : SameDtypeSelection<MaskedSelect> {
  static constexpr const char* kName = "masked_select";
  struct Meta : OutMeta {
    Dims shape;  // self and mask broadcast
  };
  // The result's length is the mask's count of true values: a host read.
  static Meta meta(const at::Tensor& self, const at::Tensor& mask) {
    TORCH_CHECK(mask.scalar_type() == c10::kBool, "masked_select: expected BoolTensor for mask");
    Meta m;
    auto shape = broadcast_shape({self, mask});
    m.shape.assign(shape.begin(), shape.end());
    kMaskedSelectSync();
    m.sizes = {count_true(mask, shape)};
    m.dtype = self.scalar_type();
    m.device = self.device();
    m.operand_layout = false;
    return m;
  }
  static void impl(const at::Tensor& out, const Meta& m, const at::Tensor& self, const at::Tensor& mask) {
    const int64_t n = m.sizes[0];
    record::OpCall call("masked_select");
    call.attr(n);
    call.input(self);
    call.input(mask);
    call.output(out);
    call.run([&m, n](Builder& b, const Values& in) {
      return compact(b, b.broadcast_to(in[1], m.shape), {b.broadcast_to(in[0], m.shape)}, n);
    });
  }
};

at::Tensor& masked_scatter_(at::Tensor& self, const at::Tensor& mask, const at::Tensor& source) {
  check_bool_mask(mask, "masked_scatter_");
  TORCH_CHECK(self.scalar_type() == source.scalar_type(),
              "masked_scatter_: expected self and source to have same dtypes but got", self.scalar_type(), " and ",
              source.scalar_type());
  check_inplace(self, broadcast_shape({self, mask}), self.scalar_type());
  Dims shape = to_dims(self.sizes());
  int64_t total = self.numel(), ns = source.numel();
  record::OpCall call("masked_scatter");
  call.input(self);
  call.input(mask);
  call.input(source);
  call.output(self);
  call.run([&](Builder& b, const Values& in) {
    if (ns == 0) return Values{in[0]};
    Value m = b.reshape(b.broadcast_to(in[1], shape), {total});
    // The k-th true position takes source element k: inclusive prefix sum - 1.
    Value cnt = b.convert(m, kS64);
    Value cum = b.reduce_window(cnt, zero(b, kS64), {total}, {1}, {1}, {1}, {{total - 1, 0}}, BinaryOp::kAdd);
    Value pos = b.sub(cum, one(b, kS64, {total}));
    pos = b.clamp(zero(b, kS64), pos, b.constant(ns - 1, kS64));
    Value src = b.reshape(in[2], {ns});
    Value g = b.gather(src, b.reshape(pos, {total, 1}), {}, {0}, {0}, 1, {1}, {total});
    return Values{b.reshape(b.select(m, g, b.reshape(in[0], {total})), shape)};
  });
  return self;
}

// --- advanced indexing ----------------------------------------------------------------

// Plan for self[indices] with bool masks expanded to long indices.
struct Adv {
  Dims dims;                    // indexed dims of self, ascending
  std::vector<at::Tensor> idx;  // one integer tensor per indexed dim
  Dims bshape;                  // broadcast shape of the index tensors
  Dims self_shape;
  bool in_place = false;  // adjacent and not first: result keeps dim order
  int64_t first = 0;
  std::vector<int64_t> result;
};

Adv make_adv(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
  Adv a;
  a.self_shape = to_dims(self.sizes());
  int64_t p = 0;
  for (const std::optional<at::Tensor>& o : indices) {
    if (!o.has_value() || !o->defined()) {
      ++p;
      continue;
    }
    at::Tensor t = *o;
    auto st = t.scalar_type();
    if (st == c10::kBool || st == c10::kByte) {
      TORCH_CHECK_INDEX(p + t.dim() <= self.dim(), "too many indices for tensor of dimension ", self.dim());
      for (int64_t j = 0; j < t.dim(); ++j)
        TORCH_CHECK_INDEX(t.size(j) == self.size(p + j), "The shape of the mask ", t.sizes(), " at index ", j,
                          " does not match the shape of the indexed tensor ", self.sizes(), " at index ", p + j);
      TORCH_CHECK_NOT_IMPLEMENTED(t.dim() > 0, "tpu: indexing with a 0-dim bool mask is not supported");
      at::Tensor nz = nonzero_tpu(t.device() == self.device() ? t : t.to(self.device()));
      for (int64_t j = 0; j < t.dim(); ++j) {
        a.dims.push_back(p + j);
        a.idx.push_back(nz.select(1, j));
      }
      p += t.dim();
    } else {
      TORCH_CHECK_INDEX(st == c10::kLong || st == c10::kInt,
                        "tensors used as indices must be long, int, byte or bool tensors");
      TORCH_CHECK_INDEX(p < self.dim(), "too many indices for tensor of dimension ", self.dim());
      a.dims.push_back(p++);
      a.idx.push_back(t.device() == self.device() ? t : t.to(self.device()));
    }
  }
  TORCH_CHECK_INDEX(p <= self.dim(), "too many indices for tensor of dimension ", self.dim());
  std::vector<int64_t> bs;
  for (size_t i = 0; i < a.idx.size(); ++i) {
    c10::IntArrayRef s = a.idx[i].sizes();
    try {
      bs = at::infer_size(bs, s);
    } catch (const c10::Error&) {
      std::ostringstream os;
      for (size_t j = 0; j < a.idx.size(); ++j) os << (j ? ", " : "") << a.idx[j].sizes();
      TORCH_CHECK_INDEX(false, "shape mismatch: indexing tensors could not be broadcast together with shapes ",
                        os.str());
    }
  }
  a.bshape = Dims(bs.begin(), bs.end());
  for (size_t i = 0; i < a.idx.size(); ++i)
    check_index_range(a.idx[i], a.dims[i], self.size(a.dims[i]), IndexErrorStyle::kAdvanced);
  bool adjacent = true;
  for (size_t i = 1; i < a.dims.size(); ++i) adjacent &= a.dims[i] == a.dims[i - 1] + 1;
  a.first = a.dims.empty() ? 0 : a.dims[0];
  a.in_place = adjacent && a.first > 0;
  if (a.in_place) {
    a.result.assign(a.self_shape.begin(), a.self_shape.begin() + a.first);
    a.result.insert(a.result.end(), bs.begin(), bs.end());
    a.result.insert(a.result.end(), a.self_shape.begin() + a.dims.back() + 1, a.self_shape.end());
  } else {
    a.result = bs;
    for (int64_t d = 0; d < self.dim(); ++d)
      if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) a.result.push_back(a.self_shape[d]);
  }
  return a;
}

// Self's dims reordered so the indexed ones lead (the gather/scatter layout).
Dims adv_perm(const Adv& a) {
  Dims perm = a.dims;
  for (int64_t d = 0; d < (int64_t)a.self_shape.size(); ++d)
    if (std::find(a.dims.begin(), a.dims.end(), d) == a.dims.end()) perm.push_back(d);
  return perm;
}

Value adv_coords(Builder& b, const Adv& a, const Values& idx) {
  Dims cs = a.bshape;
  cs.push_back(1);
  Values parts;
  for (size_t i = 0; i < idx.size(); ++i) {
    Value v = wrap_index(b, idx[i], a.self_shape[a.dims[i]]);
    parts.push_back(b.reshape(b.broadcast_to(v, a.bshape), cs));
  }
  return b.concatenate(parts, a.bshape.size());
}

void add_adv_attrs(record::OpCall& call, const Adv& a) {
  call.attr(c10::IntArrayRef(a.dims)).attr(c10::IntArrayRef(a.bshape));
}

Value adv_gather(Builder& b, const Adv& a, Value self, const Values& idx) {
  int64_t k = a.dims.size(), nb = a.bshape.size();
  Dims perm = adv_perm(a);
  Value x = b.transpose(self, perm);
  Dims sizes(k, 1), out = a.bshape;
  for (size_t i = k; i < perm.size(); ++i) {
    sizes.push_back(a.self_shape[perm[i]]);
    out.push_back(a.self_shape[perm[i]]);
  }
  int64_t nr = perm.size() - k;
  Value g = b.gather(x, adv_coords(b, a, idx), range(nb, nb + nr), range(0, k), range(0, k), nb, sizes, out);
  if (a.in_place) {
    Dims p2 = range(nb, nb + a.first);
    for (int64_t i = 0; i < nb; ++i) p2.push_back(i);
    for (int64_t i = nb + a.first; i < nb + nr; ++i) p2.push_back(i);
    g = b.transpose(g, p2);
  }
  return g;
}

Value adv_scatter(Builder& b, const Adv& a, Value self, const Values& idx, Value values, std::optional<BinaryOp> comb) {
  int64_t k = a.dims.size(), nb = a.bshape.size();
  Dims perm = adv_perm(a);
  int64_t nr = perm.size() - k;
  Value x = b.transpose(self, perm);
  Value v = b.broadcast_to(b.convert(values, b.elem(self)), Dims(a.result.begin(), a.result.end()));
  if (a.in_place) {
    Dims p3 = range(a.first, a.first + nb);
    for (int64_t i = 0; i < a.first; ++i) p3.push_back(i);
    for (int64_t i = a.first + nb; i < nb + nr; ++i) p3.push_back(i);
    v = b.transpose(v, p3);
  }
  Value s = b.scatter(x, adv_coords(b, a, idx), v, range(nb, nb + nr), range(0, k), range(0, k), nb, comb);
  Dims inv(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = i;
  return b.transpose(s, inv);
}

// Advanced indexing (`x[idx]`); index_put_ below writes the same places.
struct Index {
  static constexpr const char* kName = "index";
  struct Meta : OutMeta {
    Adv a;
  };
  static Meta meta(const at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices) {
    Meta m;
    m.a = make_adv(self, indices);
    m.sizes = m.a.result;
    m.dtype = self.scalar_type();
    m.device = self.device();
    m.operand_layout = false;
    return m;
  }
  static void impl(const at::Tensor& out, const Meta& m, const at::Tensor& self,
                   const c10::List<std::optional<at::Tensor>>&) {
    const Adv& a = m.a;
    if (a.idx.empty()) {
      out.copy_(self);
      return;
    }
    record::OpCall call("index");
    add_adv_attrs(call, a);
    call.input(self);
    for (const at::Tensor& t : a.idx) call.input(t);
    call.output(out);
    call.run([&a](Builder& b, const Values& in) {
      return Values{adv_gather(b, a, in[0], Values(in.begin() + 1, in.end()))};
    });
  }
};

at::Tensor& index_put_impl_(at::Tensor& self, const c10::List<std::optional<at::Tensor>>& indices,
                            const at::Tensor& values, bool accumulate, bool unsafe) {
  Adv a = make_adv(self, indices);
  TORCH_CHECK(self.scalar_type() == values.scalar_type(),
              "Index put requires the source and destination dtypes match, got ", self.scalar_type(),
              " for the destination and ", values.scalar_type(), " for the source.");
  TORCH_CHECK(at::is_expandable_to(values.sizes(), a.result), "shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", c10::IntArrayRef(a.result));
  if (a.idx.empty()) {
    if (accumulate)
      self.add_(values);
    else
      self.copy_(values);
    return self;
  }
  ElemType e = to_elem(self.scalar_type());
  std::optional<BinaryOp> comb = accumulate ? std::optional<BinaryOp>(combiner("add", e)) : std::nullopt;
  record::OpCall call("index_put");
  add_adv_attrs(call, a);
  call.attr(accumulate);
  call.input(self);
  call.input(values);
  for (const at::Tensor& t : a.idx) call.input(t);
  call.output(self);
  call.run([&](Builder& b, const Values& in) {
    return Values{adv_scatter(b, a, in[0], Values(in.begin() + 2, in.end()), in[1], comb)};
  });
  return self;
}

// --- embedding backward ---------------------------------------------------------------

at::Tensor embedding_dense_backward(const at::Tensor& grad, const at::Tensor& indices, c10::SymInt num_weights_s,
                                    c10::SymInt padding_idx_s, bool scale_grad_by_freq) {
  int64_t nw = num_weights_s.expect_int(), pad = padding_idx_s.expect_int();
  int64_t n = indices.numel();
  int64_t dsz = grad.dim() == 0 ? 1 : grad.size(-1);
  at::Tensor out = empty_tpu({nw, dsz}, grad.scalar_type(), grad.device());
  record::OpCall call("embedding_dense_backward");
  call.attr(pad).attr(scale_grad_by_freq).attr(nw);
  call.input(grad);
  call.input(indices);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    ElemType e = b.elem(in[0]);
    Value g = b.reshape(in[0], {n, dsz});
    Value idx = b.reshape(b.convert(in[1], kS64), {n});
    if (pad >= 0) {
      Value keep = b.compare(idx, b.constant(pad, kS64, {n}), Direction::kNe);
      g = b.select(b.broadcast_in_dim(keep, {n, dsz}, {0}), g, zero(b, e, {n, dsz}));
    }
    Value idx2 = b.reshape(idx, {n, 1});
    if (scale_grad_by_freq) {
      Value cnt = b.scatter(zero(b, e, {nw}), idx2, one(b, e, {n}), {}, {0}, {0}, 1, BinaryOp::kAdd);
      Value c = b.gather(cnt, idx2, {}, {0}, {0}, 1, {1}, {n});
      g = b.div(g, b.broadcast_in_dim(c, {n, dsz}, {0}));
    }
    return Values{b.scatter(zero(b, e, {nw, dsz}), idx2, g, {1}, {0}, {0}, 1, BinaryOp::kAdd)};
  });
  return out;
}

// --- nonzero_static ---------------------------------------------------------

at::Tensor& nonzero_static_out(const at::Tensor& self, c10::SymInt size_s, int64_t fill_value, at::Tensor& out) {
  int64_t size = size_s.expect_int();
  TORCH_CHECK(size >= 0, "nonzero_static: 'size' must be an non-negative integer, but got size: ", size);
  TORCH_CHECK(out.scalar_type() == c10::kLong, "nonzero_static: Expected out tensor to have scalar type Long but got ",
              out.scalar_type());
  int64_t r = self.dim();
  prepare_out(out, {size, r}, c10::kLong, "nonzero_static");
  if (size == 0 || r == 0) return out;  // nothing to write (a 0-d input has no coordinates)
  Dims shape(self.sizes().begin(), self.sizes().end());
  int64_t total = self.numel();
  record::OpCall call("nonzero_static");
  call.attr(size);
  call.input(self);
  call.scalar(fill_value, c10::kLong);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value fill = b.broadcast_to(in[1], {size});
    if (total == 0) return Values{b.broadcast_to(in[1], {size, r})};
    Value pred = b.reshape(b.compare(in[0], zero(b, b.elem(in[0]), shape), Direction::kNe), {total});
    // Nonzero positions first, in order (stable sort on a 0/1 key).
    Value key = b.select(pred, zero(b, ElemType::kS32, {total}), one(b, ElemType::kS32, {total}));
    Value flat = b.sort({key, b.iota({total}, 0, kS64)}, 0, false)[1];
    int64_t m = std::min(size, total);
    flat = b.slice(flat, {0}, {m}, {1});
    if (size > m) flat = b.pad(flat, zero(b, kS64), {0}, {size - m}, {0});
    Value count = b.reduce(b.convert(pred, kS64), zero(b, kS64), {0}, BinaryOp::kAdd);
    Value valid = b.compare(b.iota({size}, 0, kS64), b.broadcast_to(count, {size}), Direction::kLt);
    Values cols;
    int64_t stride = 1;
    std::vector<int64_t> strides(r);
    for (int64_t d = r - 1; d >= 0; --d) strides[d] = stride, stride *= shape[d];
    for (int64_t d = 0; d < r; ++d) {
      Value c = b.div(flat, b.constant(static_cast<double>(strides[d]), kS64, {size}));
      c = b.rem(c, b.constant(static_cast<double>(shape[d]), kS64, {size}));
      c = b.select(valid, c, fill);
      cols.push_back(b.reshape(c, {size, 1}));
    }
    return Values{b.concatenate(cols, 1)};
  });
  return out;
}

at::Tensor nonzero_static(const at::Tensor& self, c10::SymInt size, int64_t fill_value) {
  at::Tensor out = empty_tpu({0}, c10::kLong, self.device());
  return nonzero_static_out(self, size, fill_value, out);
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<IndexSelect>(m, {"index_select", "", "index_select.out"});
  using T = const at::Tensor&;
  using S = const c10::Scalar&;
  register_variants<Gather>(m, {"gather", "", "gather.out"});
  register_variants<Scatter<T>>(m, {"scatter.src", "scatter_.src", "scatter.src_out"});
  register_variants<Scatter<S>>(m, {"scatter.value", "scatter_.value", "scatter.value_out"});
  register_variants<ScatterReduce<T>>(m, {"scatter.reduce", "scatter_.reduce", "scatter.reduce_out"});
  register_variants<ScatterReduce<S>>(m, {"scatter.value_reduce", "scatter_.value_reduce", "scatter.value_reduce_out"});
  register_variants<ScatterAdd>(m, "scatter_add");
  register_variants<ScatterReduceTwo>(m, {"scatter_reduce.two", "scatter_reduce_.two", "scatter_reduce.two_out"});
  register_variants<IndexAdd>(m, "index_add");
  register_variants<IndexCopy>(m, "index_copy");
  m.impl("index_fill_.int_Scalar", index_fill_scalar);
  m.impl("index_fill_.int_Tensor", index_fill_tensor);
  m.impl("masked_fill_.Scalar", masked_fill_scalar);
  m.impl("masked_fill_.Tensor", masked_fill_tensor);
  register_variants<MaskedSelect>(m, {"masked_select", "", "masked_select.out"});
  m.impl("masked_scatter_", masked_scatter_);
  m.impl("nonzero", nonzero_tpu);
  m.impl("nonzero.out", nonzero_out);
  register_variants<Index>(m, {"index.Tensor", "", "index.Tensor_out"});
  m.impl("_index_put_impl_", index_put_impl_);
  m.impl("embedding_dense_backward", embedding_dense_backward);
  m.impl("nonzero_static", nonzero_static);
  m.impl("nonzero_static.out", nonzero_static_out);
}

}  // namespace
}  // namespace torch_tpu::ops
