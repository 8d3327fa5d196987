#include "ir/lib/collectives.h"

#include <set>
#include <stdexcept>
#include <string>

namespace torch_tpu::ir {
namespace {

[[noreturn]] void fail(const std::string& what) { throw std::invalid_argument("torch_tpu IR: " + what); }

int64_t group_size(const ReplicaGroups& groups, const char* op) {
  if (groups.empty() || groups[0].empty()) fail(std::string(op) + ": no replica groups");
  std::set<int64_t> seen;
  for (const Dims& g : groups) {
    if (g.size() != groups[0].size()) fail(std::string(op) + ": replica groups of different sizes");
    for (int64_t r : g)
      if (r < 0 || !seen.insert(r).second)
        fail(std::string(op) + ": replica " + std::to_string(r) + " repeated or negative");
  }
  return static_cast<int64_t>(groups[0].size());
}

int64_t checked_dim(Builder& b, Value x, int64_t dim, const char* op) {
  if (dim < 0 || dim >= b.type(x).rank()) fail(std::string(op) + ": dimension out of range");
  return dim;
}

// The integer type of the same width, for bitwise exchange of any value.
ElemType bits_type(ElemType t) {
  switch (byte_size(t)) {
    case 1:
      return ElemType::kU8;
    case 2:
      return ElemType::kS16;
    case 4:
      return ElemType::kU32;
    default:
      return ElemType::kU64;
  }
}

}  // namespace

std::string render_groups(const ReplicaGroups& groups) {
  std::string s = "dense<[";
  for (size_t i = 0; i < groups.size(); ++i) {
    s += i ? ", [" : "[";
    for (size_t k = 0; k < groups[i].size(); ++k) s += (k ? ", " : "") + std::to_string(groups[i][k]);
    s += "]";
  }
  return s + "]> : tensor<" + std::to_string(groups.size()) + "x" +
         std::to_string(groups.empty() ? 0 : groups[0].size()) + "xi64>";
}

Value all_reduce(Builder& b, Value x, BinaryOp combiner, const ReplicaGroups& groups) {
  group_size(groups, "all_reduce");
  return b.graph().add("stablehlo.all_reduce", {x}, b.type(x), {{"replica_groups", render_groups(groups)}},
                       {Builder::scalar_combiner(combiner, b.elem(x))});
}

Value all_gather(Builder& b, Value x, int64_t dim, const ReplicaGroups& groups) {
  int64_t n = group_size(groups, "all_gather");
  TensorType out = b.type(x);
  out.dims[checked_dim(b, x, dim, "all_gather")] *= n;
  return b.graph().add("stablehlo.all_gather", {x}, out,
                       {{"all_gather_dim", std::to_string(dim) + " : i64"}, {"replica_groups", render_groups(groups)}});
}

Value reduce_scatter(Builder& b, Value x, int64_t dim, BinaryOp combiner, const ReplicaGroups& groups) {
  int64_t n = group_size(groups, "reduce_scatter");
  TensorType out = b.type(x);
  int64_t& d = out.dims[checked_dim(b, x, dim, "reduce_scatter")];
  if (d % n)
    fail("reduce_scatter: size " + std::to_string(d) + " does not split into " + std::to_string(n) + " pieces");
  d /= n;
  return b.graph().add(
      "stablehlo.reduce_scatter", {x}, out,
      {{"replica_groups", render_groups(groups)}, {"scatter_dimension", std::to_string(dim) + " : i64"}},
      {Builder::scalar_combiner(combiner, b.elem(x))});
}

Value all_to_all(Builder& b, Value x, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups) {
  int64_t n = group_size(groups, "all_to_all");
  TensorType out = b.type(x);
  int64_t& s = out.dims[checked_dim(b, x, split_dim, "all_to_all")];
  if (s % n) fail("all_to_all: size " + std::to_string(s) + " does not split into " + std::to_string(n) + " pieces");
  s /= n;
  out.dims[checked_dim(b, x, concat_dim, "all_to_all")] *= n;
  return b.graph().add("stablehlo.all_to_all", {x}, out,
                       {{"concat_dimension", std::to_string(concat_dim) + " : i64"},
                        {"replica_groups", render_groups(groups)},
                        {"split_count", std::to_string(n) + " : i64"},
                        {"split_dimension", std::to_string(split_dim) + " : i64"}});
}

Value collective_permute(Builder& b, Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs) {
  std::set<int64_t> sources, targets;
  for (auto [s, t] : pairs)
    if (s < 0 || t < 0 || !sources.insert(s).second || !targets.insert(t).second)
      fail("collective_permute: each replica may send once and receive once");
  ReplicaGroups as_groups;
  for (auto [s, t] : pairs) as_groups.push_back({s, t});
  std::string text = render_groups(as_groups);
  if (pairs.empty()) text = "dense<> : tensor<0x2xi64>";
  return b.graph().add("stablehlo.collective_permute", {x}, b.type(x), {{"source_target_pairs", text}});
}

Value replica_id(Builder& b) { return b.graph().add("stablehlo.replica_id", {}, TensorType{ElemType::kU32, {}}); }

Value broadcast_from(Builder& b, Value x, int64_t root, const ReplicaGroups& groups) {
  int64_t n = group_size(groups, "broadcast");
  if (root < 0 || root >= n) fail("broadcast: root position out of range");
  ElemType t = b.elem(x);
  if (is_complex(t)) fail("broadcast: complex values are exchanged as their real parts");
  Value rid = replica_id(b);
  Value is_root;
  for (const Dims& g : groups) {
    Value here = b.compare(rid, b.constant(static_cast<double>(g[root]), ElemType::kU32), Direction::kEq);
    is_root = is_root.valid() ? b.or_(is_root, here) : here;
  }
  // Integer bits, not values: a float x + 0 would turn -0.0 into +0.0, and
  // XLA:CPU's all-reduce takes add/min/max/mul but not or.
  Value bits = t == ElemType::kPred ? b.convert(x, ElemType::kU8) : b.bitcast_convert(x, bits_type(t));
  Value mine = b.select(b.broadcast_to(is_root, b.dims(bits)), bits, b.constant(0, b.elem(bits), b.dims(bits)));
  Value all = all_reduce(b, mine, BinaryOp::kAdd, groups);
  return t == ElemType::kPred ? b.convert(all, t) : b.bitcast_convert(all, t);
}

}  // namespace torch_tpu::ir
