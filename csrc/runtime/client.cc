#include "runtime/client.h"

#include "runtime/error.h"

namespace torch_tpu::runtime {

Client::Client(const Plugin& plugin, int cpu_device_count) {
  const PJRT_Api* api = plugin.api();
  core_ = std::make_shared<ClientCore>();
  core_->api = api;
  plugin_identity_ = plugin.identity();

  // Only XLA:CPU understands cpu_device_count; detect it by the plugin path
  // before the client exists (the platform name needs a client).
  bool is_cpu = plugin.path().find("cpu") != std::string::npos;
  PJRT_NamedValue opt{};
  opt.struct_size = PJRT_NamedValue_STRUCT_SIZE;
  static const char kName[] = "cpu_device_count";
  opt.name = kName;
  opt.name_size = sizeof(kName) - 1;
  opt.type = PJRT_NamedValue_kInt64;
  opt.int64_value = cpu_device_count;
  opt.value_size = 1;

  PJRT_Client_Create_Args a{};
  a.struct_size = PJRT_Client_Create_Args_STRUCT_SIZE;
  a.create_options = is_cpu ? &opt : nullptr;
  a.num_options = is_cpu ? 1 : 0;
  check(api, api->PJRT_Client_Create(&a), "PJRT_Client_Create");
  core_->client = a.client;

  PJRT_Client_PlatformName_Args p{};
  p.struct_size = PJRT_Client_PlatformName_Args_STRUCT_SIZE;
  p.client = core_->client;
  check(api, api->PJRT_Client_PlatformName(&p), "PJRT_Client_PlatformName");
  platform_.assign(p.platform_name, p.platform_name_size);

  PJRT_Client_AddressableDevices_Args d{};
  d.struct_size = PJRT_Client_AddressableDevices_Args_STRUCT_SIZE;
  d.client = core_->client;
  check(api, api->PJRT_Client_AddressableDevices(&d), "PJRT_Client_AddressableDevices");
  for (size_t i = 0; i < d.num_addressable_devices; ++i) {
    PJRT_Device* dev = d.addressable_devices[i];
    PJRT_Device_GetDescription_Args g{};
    g.struct_size = PJRT_Device_GetDescription_Args_STRUCT_SIZE;
    g.device = dev;
    check(api, api->PJRT_Device_GetDescription(&g), "PJRT_Device_GetDescription");
    PJRT_DeviceDescription_Id_Args idq{};
    idq.struct_size = PJRT_DeviceDescription_Id_Args_STRUCT_SIZE;
    idq.device_description = g.device_description;
    check(api, api->PJRT_DeviceDescription_Id(&idq), "PJRT_DeviceDescription_Id");
    PJRT_DeviceDescription_Kind_Args k{};
    k.struct_size = PJRT_DeviceDescription_Kind_Args_STRUCT_SIZE;
    k.device_description = g.device_description;
    check(api, api->PJRT_DeviceDescription_Kind(&k), "PJRT_DeviceDescription_Kind");
    devices_.push_back({dev, idq.id, std::string(k.device_kind, k.device_kind_size)});
  }
}

BufferPtr Client::buffer_from_host(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims,
                                   int device) const {
  const PJRT_Api* api = core_->api;
  PJRT_Client_BufferFromHostBuffer_Args a{};
  a.struct_size = PJRT_Client_BufferFromHostBuffer_Args_STRUCT_SIZE;
  a.client = core_->client;
  a.data = data;
  a.type = type;
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.host_buffer_semantics = PJRT_HostBufferSemantics_kImmutableOnlyDuringCall;
  a.device = devices_.at(device).device;
  check(api, api->PJRT_Client_BufferFromHostBuffer(&a), "PJRT_Client_BufferFromHostBuffer");
  // The copy is complete when the call returns (kImmutableOnlyDuringCall);
  // the event only needs destroying.
  Event done(api, a.done_with_host_buffer);
  return std::make_shared<Buffer>(core_, a.buffer);
}

std::shared_ptr<Executable> Client::compile(const std::string& mlir_text, const CompileOptions& opts) const {
  const PJRT_Api* api = core_->api;
  std::string options = opts.serialize();
  static const char kFormat[] = "mlir";
  PJRT_Program prog{};
  prog.struct_size = PJRT_Program_STRUCT_SIZE;
  prog.code = const_cast<char*>(mlir_text.data());
  prog.code_size = mlir_text.size();
  prog.format = kFormat;
  prog.format_size = sizeof(kFormat) - 1;
  PJRT_Client_Compile_Args a{};
  a.struct_size = PJRT_Client_Compile_Args_STRUCT_SIZE;
  a.client = core_->client;
  a.program = &prog;
  a.compile_options = options.data();
  a.compile_options_size = options.size();
  check(api, api->PJRT_Client_Compile(&a), "PJRT_Client_Compile");
  return std::make_shared<Executable>(core_, a.executable);
}

std::shared_ptr<Executable> Client::deserialize(const std::string& bytes) const {
  const PJRT_Api* api = core_->api;
  PJRT_Executable_DeserializeAndLoad_Args a{};
  a.struct_size = PJRT_Executable_DeserializeAndLoad_Args_STRUCT_SIZE;
  a.client = core_->client;
  a.serialized_executable = bytes.data();
  a.serialized_executable_size = bytes.size();
  check(api, api->PJRT_Executable_DeserializeAndLoad(&a), "PJRT_Executable_DeserializeAndLoad");
  return std::make_shared<Executable>(core_, a.loaded_executable);
}

std::pair<int64_t, int64_t> Client::memory_stats(PJRT_Device* device) const {
  const PJRT_Api* a = api();
  PJRT_Device_MemoryStats_Args m{};
  m.struct_size = PJRT_Device_MemoryStats_Args_STRUCT_SIZE;
  m.device = device;
  if (!take_error(a, a->PJRT_Device_MemoryStats(&m)).empty() || !m.bytes_limit_is_set) return {-1, -1};
  return {m.bytes_in_use, m.bytes_limit};
}

}  // namespace torch_tpu::runtime
