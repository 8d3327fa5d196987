#include "ir/builder.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string_view>

namespace torch_tpu::ir {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("torch_tpu IR: " + what); }

std::string dims_str(const Dims& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// A float constant as its exact bit pattern, so inf/nan and every bf16
// value round-trip (MLIR accepts hex bit patterns for float elements).
std::string float_literal(double v, ElemType t) {
  char buf[32];
  if (t == ElemType::kF64) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    std::snprintf(buf, sizeof buf, "0x%016llX", (unsigned long long)bits);
  } else {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    if (t == ElemType::kF32) {
      std::snprintf(buf, sizeof buf, "0x%08X", bits);
    } else if (t == ElemType::kBF16) {
      // Round to nearest even, keeping NaN a NaN.
      uint32_t r = std::isnan(f) ? 0x7FC0u : ((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
      std::snprintf(buf, sizeof buf, "0x%04X", r & 0xFFFFu);
    } else {  // F16
      uint16_t h;
      _Float16 hf = static_cast<_Float16>(f);
      std::memcpy(&h, &hf, 2);
      std::snprintf(buf, sizeof buf, "0x%04X", h);
    }
  }
  return buf;
}

}  // namespace

std::string render_i64_array(const Dims& v) {
  std::string s = "array<i64";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : ": ") + std::to_string(v[i]);
  return s + ">";
}
std::string render_list(const Dims& v) { return dims_str(v); }

namespace {
// An integer literal of type `t`: the value wrapped to the type's width as a
// C++ conversion would (-1 is 255 in ui8), since MLIR rejects out-of-range
// literals such as a negative unsigned one.
std::string int_literal(uint64_t bits, ElemType t) {
  const int width = byte_size(t) * 8;
  if (width < 64) bits &= (uint64_t{1} << width) - 1;
  if (!is_signed_int(t)) return std::to_string(bits);
  if (width < 64 && (bits >> (width - 1)) & 1) bits |= ~uint64_t{0} << width;  // sign-extend
  return std::to_string(static_cast<int64_t>(bits));
}
uint64_t int_bits(double v) {
  if (v >= 9223372036854775808.0) return static_cast<uint64_t>(v);  // beyond int64: u64 only
  return static_cast<uint64_t>(static_cast<int64_t>(v));
}
}  // namespace

Value Builder::constant(double v, ElemType t, const Dims& dims) {
  std::string lit;
  if (t == ElemType::kPred) {
    lit = v != 0 ? "true" : "false";
  } else if (is_float(t)) {
    lit = float_literal(v, t);
  } else if (is_complex(t)) {
    lit = "(" + float_literal(v, component(t)) + ", " + float_literal(0, component(t)) + ")";
  } else {
    lit = int_literal(int_bits(v), t);
  }
  TensorType tt{t, dims};
  return g_.add("stablehlo.constant", {}, tt, {{"value", "dense<" + lit + "> : " + tt.mlir()}});
}

Value Builder::constant_bits(uint64_t bits, ElemType t, const Dims& dims) {
  if (is_complex(t)) fail("constant_bits of a complex type");
  TensorType tt{t, dims};
  std::string lit;
  if (is_float(t)) {
    char buf[32];
    int hex_digits = byte_size(t) * 2;
    std::snprintf(buf, sizeof buf, "0x%0*llX", hex_digits, (unsigned long long)bits);
    lit = buf;
  } else if (t == ElemType::kPred) {
    lit = bits ? "true" : "false";
  } else {
    lit = int_literal(bits, t);
  }
  return g_.add("stablehlo.constant", {}, tt, {{"value", "dense<" + lit + "> : " + tt.mlir()}});
}

Value Builder::iota(const Dims& dims, int64_t dim, ElemType t) {
  if (dim < 0 || dim >= (int64_t)dims.size()) fail("iota dimension out of range");
  return g_.add("stablehlo.iota", {}, TensorType{t, dims}, {{"iota_dimension", std::to_string(dim) + " : i64"}});
}

Value Builder::unary(UnaryOp op, Value x) {
  // real/imag/abs of a complex value are real; real/imag of a real value
  // are the value and zero.
  if (op == UnaryOp::kReal || op == UnaryOp::kImag || op == UnaryOp::kAbs) {
    if (is_complex(elem(x))) return g_.add(mlir_name(op), {x}, TensorType{component(elem(x)), dims(x)});
    if (op == UnaryOp::kReal) return x;
    if (op == UnaryOp::kImag) return constant(0, elem(x), dims(x));
    // stablehlo.abs takes signed types only; an unsigned value is its own abs.
    if (op == UnaryOp::kAbs && elem(x) != ElemType::kPred && !is_float(elem(x)) && !is_signed_int(elem(x))) return x;
  }
  return g_.add(mlir_name(op), {x}, type(x));
}

Value Builder::binary(BinaryOp op, Value a, Value b) {
  if (!(type(a) == type(b)))
    fail(std::string(mlir_name(op)) + ": operand types differ: " + type(a).mlir() + " vs " + type(b).mlir());
  return g_.add(mlir_name(op), {a, b}, type(a));
}

Value Builder::compare(Value a, Value b, Direction direction) {
  if (!(type(a) == type(b))) fail("compare: operand types differ");
  std::vector<Attr> attrs{
      {"comparison_direction", std::string("#stablehlo<comparison_direction ") + mlir_name(direction) + ">"}};
  // Total order is not wanted: torch compares floats with IEEE semantics.
  if (is_complex(elem(a)) && direction != Direction::kEq && direction != Direction::kNe)
    fail("compare: complex values are unordered");
  if (is_float(elem(a)) || is_complex(elem(a)))
    attrs.push_back({"compare_type", "#stablehlo<comparison_type FLOAT>"});
  else if (is_signed_int(elem(a)))
    attrs.push_back({"compare_type", "#stablehlo<comparison_type SIGNED>"});
  else
    attrs.push_back({"compare_type", "#stablehlo<comparison_type UNSIGNED>"});
  return g_.add("stablehlo.compare", {a, b}, TensorType{ElemType::kPred, dims(a)}, std::move(attrs));
}

Value Builder::select(Value p, Value t, Value f) {
  if (!(type(t) == type(f))) fail("select: branch types differ");
  if (elem(p) != ElemType::kPred || (type(p).rank() != 0 && dims(p) != dims(t))) fail("select: bad predicate");
  return g_.add("stablehlo.select", {p, t, f}, type(t));
}

Value Builder::clamp(Value lo, Value x, Value hi) { return g_.add("stablehlo.clamp", {lo, x, hi}, type(x)); }

Value Builder::convert(Value x, ElemType t) {
  if (elem(x) == t) return x;
  // XLA has no complex -> real convert; torch keeps the real part.
  if (is_complex(elem(x)) && !is_complex(t)) return convert(unary(UnaryOp::kReal, x), t);
  // Real -> complex goes through the part type (ints, bool).
  if (is_complex(t) && !is_complex(elem(x)) && elem(x) != component(t)) x = convert(x, component(t));
  if (elem(x) == t) return x;
  return g_.add("stablehlo.convert", {x}, TensorType{t, dims(x)});
}

Value Builder::bitcast_convert(Value x, ElemType t) {
  if (elem(x) == t) return x;
  // StableHLO cannot bitcast complex values: a complex element is its
  // (real, imag) pair of parts, laid out interleaved.
  if (is_complex(elem(x))) {
    if (type(x).rank() != 1) fail("bitcast_convert of complex needs a rank-1 operand");
    int64_t n = dims(x)[0];
    Value re = reshape(unary(UnaryOp::kReal, x), {n, 1});
    Value im = reshape(unary(UnaryOp::kImag, x), {n, 1});
    return bitcast_convert(reshape(concatenate({re, im}, 1), {2 * n}), t);
  }
  if (is_complex(t)) {
    if (type(x).rank() != 1) fail("bitcast_convert to complex needs a rank-1 operand");
    Value parts = bitcast_convert(x, component(t));
    int64_t n = dims(parts)[0];
    if (n % 2 != 0) fail("bitcast_convert to complex: odd number of parts");
    Value p2 = reshape(parts, {n / 2, 2});
    Value re = reshape(slice(p2, {0, 0}, {n / 2, 1}, {1, 1}), {n / 2});
    Value im = reshape(slice(p2, {0, 1}, {n / 2, 2}, {1, 1}), {n / 2});
    return g_.add("stablehlo.complex", {re, im}, TensorType{t, {n / 2}});
  }
  int from = byte_size(elem(x)), to = byte_size(t);
  if (from == to) return g_.add("stablehlo.bitcast_convert", {x}, TensorType{t, dims(x)});
  // Different widths: StableHLO adds (or drops) a trailing dimension of
  // size ratio. Flat arrays of rank 1 are reshaped around it.
  if (type(x).rank() != 1) fail("bitcast_convert between widths needs a rank-1 operand");
  int64_t n = dims(x)[0];
  if (from > to) {
    int64_t r = from / to;
    Value y = g_.add("stablehlo.bitcast_convert", {x}, TensorType{t, {n, r}});
    return reshape(y, {n * r});
  }
  int64_t r = to / from;
  if (n % r != 0) fail("bitcast_convert: size not divisible by the width ratio");
  Value y = reshape(x, {n / r, r});
  return g_.add("stablehlo.bitcast_convert", {y}, TensorType{t, {n / r}});
}

Value Builder::reshape(Value x, const Dims& d) {
  TensorType t{elem(x), d};
  if (t.numel() != type(x).numel()) fail("reshape " + type(x).mlir() + " to " + dims_str(d));
  if (d == dims(x)) return x;
  // A reshape of a reshape is one reshape (row-major order is kept), and
  // none when it restores the original shape. A storage's flat value viewed
  // as a tensor and written back then carries no reshape pair, which XLA's
  // SPMD partitioner would otherwise have to resolve (a dim-1 split cannot
  // pass through the flat shape without a gather).
  const Node& n = g_.nodes()[x.node];
  if (n.op == "stablehlo.reshape") {
    Value src = n.operands[0];
    if (d == dims(src)) return src;
    return g_.add("stablehlo.reshape", {src}, t);
  }
  return g_.add("stablehlo.reshape", {x}, t);
}

Value Builder::broadcast_in_dim(Value x, const Dims& d, const Dims& mapping) {
  if ((int)mapping.size() != type(x).rank()) fail("broadcast_in_dim: mapping rank");
  for (size_t i = 0; i < mapping.size(); ++i) {
    if (mapping[i] < 0 || mapping[i] >= (int64_t)d.size()) fail("broadcast_in_dim: mapping out of range");
    int64_t s = dims(x)[i];
    if (s != 1 && s != d[mapping[i]]) fail("broadcast_in_dim: size mismatch");
  }
  if (d == dims(x)) return x;
  return g_.add("stablehlo.broadcast_in_dim", {x}, TensorType{elem(x), d},
                {{"broadcast_dimensions", render_i64_array(mapping)}});
}

Value Builder::broadcast_to(Value x, const Dims& d) {
  int r = type(x).rank(), R = (int)d.size();
  if (r > R) fail("broadcast_to: rank too large");
  Dims mapping;
  for (int i = 0; i < r; ++i) mapping.push_back(R - r + i);
  return broadcast_in_dim(x, d, mapping);
}

Value Builder::transpose(Value x, const Dims& perm) {
  if ((int)perm.size() != type(x).rank()) fail("transpose: permutation rank");
  Dims out;
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    out.push_back(dims(x).at(perm[i]));
    identity &= perm[i] == (int64_t)i;
  }
  if (identity) return x;
  return g_.add("stablehlo.transpose", {x}, TensorType{elem(x), out}, {{"permutation", render_i64_array(perm)}});
}

Value Builder::slice(Value x, const Dims& start, const Dims& limit, const Dims& strides) {
  int r = type(x).rank();
  if ((int)start.size() != r || (int)limit.size() != r || (int)strides.size() != r) fail("slice: rank");
  Dims out;
  for (int i = 0; i < r; ++i) {
    if (start[i] < 0 || limit[i] < start[i] || limit[i] > dims(x)[i] || strides[i] < 1)
      fail("slice: bounds " + dims_str(start) + ":" + dims_str(limit) + " of " + type(x).mlir());
    out.push_back((limit[i] - start[i] + strides[i] - 1) / strides[i]);
  }
  if (out == dims(x)) return x;
  return g_.add("stablehlo.slice", {x}, TensorType{elem(x), out},
                {{"start_indices", render_i64_array(start)},
                 {"limit_indices", render_i64_array(limit)},
                 {"strides", render_i64_array(strides)}});
}

Value Builder::dynamic_slice(Value x, const std::vector<Value>& starts, const Dims& sizes) {
  if ((int)starts.size() != type(x).rank() || (int)sizes.size() != type(x).rank()) fail("dynamic_slice: rank");
  std::vector<Value> ops{x};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return g_.add("stablehlo.dynamic_slice", ops, TensorType{elem(x), sizes}, {{"slice_sizes", render_i64_array(sizes)}});
}

Value Builder::dynamic_update_slice(Value x, Value update, const std::vector<Value>& starts) {
  if ((int)starts.size() != type(x).rank() || type(update).rank() != type(x).rank()) fail("dynamic_update_slice: rank");
  if (elem(update) != elem(x)) fail("dynamic_update_slice: element types differ");
  std::vector<Value> ops{x, update};
  ops.insert(ops.end(), starts.begin(), starts.end());
  return g_.add("stablehlo.dynamic_update_slice", ops, type(x));
}

Value Builder::concatenate(const std::vector<Value>& xs, int64_t dim) {
  if (xs.empty()) fail("concatenate of nothing");
  if (xs.size() == 1) return xs[0];
  Dims out = dims(xs[0]);
  out[dim] = 0;
  for (Value v : xs) {
    if (elem(v) != elem(xs[0]) || type(v).rank() != (int)out.size()) fail("concatenate: types");
    out[dim] += dims(v)[dim];
  }
  return g_.add("stablehlo.concatenate", xs, TensorType{elem(xs[0]), out},
                {{"dimension", std::to_string(dim) + " : i64"}});
}

Value Builder::pad(Value x, Value pv, const Dims& lo, const Dims& hi, const Dims& interior) {
  Dims out;
  for (int i = 0; i < type(x).rank(); ++i) {
    int64_t d = dims(x)[i];
    out.push_back(lo[i] + hi[i] + d + (d > 0 ? (d - 1) * interior[i] : 0));
    if (out.back() < 0) fail("pad: negative size");
  }
  return g_.add("stablehlo.pad", {x, pv}, TensorType{elem(x), out},
                {{"edge_padding_low", render_i64_array(lo)},
                 {"edge_padding_high", render_i64_array(hi)},
                 {"interior_padding", render_i64_array(interior)}});
}

Value Builder::reverse(Value x, const Dims& d) {
  if (d.empty()) return x;
  return g_.add("stablehlo.reverse", {x}, type(x), {{"dimensions", render_i64_array(d)}});
}

std::shared_ptr<Graph> Builder::scalar_combiner(BinaryOp op, ElemType t) {
  auto r = std::make_shared<Graph>();
  Value a = r->param(TensorType{t, {}});
  Value b = r->param(TensorType{t, {}});
  r->set_outputs({r->add(mlir_name(op), {a, b}, TensorType{t, {}})});
  return r;
}

Value Builder::reduce(Value x, Value init, const Dims& rdims, BinaryOp combiner) {
  return reduce_multi({x}, {init}, rdims, scalar_combiner(combiner, elem(x)))[0];
}

std::vector<Value> Builder::reduce_multi(const std::vector<Value>& xs, const std::vector<Value>& inits,
                                         const Dims& rdims, std::shared_ptr<Graph> region) {
  Dims out;
  const Dims& in = dims(xs[0]);
  for (int64_t i = 0; i < (int64_t)in.size(); ++i) {
    bool reduced = false;
    for (int64_t d : rdims) reduced |= d == i;
    if (!reduced) out.push_back(in[i]);
  }
  for (int64_t d : rdims)
    if (d < 0 || d >= (int64_t)in.size()) fail("reduce: dimension out of range");
  std::vector<Value> ops = xs;
  ops.insert(ops.end(), inits.begin(), inits.end());
  std::vector<TensorType> results;
  for (Value v : xs) results.push_back(TensorType{elem(v), out});
  return g_.add_multi("stablehlo.reduce", ops, results, {{"dimensions", render_i64_array(rdims)}}, {std::move(region)});
}

Value Builder::reduce_window(Value x, Value init, const Dims& window, const Dims& strides, const Dims& base_dil,
                             const Dims& win_dil, const std::vector<std::pair<int64_t, int64_t>>& padding,
                             BinaryOp combiner) {
  int r = type(x).rank();
  Dims out;
  std::string pad_text = "dense<[";
  for (int i = 0; i < r; ++i) {
    int64_t d = (dims(x)[i] - 1) * base_dil[i] + 1 + padding[i].first + padding[i].second;
    int64_t w = (window[i] - 1) * win_dil[i] + 1;
    if (d < w) fail("reduce_window: window larger than input");
    out.push_back((d - w) / strides[i] + 1);
    pad_text += (i ? ", [" : "[") + std::to_string(padding[i].first) + ", " + std::to_string(padding[i].second) + "]";
  }
  pad_text += "]> : tensor<" + std::to_string(r) + "x2xi64>";
  return g_.add("stablehlo.reduce_window", {x, init}, TensorType{elem(x), out},
                {{"window_dimensions", render_i64_array(window)},
                 {"window_strides", render_i64_array(strides)},
                 {"base_dilations", render_i64_array(base_dil)},
                 {"window_dilations", render_i64_array(win_dil)},
                 {"padding", pad_text}},
                {scalar_combiner(combiner, elem(x))});
}

namespace {

// The permutation of a stablehlo.transpose node's attribute text.
Dims permutation_of(const Node& n) {
  Dims perm;
  for (const Attr& a : n.attrs) {
    if (a.name != "permutation") continue;
    const size_t colon = a.text.find(':');
    for (size_t i = colon == std::string::npos ? a.text.size() : colon + 1; i < a.text.size();) {
      size_t used = 0;
      perm.push_back(std::stoll(a.text.substr(i), &used));
      i += used;
      while (i < a.text.size() && (a.text[i] == ',' || a.text[i] == ' ' || a.text[i] == '>')) ++i;
    }
  }
  return perm;
}

// A dot operand made by a transpose reads the transpose's input with its
// dimension numbers mapped through the permutation, when the order of its
// free dimensions (those in the result) is kept. The partitioner then sees
// the same value in the forward and the backward dot of a weight (W in
// one, transpose(W) in the other) and gathers a sharded weight once, not
// once per layout.
void fold_transpose(const Graph& g, Value& v, Dims& batch, Dims& contract) {
  const Node& n = g.nodes()[v.node];
  if (n.op != "stablehlo.transpose" || n.operands.size() != 1) return;
  const Dims perm = permutation_of(n);
  if (perm.size() != g.type(v).dims.size()) return;
  int64_t last = -1;
  for (int64_t i = 0; i < static_cast<int64_t>(perm.size()); ++i) {
    bool used = false;
    for (int64_t d : batch) used |= d == i;
    for (int64_t d : contract) used |= d == i;
    if (used) continue;
    if (perm[i] < last) return;  // the free dimensions would come out in another order
    last = perm[i];
  }
  for (int64_t& d : batch) d = perm.at(d);
  for (int64_t& d : contract) d = perm.at(d);
  v = n.operands[0];
}

// The rows (x's free size) of an "x @ W.T" dot: each operand is [batch...,
// free, contracted], its batch dimensions leading and in order. nullopt for
// any other form.
constexpr int64_t kFewRows = 256;
std::optional<int64_t> rows_dot(const Graph& g, Value a, Value b, const Dims& lb, const Dims& rb, const Dims& lc,
                                const Dims& rc) {
  const Dims& da = g.type(a).dims;
  const Dims& db = g.type(b).dims;
  const auto nb = static_cast<int64_t>(lb.size());
  if (lc.size() != 1 || da.size() != lb.size() + 2 || db.size() != rb.size() + 2) return std::nullopt;
  for (int64_t i = 0; i < nb; ++i)
    if (lb[i] != i || rb[i] != i) return std::nullopt;
  if (lc[0] != nb + 1 || rc[0] != nb + 1) return std::nullopt;
  return da[nb];
}

}  // namespace

Value Builder::dot_general(Value a_in, Value b_in, const Dims& lb_in, const Dims& rb_in, const Dims& lc_in,
                           const Dims& rc_in, ElemType out_t, const std::string& precision) {
  if (lb_in.size() != rb_in.size() || lc_in.size() != rc_in.size()) fail("dot_general: dimension lists");
  Value a = a_in, b = b_in;
  Dims lb = lb_in, rb = rb_in, lc = lc_in, rc = rc_in;
  for (size_t i = 0; i < lb.size(); ++i)
    if (dims(a).at(lb[i]) != dims(b).at(rb[i])) fail("dot_general: batch sizes differ");
  for (size_t i = 0; i < lc.size(); ++i)
    if (dims(a).at(lc[i]) != dims(b).at(rc[i])) fail("dot_general: contracting sizes differ");
  fold_transpose(g_, a, lb, lc);
  fold_transpose(g_, b, rb, rc);
  // x [m, k] @ W.T with W [n, k] stored row-major, as every nn.Linear
  // computes, is much slower in XLA:CPU's dot at few rows (a decode step,
  // a prefill, a small batch) than W @ (x.T) with x.T materialized, then
  // transposed back: at k 512, n 32,000 (an LM head), 15-25 ms against
  // 4.5 ms at m 8, and 140 against 45 ms at m 128; 2-3x at k and n of
  // 256-1,024. From about 512 rows on, the plain form is faster, so it is
  // kept there. XLA's simplifier folds the transposes back into the dot,
  // which is the slow form again, so optimization barriers keep the two
  // transposes where they are written.
  if (const auto rd = rows_dot(g_, a, b, lb, rb, lc, rc);
      rd && lb.empty() && *rd >= 2 && *rd <= kFewRows && is_float(elem(a)) && elem(a) == elem(b)) {
    auto barrier = [&](Value v) { return g_.add("stablehlo.optimization_barrier", {v}, type(v), {}); };
    Value xt = barrier(transpose(a, {1, 0}));
    Value wx = barrier(emit_dot(b, xt, {}, {}, rc, {0}, out_t, precision));
    return transpose(wx, {1, 0});
  }
  return emit_dot(a, b, lb, rb, lc, rc, out_t, precision);
}

Value Builder::emit_dot(Value a, Value b, const Dims& lb, const Dims& rb, const Dims& lc, const Dims& rc,
                        ElemType out_t, const std::string& precision) {
  Dims out;
  for (int64_t d : lb) out.push_back(dims(a)[d]);
  auto free_dims = [&](Value v, const Dims& batch, const Dims& contract) {
    for (int64_t i = 0; i < type(v).rank(); ++i) {
      bool used = false;
      for (int64_t d : batch) used |= d == i;
      for (int64_t d : contract) used |= d == i;
      if (!used) out.push_back(dims(v)[i]);
    }
  };
  free_dims(a, lb, lc);
  free_dims(b, rb, rc);
  std::string dn = "#stablehlo.dot<";
  bool first = true;
  auto field = [&](const char* name, const Dims& v) {
    if (v.empty()) return;
    dn += (first ? "" : ", ") + std::string(name) + " = " + dims_str(v);
    first = false;
  };
  field("lhs_batching_dimensions", lb);
  field("rhs_batching_dimensions", rb);
  field("lhs_contracting_dimensions", lc);
  field("rhs_contracting_dimensions", rc);
  dn += ">";
  std::string prec = "[#stablehlo<precision " + precision + ">, #stablehlo<precision " + precision + ">]";
  return g_.add("stablehlo.dot_general", {a, b}, TensorType{out_t, out},
                {{"dot_dimension_numbers", dn}, {"precision_config", prec}});
}

Value Builder::gather(Value operand, Value indices, const Dims& offset_dims, const Dims& collapsed,
                      const Dims& start_index_map, int64_t index_vector_dim, const Dims& slice_sizes,
                      const Dims& out_dims) {
  std::string dn = "#stablehlo.gather<";
  auto field = [&](const char* name, const Dims& v) {
    if (!v.empty()) dn += std::string(name) + " = " + dims_str(v) + ", ";
  };
  field("offset_dims", offset_dims);
  field("collapsed_slice_dims", collapsed);
  field("start_index_map", start_index_map);
  dn += "index_vector_dim = " + std::to_string(index_vector_dim) + ">";
  return g_.add(
      "stablehlo.gather", {operand, indices}, TensorType{elem(operand), out_dims},
      {{"dimension_numbers", dn}, {"slice_sizes", render_i64_array(slice_sizes)}, {"indices_are_sorted", "false"}});
}

Value Builder::scatter(Value operand, Value indices, Value updates, const Dims& update_window_dims,
                       const Dims& inserted, const Dims& to_operand, int64_t index_vector_dim,
                       std::optional<BinaryOp> combiner) {
  std::string dn = "#stablehlo.scatter<";
  auto field = [&](const char* name, const Dims& v) {
    if (!v.empty()) dn += std::string(name) + " = " + dims_str(v) + ", ";
  };
  field("update_window_dims", update_window_dims);
  field("inserted_window_dims", inserted);
  field("scatter_dims_to_operand_dims", to_operand);
  dn += "index_vector_dim = " + std::to_string(index_vector_dim) + ">";
  auto region = std::make_shared<Graph>();
  {
    ElemType t = elem(operand);
    Value a = region->param(TensorType{t, {}});
    Value b = region->param(TensorType{t, {}});
    if (!combiner) {
      region->set_outputs({b});
    } else {
      region->set_outputs({region->add(mlir_name(*combiner), {a, b}, TensorType{t, {}})});
    }
  }
  return g_.add("stablehlo.scatter", {operand, indices, updates}, type(operand),
                {{"scatter_dimension_numbers", dn}, {"indices_are_sorted", "false"}, {"unique_indices", "false"}},
                {region});
}

std::vector<Value> Builder::sort(const std::vector<Value>& xs, int64_t dim, bool descending) {
  auto region = std::make_shared<Graph>();
  std::vector<Value> ps;
  for (Value v : xs) {
    ps.push_back(region->param(TensorType{elem(v), {}}));
    ps.push_back(region->param(TensorType{elem(v), {}}));
  }
  {
    Builder rb(*region);
    // Order by the first operand; NaNs sort last ascending (like torch).
    Value a = ps[0], b = ps[1];
    ElemType t = elem(xs[0]);
    Value less;
    if (is_float(t)) {
      Value a_nan = rb.compare(a, a, Direction::kNe), b_nan = rb.compare(b, b, Direction::kNe);
      Value lt = rb.compare(a, b, descending ? Direction::kGt : Direction::kLt);
      Value not_a_nan = rb.not_(a_nan);
      // ascending: a<b or (b is nan and a is not); descending: nan first.
      Value nan_rule = descending ? rb.and_(a_nan, rb.not_(b_nan)) : rb.and_(b_nan, not_a_nan);
      less = rb.or_(lt, nan_rule);
    } else {
      less = rb.compare(a, b, descending ? Direction::kGt : Direction::kLt);
    }
    region->set_outputs({less});
  }
  std::vector<TensorType> results;
  for (Value v : xs) results.push_back(type(v));
  return g_.add_multi("stablehlo.sort", xs, results,
                      {{"dimension", std::to_string(dim) + " : i64"}, {"is_stable", "true"}}, {region});
}

std::vector<Value> Builder::rng_bit_generator(Value state, const Dims& d, ElemType bits_type) {
  return g_.add_multi("stablehlo.rng_bit_generator", {state}, {type(state), TensorType{bits_type, d}},
                      {{"rng_algorithm", "#stablehlo<rng_algorithm PHILOX>"}});
}

Value Builder::convolution(Value lhs, Value rhs, const std::string& ll, const std::string& rl, const std::string& ol,
                           const Dims& strides, const std::vector<std::pair<int64_t, int64_t>>& padding,
                           const Dims& lhs_dil, const Dims& rhs_dil, int64_t fgc, int64_t bgc, ElemType out_t,
                           const std::string& precision) {
  int r = type(lhs).rank();
  size_t ns = r - 2;
  if (type(rhs).rank() != r || (int)ll.size() != r || (int)rl.size() != r || (int)ol.size() != r)
    fail("convolution: operand ranks and layouts differ");
  if (strides.size() != ns || padding.size() != ns || lhs_dil.size() != ns || rhs_dil.size() != ns)
    fail("convolution: window attribute sizes");
  if (fgc < 1 || bgc < 1 || (fgc > 1 && bgc > 1)) fail("convolution: group counts");
  // Position of layout char c in layout l.
  auto pos = [&](const std::string& l, char c) -> int64_t {
    auto p = l.find(c);
    if (p == std::string::npos) fail("convolution: layout " + l + " lacks '" + std::string(1, c) + "'");
    return (int64_t)p;
  };
  const Dims& ld = dims(lhs);
  const Dims& rd = dims(rhs);
  int64_t lb = ld[pos(ll, 'b')], lf = ld[pos(ll, 'f')], ro = rd[pos(rl, 'o')], ri = rd[pos(rl, 'i')];
  if (lf != ri * fgc) fail("convolution: lhs features " + std::to_string(lf) + " != rhs input features x groups");
  if (ro % fgc != 0 || ro % bgc != 0 || lb % bgc != 0) fail("convolution: group divisibility");
  Dims out(r, 0);
  out[pos(ol, 'b')] = lb / bgc;
  out[pos(ol, 'f')] = ro;
  std::string pad_text = "dense<[";
  for (size_t i = 0; i < ns; ++i) {
    char c = static_cast<char>('0' + i);
    int64_t in = ld[pos(ll, c)], k = rd[pos(rl, c)];
    if (strides[i] < 1 || lhs_dil[i] < 1 || rhs_dil[i] < 1) fail("convolution: non-positive window attribute");
    int64_t d = (in > 0 ? (in - 1) * lhs_dil[i] + 1 : 0) + padding[i].first + padding[i].second;
    int64_t w = k > 0 ? (k - 1) * rhs_dil[i] + 1 : 0;
    out[pos(ol, c)] = d < w ? 0 : (d - w) / strides[i] + 1;
    pad_text += (i ? ", [" : "[") + std::to_string(padding[i].first) + ", " + std::to_string(padding[i].second) + "]";
  }
  pad_text += "]> : tensor<" + std::to_string(ns) + "x2xi64>";
  auto layout = [](const std::string& l) {
    std::string s = "[";
    for (size_t i = 0; i < l.size(); ++i) s += (i ? ", " : "") + std::string(1, l[i]);
    return s + "]";
  };
  std::string dn = "#stablehlo.conv<" + layout(ll) + "x" + layout(rl) + "->" + layout(ol) + ">";
  std::string prec = "[#stablehlo<precision " + precision + ">, #stablehlo<precision " + precision + ">]";
  return g_.add("stablehlo.convolution", {lhs, rhs}, TensorType{out_t, out},
                {{"window_strides", render_i64_array(strides)},
                 {"padding", pad_text},
                 {"lhs_dilation", render_i64_array(lhs_dil)},
                 {"rhs_dilation", render_i64_array(rhs_dil)},
                 {"dimension_numbers", dn},
                 {"feature_group_count", std::to_string(fgc) + " : i64"},
                 {"batch_group_count", std::to_string(bgc) + " : i64"},
                 {"precision_config", prec}});
}

std::shared_ptr<Graph> Builder::loop_region(const std::vector<Value>& carried) const {
  auto r = std::make_shared<Graph>();
  for (Value v : carried) r->param(type(v));
  return r;
}

std::vector<Value> Builder::while_loop(const std::vector<Value>& init, std::shared_ptr<Graph> cond,
                                       std::shared_ptr<Graph> body) {
  // Checked here because a mismatched loop signature aborts XLA.
  auto check_params = [&](const Graph& r, const char* which) {
    if (r.params().size() != init.size()) fail(std::string("while: ") + which + " takes the wrong number of values");
    for (size_t i = 0; i < init.size(); ++i)
      if (!(r.type(Value{r.params()[i], 0}) == type(init[i])))
        fail(std::string("while: ") + which + " parameter " + std::to_string(i) + " has the wrong type");
  };
  check_params(*cond, "cond");
  check_params(*body, "body");
  if (cond->outputs().size() != 1 || !(cond->type(cond->outputs()[0]) == TensorType{ElemType::kPred, {}}))
    fail("while: cond must return one scalar i1");
  if (body->outputs().size() != init.size()) fail("while: body returns the wrong number of values");
  std::vector<TensorType> results;
  for (size_t i = 0; i < init.size(); ++i) {
    if (!(body->type(body->outputs()[i]) == type(init[i])))
      fail("while: body result " + std::to_string(i) + " has the wrong type");
    results.push_back(type(init[i]));
  }
  return g_.add_multi("stablehlo.while", init, results, {}, {std::move(cond), std::move(body)});
}

Value Builder::triangular_solve(Value a, Value b, bool left_side, bool lower, bool unit_diagonal,
                                const char* transpose_a) {
  const Dims& da = dims(a);
  const Dims& db = dims(b);
  size_t r = da.size();
  if (r < 2 || db.size() != r || da[r - 1] != da[r - 2])
    fail("triangular_solve: a must be [..., m, m] and b of equal rank");
  for (size_t i = 0; i + 2 < r; ++i)
    if (da[i] != db[i]) fail("triangular_solve: batch dimensions differ");
  if (da[r - 1] != db[left_side ? r - 2 : r - 1])
    fail("triangular_solve: a " + dims_str(da) + " and b " + dims_str(db) + " do not conform");
  if (elem(a) != elem(b) || !is_float(elem(a))) fail("triangular_solve: operands must share a float type");
  std::string t = transpose_a;
  if (t != "NO_TRANSPOSE" && t != "TRANSPOSE" && t != "ADJOINT") fail("triangular_solve: bad transpose_a " + t);
  return g_.add("stablehlo.triangular_solve", {a, b}, type(b),
                {{"left_side", left_side ? "true" : "false"},
                 {"lower", lower ? "true" : "false"},
                 {"unit_diagonal", unit_diagonal ? "true" : "false"},
                 {"transpose_a", "#stablehlo<transpose " + t + ">"}});
}

std::vector<Value> Builder::custom_call(const std::string& target, const std::vector<Value>& operands,
                                        const std::vector<TensorType>& results, const std::string& backend_config) {
  auto plain = [](const std::string& t) {
    for (char c : t)
      if (c == '"' || c == '\\' || c == '\n') return false;
    return true;
  };
  if (target.empty() || !plain(target) || !plain(backend_config)) fail("custom_call: bad target or config");
  if (results.empty()) fail("custom_call: needs a result");
  return g_.add_multi("stablehlo.custom_call", operands, results,
                      {{"call_target_name", "\"" + target + "\""},
                       {"backend_config", "\"" + backend_config + "\""},
                       {"api_version", "1 : i32"}});
}

std::vector<Value> Builder::call(const std::string& symbol, const std::vector<Value>& args,
                                 const std::vector<TensorType>& results) {
  bool known = false;
  for (const auto& f : g_.functions()) known = known || f.first == symbol;
  if (!known) fail("call: no function @" + symbol + " in this graph");
  if (results.empty()) fail("call: needs a result");
  return g_.add_multi("func.call", args, results, {{"callee", "@" + symbol}});
}

Value Builder::complex(Value re, Value im) {
  if (!(type(re) == type(im))) fail("complex: part types differ");
  if (elem(re) != ElemType::kF32 && elem(re) != ElemType::kF64) fail("complex: parts must be f32 or f64");
  return g_.add("stablehlo.complex", {re, im}, TensorType{complex_of(elem(re)), dims(re)});
}

Value Builder::fft(Value x, const char* kind, const Dims& len) {
  std::string k(kind);
  const Dims& d = dims(x);
  int r = type(x).rank(), n = static_cast<int>(len.size());
  if (n < 1 || n > 3 || n > r) fail("fft: 1 to 3 transformed dimensions, at most the rank");
  for (int64_t l : len)
    if (l < 0) fail("fft: negative length");
  Dims out = d;
  ElemType e = elem(x), oe;
  if (k == "FFT" || k == "IFFT" || k == "IRFFT") {
    if (!is_complex(e)) fail("fft: " + k + " needs a complex operand");
  } else if (k == "RFFT") {
    if (e != ElemType::kF32 && e != ElemType::kF64) fail("fft: RFFT needs an f32/f64 operand");
  } else {
    fail("fft: unknown fft_type " + k);
  }
  // The transformed dims must equal fft_length (IRFFT's last: checked below).
  for (int i = 0; i < n; ++i) {
    if (i == n - 1 && k == "IRFFT") continue;
    if (d[r - n + i] != len[i]) fail("fft: fft_length " + dims_str(len) + " does not match " + type(x).mlir());
  }
  if (k == "RFFT") {
    oe = complex_of(e);
    out[r - 1] = len[n - 1] / 2 + 1;
  } else if (k == "IRFFT") {
    if (d[r - 1] != len[n - 1] / 2 + 1) fail("fft: IRFFT last dimension must be fft_length/2+1");
    oe = component(e);
    out[r - 1] = len[n - 1];
  } else {
    oe = e;
  }
  return g_.add("stablehlo.fft", {x}, TensorType{oe, out},
                {{"fft_type", "#stablehlo<fft_type " + k + ">"}, {"fft_length", render_i64_array(len)}});
}

}  // namespace torch_tpu::ir
