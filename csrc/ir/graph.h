// The one IR: a graph of StableHLO-level nodes. Every driver (strict eager,
// fused eager, torch.compile) builds these through the same op lowerings.
// A graph is append-only SSA; attributes are stored as rendered MLIR
// attribute text, and a structural fingerprint is kept as nodes are added.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ir/types.h"

namespace torch_tpu::ir {

struct Value {
  int32_t node = -1;  // producing node (parameters are nodes too)
  int32_t index = 0;  // result index for multi-result nodes
  bool valid() const { return node >= 0; }
};

struct Attr {
  std::string name;
  std::string text;  // MLIR attribute syntax, e.g. "array<i64: 0, 1>"
};

class Graph;

struct Node {
  std::string op;  // "stablehlo.add", or "param" for a function argument
  std::vector<Value> operands;
  std::vector<TensorType> results;
  std::vector<Attr> attrs;
  std::vector<std::shared_ptr<Graph>> regions;  // reducers, comparators
};

class Graph {
 public:
  Value param(const TensorType& t);
  Value add(std::string op, std::vector<Value> operands, TensorType result, std::vector<Attr> attrs = {},
            std::vector<std::shared_ptr<Graph>> regions = {});
  std::vector<Value> add_multi(std::string op, std::vector<Value> operands, std::vector<TensorType> results,
                               std::vector<Attr> attrs = {}, std::vector<std::shared_ptr<Graph>> regions = {});
  void set_outputs(std::vector<Value> outs);
  // Marks parameter `param_index` as donated to output `output_index`.
  void alias(int param_index, int output_index);
  // Adds private func.func definitions (MLIR text, e.g. a JAX kernel's
  // functions renamed under one prefix) that "func.call" nodes name by
  // `symbol`; emitted into the module after @main, once per symbol.
  void add_function(const std::string& symbol, const std::string& text);
  const std::vector<std::pair<std::string, std::string>>& functions() const { return functions_; }

  const TensorType& type(Value v) const { return nodes_[v.node].results[v.index]; }
  const std::vector<Node>& nodes() const { return nodes_; }
  const std::vector<int32_t>& params() const { return params_; }
  const std::vector<Value>& outputs() const { return outputs_; }
  const std::vector<std::pair<int, int>>& aliases() const { return aliases_; }

  // Structural hash of everything that affects the emitted program.
  uint64_t fingerprint() const;
  // The module as StableHLO text (generic op syntax inside func.func @main).
  std::string to_mlir() const;
  // The body of a region: "^bb0(%a: ..): ... stablehlo.return".
  void emit_region(std::string& out, int indent) const;

 private:
  std::vector<Node> nodes_;
  std::vector<int32_t> params_;
  std::vector<Value> outputs_;
  std::vector<std::pair<int, int>> aliases_;
  std::vector<std::pair<std::string, std::string>> functions_;
  uint64_t hash_ = 0xcbf29ce484222325ull;
  void mix(uint64_t v);
  void mix(const std::string& s);
};

// A stable 64-bit hasher (FNV-1a over 64-bit words) used for fingerprints
// and cache keys. Stable across processes, unlike std::hash.
struct Hasher {
  uint64_t h = 0xcbf29ce484222325ull;
  void add(uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  }
  void add(const void* data, size_t n) {
    auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) {
      h ^= p[i];
      h *= 0x100000001b3ull;
    }
  }
  void add(const std::string& s) {
    add(s.size());
    add(s.data(), s.size());
  }
};

}  // namespace torch_tpu::ir
