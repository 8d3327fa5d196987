#include "ir/graph.h"

#include <stdexcept>

namespace torch_tpu::ir {

void Graph::mix(uint64_t v) {
  Hasher h{hash_};
  h.add(v);
  hash_ = h.h;
}
void Graph::mix(const std::string& s) {
  Hasher h{hash_};
  h.add(s);
  hash_ = h.h;
}

Value Graph::param(const TensorType& t) {
  params_.push_back(static_cast<int32_t>(nodes_.size()));
  return add("param", {}, t);
}

Value Graph::add(std::string op, std::vector<Value> operands, TensorType result, std::vector<Attr> attrs,
                 std::vector<std::shared_ptr<Graph>> regions) {
  return add_multi(std::move(op), std::move(operands), {std::move(result)}, std::move(attrs), std::move(regions))[0];
}

std::vector<Value> Graph::add_multi(std::string op, std::vector<Value> operands, std::vector<TensorType> results,
                                    std::vector<Attr> attrs, std::vector<std::shared_ptr<Graph>> regions) {
  for (const Value& v : operands)
    if (v.node < 0 || v.node >= static_cast<int>(nodes_.size()))
      throw std::logic_error("ir::Graph: operand of " + op + " is not in this graph");
  mix(op);
  for (const Value& v : operands) {
    mix(static_cast<uint64_t>(v.node) << 8 | v.index);
  }
  for (const TensorType& t : results) {
    mix(static_cast<uint64_t>(t.elem));
    mix(t.dims.size());
    for (int64_t d : t.dims) mix(static_cast<uint64_t>(d));
  }
  for (const Attr& a : attrs) {
    mix(a.name);
    mix(a.text);
  }
  for (const auto& r : regions) mix(r->fingerprint());
  int32_t id = static_cast<int32_t>(nodes_.size());
  nodes_.push_back(Node{std::move(op), std::move(operands), std::move(results), std::move(attrs), std::move(regions)});
  std::vector<Value> out;
  for (int i = 0; i < static_cast<int>(nodes_.back().results.size()); ++i) out.push_back({id, i});
  return out;
}

void Graph::set_outputs(std::vector<Value> outs) {
  outputs_ = std::move(outs);
  mix(0xfeedull);
  for (const Value& v : outputs_) mix(static_cast<uint64_t>(v.node) << 8 | v.index);
}

void Graph::alias(int param_index, int output_index) {
  aliases_.emplace_back(param_index, output_index);
  mix(0xa11a5ull ^ (static_cast<uint64_t>(param_index) << 20) ^ output_index);
}

void Graph::add_function(const std::string& symbol, const std::string& text) {
  for (const auto& f : functions_)
    if (f.first == symbol) return;
  functions_.emplace_back(symbol, text);
  mix(0xf00cull);
  mix(symbol);
  mix(text);
}

uint64_t Graph::fingerprint() const { return hash_; }

}  // namespace torch_tpu::ir
