// torch_tpu._C._has_grad_hooks: whether a leaf tensor's gradient passes
// through any autograd hook. torch.compile(backend="tpu") traces
// `loss.backward()` into its graph only for leaves without hooks: the traced
// form computes gradients with autograd.grad and writes .grad itself, so no
// hook on the leaf or on its gradient accumulator would run. Python sees the
// hooks registered with Tensor.register_hook; DDP's and FSDP1's live on the
// accumulator node in C++, which only this can see.
#include <torch/csrc/autograd/node.h>
#include <torch/csrc/autograd/python_hook.h>
#include <torch/csrc/autograd/variable.h>
#include <torch/csrc/utils/pybind.h>

#include <cstring>
#include <typeinfo>

namespace torch_tpu {

namespace {
namespace ta = torch::autograd;

// Python registers its hooks as one C++ hook holding a dict, which stays
// (empty) after handle.remove(): such a hook counts only while its dict has
// entries. Any other C++ hook counts. Called with the GIL held.
// The Python hook classes' type_info is not exported from libtorch_python,
// so they are told apart by their (Itanium-mangled) dynamic type name; each
// derives from its hook base alone, so the object starts at the same address.
bool type_is(const std::type_info& t, const char* mangled) {
  const char* n = t.name();
  if (*n == '*') ++n;
  return std::strcmp(n, mangled) == 0;
}

template <typename H>
bool live(const H* h) {
  if (!h) return false;
  const std::type_info& t = typeid(*h);
  PyObject* dict = nullptr;
  if (type_is(t, "N5torch8autograd23PyFunctionTensorPreHookE"))
    dict = static_cast<const ta::PyFunctionTensorPreHook*>(static_cast<const void*>(h))->dict;
  else if (type_is(t, "N5torch8autograd17PyFunctionPreHookE"))
    dict = static_cast<const ta::PyFunctionPreHook*>(static_cast<const void*>(h))->dict;
  else if (type_is(t, "N5torch8autograd18PyFunctionPostHookE"))
    dict = static_cast<const ta::PyFunctionPostHook*>(static_cast<const void*>(h))->dict;
  else if (type_is(t, "N5torch8autograd32PyFunctionTensorPostAccGradHooksE"))
    dict = static_cast<const ta::PyFunctionTensorPostAccGradHooks*>(static_cast<const void*>(h))->dict;
  else
    return true;
  return dict && PyDict_Check(dict) && PyDict_Size(dict) > 0;
}

template <typename V>
bool any_live(const V& hooks) {
  for (const auto& h : hooks)
    if (live(h.get())) return true;
  return false;
}

bool has_grad_hooks(const at::Tensor& t) {
  namespace ai = ta::impl;
  if (!t.defined() || !t.requires_grad()) return false;
  if (any_live(ai::hooks(t)) || live(ai::post_acc_grad_hooks(t).get())) return true;
  // The accumulator is held weakly by the tensor: it exists only while
  // something (a hook's owner, a live graph) holds it.
  auto acc = ai::try_get_grad_accumulator(t);
  if (!acc) return false;
  for (const auto& [idx, h] : acc->retains_grad_hooks())
    if (live(h.get())) return true;
  return any_live(acc->pre_hooks()) || any_live(acc->post_hooks()) || any_live(acc->tensor_pre_hooks()) ||
         live(acc->tensor_post_acc_grad_hooks().get());
}
}  // namespace

void bind_grad_hooks(pybind11::module_& m) { m.def("_has_grad_hooks", &has_grad_hooks); }

}  // namespace torch_tpu
