#include "ops/custom/jax_call.h"

#include <mutex>
#include <unordered_map>

#include "ops/common.h"

namespace torch_tpu::ops {
namespace {

std::mutex& registry_mutex() {
  static std::mutex mu;
  return mu;
}

// symbol -> text. Entries live for the process: a program compiled from
// one may be replayed at any time, and a symbol names one text for good
// (it carries a hash of the text).
std::unordered_map<std::string, std::string>& registry() {
  static auto* r = new std::unordered_map<std::string, std::string>();
  return *r;
}

const std::string& text_of(const std::string& symbol) {
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto it = registry().find(symbol);
  TORCH_CHECK(it != registry().end(), "torch_tpu: no JAX function registered as '", symbol, "'");
  return it->second;  // never erased, so the reference stays valid
}

}  // namespace

void register_jax_function(const std::string& symbol, const std::string& text) {
  TORCH_CHECK(!symbol.empty() && symbol.find_first_of(" \t\n\"@") == std::string::npos,
              "torch_tpu: a JAX function symbol must be a plain identifier, got '", symbol, "'");
  std::lock_guard<std::mutex> lock(registry_mutex());
  auto [it, added] = registry().emplace(symbol, text);
  TORCH_CHECK(added || it->second == text, "torch_tpu: the JAX function symbol '", symbol,
              "' is already registered with other text");
}

std::vector<at::Tensor> jax_call(const std::string& symbol, const std::vector<at::Tensor>& inputs,
                                 const std::vector<std::vector<int64_t>>& sizes,
                                 const std::vector<c10::ScalarType>& dtypes) {
  TORCH_CHECK(sizes.size() == dtypes.size(), "jax_call: ", sizes.size(), " result sizes but ", dtypes.size(),
              " dtypes");
  TORCH_CHECK(!sizes.empty(), "jax_call: the function must return at least one array");
  const std::string& text = text_of(symbol);
  c10::Device dev(c10::DeviceType::PrivateUse1, 0);
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, "jax_call: expected every input on tpu, got one on ",
                t.device());
    dev = t.device();
  }
  std::vector<at::Tensor> outs;
  std::vector<ir::TensorType> types;
  for (size_t i = 0; i < sizes.size(); ++i) {
    outs.push_back(empty_tpu(sizes[i], dtypes[i], dev));
    types.push_back(ir::TensorType{to_elem(dtypes[i]), Dims(sizes[i].begin(), sizes[i].end())});
  }
  // The symbol carries a hash of the text, so it keys the program alone.
  record::OpCall call("jax_kernel");
  call.attr(std::string_view(symbol));
  for (const at::Tensor& t : inputs) call.input(t);
  for (const at::Tensor& o : outs) call.output(o);
  call.run([&](Builder& b, const Values& in) {
    b.graph().add_function(symbol, text);
    return b.call(symbol, in, types);
  });
  return outs;
}

}  // namespace torch_tpu::ops
