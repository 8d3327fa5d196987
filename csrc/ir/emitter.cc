// StableHLO text emission. Ops use MLIR's generic syntax, which holds up best
// across plugin versions; only func.func/return use the custom form.
#include <map>

#include "ir/graph.h"

namespace torch_tpu::ir {
namespace {

std::string name_of(const Graph& g, Value v, const std::string& prefix) {
  const Node& n = g.nodes()[v.node];
  std::string s = "%" + prefix + std::to_string(v.node);
  if (n.results.size() > 1) s += "#" + std::to_string(v.index);
  return s;
}

void emit_body(const Graph& g, std::string& out, int indent, const std::string& prefix) {
  std::string pad(indent, ' ');
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    if (n.op == "param") continue;
    out += pad;
    out += "%" + prefix + std::to_string(i);
    if (n.results.size() > 1) out += ":" + std::to_string(n.results.size());
    out += " = \"" + n.op + "\"(";
    for (size_t k = 0; k < n.operands.size(); ++k) {
      if (k) out += ", ";
      out += name_of(g, n.operands[k], prefix);
    }
    out += ")";
    if (!n.regions.empty()) {
      out += " (";
      for (size_t r = 0; r < n.regions.size(); ++r) {
        if (r) out += ", ";
        out += "{\n";
        n.regions[r]->emit_region(out, indent + 2);
        out += pad + "}";
      }
      out += ")";
    }
    if (!n.attrs.empty()) {
      out += " {";
      for (size_t k = 0; k < n.attrs.size(); ++k) {
        if (k) out += ", ";
        out += n.attrs[k].name + " = " + n.attrs[k].text;
      }
      out += "}";
    }
    out += " : (";
    for (size_t k = 0; k < n.operands.size(); ++k) {
      if (k) out += ", ";
      out += g.type(n.operands[k]).mlir();
    }
    out += ") -> ";
    if (n.results.size() == 1) {
      out += n.results[0].mlir();
    } else {
      out += "(";
      for (size_t k = 0; k < n.results.size(); ++k) {
        if (k) out += ", ";
        out += n.results[k].mlir();
      }
      out += ")";
    }
    out += "\n";
  }
}

// The func.func definitions of `g` and of every region nested in it, once
// per symbol: a call inside a loop body still names a module-level function.
void collect_functions(const Graph& g, std::vector<const std::pair<std::string, std::string>*>& out) {
  for (const auto& f : g.functions()) {
    bool seen = false;
    for (const auto* o : out) seen = seen || o->first == f.first;
    if (!seen) out.push_back(&f);
  }
  for (const Node& n : g.nodes())
    for (const auto& r : n.regions) collect_functions(*r, out);
}

}  // namespace

void Graph::emit_region(std::string& out, int indent) const {
  // Region parameters are named like nodes, so the body refers to them as
  // %r<depth>_<id>; a per-depth prefix keeps nested regions distinct.
  std::string prefix = "r" + std::to_string(indent) + "_";
  std::string pad(indent, ' ');
  out += pad + "^bb0(";
  for (size_t i = 0; i < params_.size(); ++i) {
    if (i) out += ", ";
    out += "%" + prefix + std::to_string(params_[i]) + ": " + nodes_[params_[i]].results[0].mlir();
  }
  out += "):\n";
  emit_body(*this, out, indent + 2, prefix);
  out += pad + "  \"stablehlo.return\"(";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (i) out += ", ";
    out += name_of(*this, outputs_[i], prefix);
  }
  out += ") : (";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (i) out += ", ";
    out += type(outputs_[i]).mlir();
  }
  out += ") -> ()\n";
}

std::string Graph::to_mlir() const {
  std::map<int, int> alias_of;
  for (auto [p, o] : aliases_) alias_of[p] = o;
  std::string out = "module @torch_tpu {\n  func.func public @main(";
  for (size_t i = 0; i < params_.size(); ++i) {
    if (i) out += ", ";
    out += "%v" + std::to_string(params_[i]) + ": " + nodes_[params_[i]].results[0].mlir();
    if (auto it = alias_of.find(static_cast<int>(i)); it != alias_of.end())
      out += " {tf.aliasing_output = " + std::to_string(it->second) + " : i32}";
  }
  out += ") -> (";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (i) out += ", ";
    out += type(outputs_[i]).mlir();
  }
  out += ") {\n";
  emit_body(*this, out, 4, "v");
  out += "    return ";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (i) out += ", ";
    out += name_of(*this, outputs_[i], "v");
  }
  out += " : ";
  for (size_t i = 0; i < outputs_.size(); ++i) {
    if (i) out += ", ";
    out += type(outputs_[i]).mlir();
  }
  out += "\n  }\n";
  std::vector<const std::pair<std::string, std::string>*> functions;
  collect_functions(*this, functions);
  for (const auto* f : functions) out += f->second + "\n";
  out += "}\n";
  return out;
}

}  // namespace torch_tpu::ir
