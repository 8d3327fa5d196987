// Typed constructors for StableHLO primitives on an ir::Graph. Op lowerings
// compose these; nothing here knows about torch. Shape rules are checked
// here (throwing std::invalid_argument) so that an invalid program never
// reaches XLA, which would abort the process.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/ops.h"

namespace torch_tpu::ir {

using Dims = std::vector<int64_t>;

class Builder {
 public:
  explicit Builder(Graph& g) : g_(g) {}
  Graph& graph() { return g_; }
  const TensorType& type(Value v) const { return g_.type(v); }
  ElemType elem(Value v) const { return g_.type(v).elem; }
  const Dims& dims(Value v) const { return g_.type(v).dims; }

  // Constants and iota.
  Value constant(double v, ElemType t, const Dims& dims = {});
  Value constant_bits(uint64_t bits, ElemType t, const Dims& dims = {});
  Value iota(const Dims& dims, int64_t dim, ElemType t);

  // Elementwise (same shapes; use broadcast_to first), by enum or by name:
  // b.unary(UnaryOp::kExp, x) is b.exp(x); b.binary(BinaryOp::kAdd, x, y)
  // is b.add(x, y) (ir/ops.h lists them).
  Value unary(UnaryOp op, Value x);
  Value binary(BinaryOp op, Value a, Value b);
#define TT_IR_UNARY_METHOD(fn, E, name) \
  Value fn(Value x) { return unary(UnaryOp::k##E, x); }
#define TT_IR_BINARY_METHOD(fn, E, name) \
  Value fn(Value x, Value y) { return binary(BinaryOp::k##E, x, y); }
  TT_IR_UNARY_OPS(TT_IR_UNARY_METHOD)
  TT_IR_BINARY_OPS(TT_IR_BINARY_METHOD)
#undef TT_IR_UNARY_METHOD
#undef TT_IR_BINARY_METHOD
  Value compare(Value a, Value b, Direction direction);
  Value select(Value pred, Value on_true, Value on_false);
  Value clamp(Value lo, Value x, Value hi);
  Value convert(Value x, ElemType t);
  Value bitcast_convert(Value x, ElemType t);

  // Shape.
  Value reshape(Value x, const Dims& dims);
  Value broadcast_in_dim(Value x, const Dims& dims, const Dims& mapping);
  // Numpy-style broadcast of `x` to `dims` (trailing alignment).
  Value broadcast_to(Value x, const Dims& dims);
  Value transpose(Value x, const Dims& perm);
  Value slice(Value x, const Dims& start, const Dims& limit, const Dims& strides);
  Value dynamic_slice(Value x, const std::vector<Value>& starts, const Dims& sizes);
  Value dynamic_update_slice(Value x, Value update, const std::vector<Value>& starts);
  Value concatenate(const std::vector<Value>& xs, int64_t dim);
  Value pad(Value x, Value pad_value, const Dims& lo, const Dims& hi, const Dims& interior);
  Value reverse(Value x, const Dims& dims);

  // Reductions with a binary combiner (BinaryOp::kAdd, kMax, ...).
  Value reduce(Value x, Value init, const Dims& dims, BinaryOp combiner);
  // Variadic reduce with a caller-built region (e.g. argmax).
  std::vector<Value> reduce_multi(const std::vector<Value>& xs, const std::vector<Value>& inits, const Dims& dims,
                                  std::shared_ptr<Graph> region);
  Value reduce_window(Value x, Value init, const Dims& window, const Dims& strides, const Dims& base_dilations,
                      const Dims& window_dilations, const std::vector<std::pair<int64_t, int64_t>>& padding,
                      BinaryOp combiner);

  // Linear algebra.
  Value dot_general(Value a, Value b, const Dims& lhs_batch, const Dims& rhs_batch, const Dims& lhs_contract,
                    const Dims& rhs_contract, ElemType out, const std::string& precision = "DEFAULT");

  // Indexing. Full-control gather/scatter; the ops layer wraps common forms.
  Value gather(Value operand, Value indices, const Dims& offset_dims, const Dims& collapsed_slice_dims,
               const Dims& start_index_map, int64_t index_vector_dim, const Dims& slice_sizes, const Dims& out_dims);
  // `combiner`: std::nullopt replaces, otherwise BinaryOp::kAdd etc.
  Value scatter(Value operand, Value indices, Value updates, const Dims& update_window_dims,
                const Dims& inserted_window_dims, const Dims& scatter_dims_to_operand_dims, int64_t index_vector_dim,
                std::optional<BinaryOp> combiner);
  // Stable sort of `xs` along `dim`, ordered by xs[0] (then xs[1]...).
  std::vector<Value> sort(const std::vector<Value>& xs, int64_t dim, bool descending);

  // Random bits from a u64[2] state [key, counter] (PHILOX: XLA:CPU compiles it in
  // about half the time of THREE_FRY): returns {new_state, bits}.
  std::vector<Value> rng_bit_generator(Value state, const Dims& dims, ElemType bits_type);

  // Region helper: a scalar binary combiner graph for reduce/scatter.
  static std::shared_ptr<Graph> scalar_combiner(BinaryOp op, ElemType t);

  // stablehlo.convolution. Layouts name each operand dimension, one char
  // per dimension: lhs "b"atch/"f"eature, rhs "o"utput/"i"nput feature,
  // result "b"/"f", spatial dimensions '0'..'9' (e.g. "bf01", "oi01",
  // "bf01"). `padding` is (low, high) per spatial dimension.
  Value convolution(Value lhs, Value rhs, const std::string& lhs_layout, const std::string& rhs_layout,
                    const std::string& out_layout, const Dims& window_strides,
                    const std::vector<std::pair<int64_t, int64_t>>& padding, const Dims& lhs_dilation,
                    const Dims& rhs_dilation, int64_t feature_group_count, int64_t batch_group_count, ElemType out,
                    const std::string& precision = "DEFAULT");

  // stablehlo.while. `cond` maps the carried values to a scalar i1 and
  // `body` maps them to new values of the same types. Regions are closed
  // graphs: anything the loop reads must be carried (see loop_region).
  std::vector<Value> while_loop(const std::vector<Value>& init, std::shared_ptr<Graph> cond,
                                std::shared_ptr<Graph> body);
  // A region graph whose parameters have the types of `carried`.
  std::shared_ptr<Graph> loop_region(const std::vector<Value>& carried) const;

  // Linear algebra beyond dot_general.
  // stablehlo.triangular_solve: op(a) x = b (left_side) or x op(a) = b,
  // a [..., m, m] triangular, b [..., m, n] with a's batch dims.
  // `transpose_a`: "NO_TRANSPOSE", "TRANSPOSE" or "ADJOINT".
  Value triangular_solve(Value a, Value b, bool left_side, bool lower, bool unit_diagonal, const char* transpose_a);
  // stablehlo.custom_call to a target XLA itself expands (e.g. "Qr",
  // "ProductOfElementaryHouseholderReflectors", "Eigh"). XLA does not check
  // the result types against the target, so callers must get them right.
  std::vector<Value> custom_call(const std::string& target, const std::vector<Value>& operands,
                                 const std::vector<TensorType>& results, const std::string& backend_config = "");

  // func.call of a function added with graph().add_function(symbol, ...),
  // whose signature the caller states: `results` must be what it returns.
  std::vector<Value> call(const std::string& symbol, const std::vector<Value>& args,
                          const std::vector<TensorType>& results);

  // Complex numbers and FFT.
  // stablehlo.complex: a complex value from same-typed f32/f64 parts.
  Value complex(Value re, Value im);
  // stablehlo.fft over the trailing fft_length.size() dimensions. `kind`:
  // "FFT", "IFFT" (complex -> complex), "RFFT" (real -> complex, last dim
  // becomes n/2+1), "IRFFT" (complex -> real, last dim becomes n). IFFT and
  // IRFFT include the 1/n scaling.
  Value fft(Value x, const char* kind, const Dims& fft_length);

 private:
  // dot_general as given, without the folds and the operand order chosen
  // by dot_general.
  Value emit_dot(Value a, Value b, const Dims& lhs_batch, const Dims& rhs_batch, const Dims& lhs_contract,
                 const Dims& rhs_contract, ElemType out, const std::string& precision);

  Graph& g_;
};

std::string render_i64_array(const Dims& v);  // "array<i64: 1, 2>"
std::string render_list(const Dims& v);       // "[1, 2]"

}  // namespace torch_tpu::ir
