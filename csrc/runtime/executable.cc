#include "runtime/executable.h"

#include "runtime/error.h"

#include <atomic>

namespace torch_tpu::runtime {

Executable::Executable(ClientRef client, PJRT_LoadedExecutable* exe) : client_(std::move(client)), exe_(exe) {
  const PJRT_Api* api = client_->api;
  PJRT_LoadedExecutable_GetExecutable_Args g{};
  g.struct_size = PJRT_LoadedExecutable_GetExecutable_Args_STRUCT_SIZE;
  g.loaded_executable = exe_;
  check(api, api->PJRT_LoadedExecutable_GetExecutable(&g), "PJRT_LoadedExecutable_GetExecutable");
  desc_ = g.executable;
  PJRT_Executable_NumOutputs_Args n{};
  n.struct_size = PJRT_Executable_NumOutputs_Args_STRUCT_SIZE;
  n.executable = desc_;
  check(api, api->PJRT_Executable_NumOutputs(&n), "PJRT_Executable_NumOutputs");
  num_outputs_ = n.num_outputs;
}

Executable::~Executable() {
  const PJRT_Api* api = client_->api;
  if (desc_ != nullptr) {
    PJRT_Executable_Destroy_Args d{};
    d.struct_size = PJRT_Executable_Destroy_Args_STRUCT_SIZE;
    d.executable = desc_;
    take_error(api, api->PJRT_Executable_Destroy(&d));
  }
  PJRT_LoadedExecutable_Destroy_Args a{};
  a.struct_size = PJRT_LoadedExecutable_Destroy_Args_STRUCT_SIZE;
  a.executable = exe_;
  take_error(api, api->PJRT_LoadedExecutable_Destroy(&a));
}

std::vector<BufferPtr> Executable::execute(const std::vector<PJRT_Buffer*>& args, PJRT_Device* device,
                                           const std::vector<int64_t>& keep) const {
  const PJRT_Api* api = client_->api;
  PJRT_ExecuteOptions opts{};
  opts.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  opts.non_donatable_input_indices = keep.data();
  opts.num_non_donatable_input_indices = keep.size();
  std::vector<PJRT_Buffer*> outs(num_outputs_, nullptr);
  PJRT_Buffer* const* arg_list = args.data();
  PJRT_Buffer** out_list = outs.data();
  PJRT_LoadedExecutable_Execute_Args a{};
  a.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  a.executable = exe_;
  a.options = &opts;
  a.argument_lists = &arg_list;
  a.num_devices = 1;
  a.num_args = args.size();
  a.output_lists = &out_list;
  a.execute_device = device;
  check(api, api->PJRT_LoadedExecutable_Execute(&a), "PJRT_LoadedExecutable_Execute");
  std::vector<BufferPtr> result;
  result.reserve(outs.size());
  for (PJRT_Buffer* b : outs) result.push_back(std::make_shared<Buffer>(client_, b));
  return result;
}

std::vector<std::vector<BufferPtr>> Executable::execute_replicated(const std::vector<std::vector<PJRT_Buffer*>>& args,
                                                                   const std::vector<int64_t>& keep) const {
  const PJRT_Api* api = client_->api;
  PJRT_ExecuteOptions opts{};
  opts.struct_size = PJRT_ExecuteOptions_STRUCT_SIZE;
  opts.non_donatable_input_indices = keep.data();
  opts.num_non_donatable_input_indices = keep.size();
  // Each launch gets its own id: XLA:CPU keys a collective's rendezvous on
  // it, and with every launch at 0 the replicas of successive launches
  // met the wrong partners and hung. Every process launching the same
  // sequence numbers it the same, as multi-host launches require.
  static std::atomic<int> launches{0};
  opts.launch_id = ++launches;
  size_t nd = args.size();
  std::vector<PJRT_Buffer* const*> arg_lists(nd);
  std::vector<std::vector<PJRT_Buffer*>> outs(nd, std::vector<PJRT_Buffer*>(num_outputs_));
  std::vector<PJRT_Buffer**> out_lists(nd);
  for (size_t d = 0; d < nd; ++d) {
    arg_lists[d] = args[d].data();
    out_lists[d] = outs[d].data();
  }
  PJRT_LoadedExecutable_Execute_Args a{};
  a.struct_size = PJRT_LoadedExecutable_Execute_Args_STRUCT_SIZE;
  a.executable = exe_;
  a.options = &opts;
  a.argument_lists = arg_lists.data();
  a.num_devices = nd;
  a.num_args = nd ? args[0].size() : 0;
  a.output_lists = out_lists.data();
  check(api, api->PJRT_LoadedExecutable_Execute(&a), "PJRT_LoadedExecutable_Execute");
  std::vector<std::vector<BufferPtr>> result(nd);
  for (size_t d = 0; d < nd; ++d)
    for (PJRT_Buffer* b : outs[d]) result[d].push_back(std::make_shared<Buffer>(client_, b));
  return result;
}

std::string Executable::optimized_program(std::string* format) const {
  const PJRT_Api* api = client_->api;
  PJRT_Program prog{};
  prog.struct_size = PJRT_Program_STRUCT_SIZE;
  PJRT_Executable_OptimizedProgram_Args a{};
  a.struct_size = PJRT_Executable_OptimizedProgram_Args_STRUCT_SIZE;
  a.executable = desc_;
  a.program = &prog;
  // Twice: first for the size, then into a buffer of that size.
  check(api, api->PJRT_Executable_OptimizedProgram(&a), "PJRT_Executable_OptimizedProgram");
  std::string out(prog.code_size, '\0');
  prog.code = out.data();
  check(api, api->PJRT_Executable_OptimizedProgram(&a), "PJRT_Executable_OptimizedProgram");
  out.resize(prog.code_size);
  if (format) *format = prog.format ? std::string(prog.format, prog.format_size) : "";
  return out;
}

std::string Executable::serialize(std::string* why) const {
  const PJRT_Api* api = client_->api;
  PJRT_Executable_Serialize_Args a{};
  a.struct_size = PJRT_Executable_Serialize_Args_STRUCT_SIZE;
  a.executable = desc_;
  std::string err = take_error(api, api->PJRT_Executable_Serialize(&a));
  if (!err.empty()) {
    if (why) *why = std::move(err);
    return {};
  }
  std::string bytes(a.serialized_bytes, a.serialized_bytes_size);
  if (a.serialized_executable_deleter) a.serialized_executable_deleter(a.serialized_executable);
  return bytes;
}

}  // namespace torch_tpu::runtime
