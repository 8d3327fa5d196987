#include "ir/spmd.h"

#include <stdexcept>

namespace torch_tpu::ir {
namespace {

// A value's attributes: its sharding (Shardy's when the module has a mesh,
// else GSPMD's text) and its donation.
std::string attr(const std::string& sharding, bool shardy, int alias = -1) {
  std::string a;
  if (!sharding.empty()) a = shardy ? "sdy.sharding = " + sharding : "mhlo.sharding = \"" + sharding + "\"";
  if (alias >= 0)
    a += (a.empty() ? "" : ", ") + std::string("tf.aliasing_output = ") + std::to_string(alias) + " : i32";
  return a.empty() ? "" : " {" + a + "}";
}

// The graph's own signature line without its aliasing attributes: they
// belong on the entry point, and a private function's are meaningless.
void drop_aliases(std::string& body, size_t from) {
  const size_t end = body.find('\n', from);
  const std::string tag = " {tf.aliasing_output = ";
  for (size_t at = body.find(tag, from); at != std::string::npos && at < end; at = body.find(tag, at)) {
    const size_t close = body.find('}', at);
    body.erase(at, close + 1 - at);
  }
}

}  // namespace

std::string spmd_module(const Graph& g, const std::vector<SpmdValue>& params, const std::vector<SpmdValue>& results,
                        int64_t num_partitions, const std::string& mesh) {
  const bool shardy = !mesh.empty();
  const auto& ps = g.params();
  const auto& os = g.outputs();
  if (params.size() != ps.size() || results.size() != os.size())
    throw std::invalid_argument("spmd_module: one SpmdValue per parameter and per result expected");
  std::string body = g.to_mlir();
  const std::string head = "module @torch_tpu {\n";
  const std::string main = "func.func public @main(";
  if (body.compare(0, head.size(), head) != 0 || body.find(main) == std::string::npos)
    throw std::logic_error("spmd_module: unexpected module text");
  const size_t at = body.find(main);
  body.replace(at, main.size(), "func.func private @spmd_body(");
  if (!g.aliases().empty()) drop_aliases(body, at);
  body.erase(0, head.size());
  std::vector<int> alias_of(ps.size(), -1);
  for (auto [j, k] : g.aliases()) {
    if (params.at(j).dims != results.at(k).dims || params[j].sharding != results[k].sharding)
      throw std::invalid_argument("spmd_module: an aliased parameter and result differ in dims or sharding");
    alias_of[j] = k;
  }

  std::string out = "module @torch_tpu attributes {mhlo.num_partitions = " + std::to_string(num_partitions) +
                    " : i32, mhlo.num_replicas = 1 : i32} {\n" + (shardy ? "  " + mesh + "\n" : "") +
                    "  func.func public @main(";
  std::string inner_types, outer_results, reshapes, call_args;
  for (size_t i = 0; i < ps.size(); ++i) {
    const TensorType& t = g.type(Value{ps[i], 0});
    TensorType outer{t.elem, params[i].dims};
    if (outer.numel() != t.numel()) throw std::invalid_argument("spmd_module: a parameter's dims change its size");
    out += (i ? ", " : "") + std::string("%a") + std::to_string(i) + ": " + outer.mlir() +
           attr(params[i].sharding, shardy, alias_of[i]);
    std::string arg = "%a" + std::to_string(i);
    if (outer.dims != t.dims) {
      reshapes += "    %r" + std::to_string(i) + " = stablehlo.reshape " + arg + " : (" + outer.mlir() + ") -> " +
                  t.mlir() + "\n";
      arg = "%r" + std::to_string(i);
    }
    call_args += (i ? ", " : "") + arg;
    inner_types += (i ? ", " : "") + t.mlir();
  }
  std::string result_types, outer_types, returns;
  for (size_t k = 0; k < os.size(); ++k) {
    const TensorType& t = g.type(os[k]);
    TensorType outer{t.elem, results[k].dims};
    if (outer.numel() != t.numel()) throw std::invalid_argument("spmd_module: a result's dims change its size");
    result_types += (k ? ", " : "") + t.mlir();
    outer_types += (k ? ", " : "") + outer.mlir();
    outer_results += (k ? ", " : "") + outer.mlir() + attr(results[k].sharding, shardy);
  }
  out += ") -> (" + outer_results + ") {\n" + reshapes;
  out += "    %c" + std::string(os.size() > 1 ? ":" + std::to_string(os.size()) : "") + " = func.call @spmd_body(" +
         call_args + ") : (" + inner_types + ") -> (" + result_types + ")\n";
  for (size_t k = 0; k < os.size(); ++k) {
    const TensorType& t = g.type(os[k]);
    TensorType outer{t.elem, results[k].dims};
    std::string v = os.size() > 1 ? "%c#" + std::to_string(k) : "%c";
    if (outer.dims != t.dims) {
      out += "    %o" + std::to_string(k) + " = stablehlo.reshape " + v + " : (" + t.mlir() + ") -> " + outer.mlir() +
             "\n";
      v = "%o" + std::to_string(k);
    }
    returns += (k ? ", " : "") + v;
  }
  out += "    return " + returns + " : " + outer_types + "\n  }\n";
  return out + body;
}

}  // namespace torch_tpu::ir
