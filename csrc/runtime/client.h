// PJRT client: devices, host->device transfers, compilation, deserialisation.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/buffer.h"
#include "runtime/compile_options.h"
#include "runtime/executable.h"
#include "runtime/plugin.h"

namespace torch_tpu::runtime {

struct DeviceInfo {
  PJRT_Device* device;
  int id;
  std::string kind;  // e.g. "cpu", "TPU v5 lite", "NVIDIA H200"
};

class Client {
 public:
  // `cpu_device_count` is passed only to the XLA:CPU plugin (other plugins
  // reject unknown create options).
  Client(const Plugin& plugin, int cpu_device_count = 1);

  const PJRT_Api* api() const { return core_->api; }
  const ClientRef& core() const { return core_; }
  const std::string& platform_name() const { return platform_; }
  // Identity of the plugin binary (for cache keys).
  const std::string& plugin_identity() const { return plugin_identity_; }
  const std::vector<DeviceInfo>& devices() const { return devices_; }

  // Copies `data` (dense row-major) into a new device buffer. The host memory
  // may be reused as soon as this returns.
  BufferPtr buffer_from_host(const void* data, PJRT_Buffer_Type type, const std::vector<int64_t>& dims,
                             int device) const;
  // Compiles a StableHLO module given as MLIR text.
  std::shared_ptr<Executable> compile(const std::string& mlir_text, const CompileOptions& opts) const;
  std::shared_ptr<Executable> deserialize(const std::string& bytes) const;
  // The plugin's (bytes in use, bytes limit) for `device`, or {-1, -1} when
  // it does not report a limit (XLA:CPU uses host memory).
  std::pair<int64_t, int64_t> memory_stats(PJRT_Device* device) const;

 private:
  ClientRef core_;
  std::string platform_;
  std::string plugin_identity_;
  std::vector<DeviceInfo> devices_;
};

}  // namespace torch_tpu::runtime
