// RAII wrapper over PJRT_LoadedExecutable: run, inspect, serialise.
#pragma once
#include <string>
#include <vector>

#include "runtime/buffer.h"

namespace torch_tpu::runtime {

class Executable {
 public:
  Executable(ClientRef client, PJRT_LoadedExecutable* exe);
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;
  ~Executable();

  size_t num_outputs() const { return num_outputs_; }
  // Enqueues one execution on `device`; returns at once with output buffers
  // whose ready events fire when the work is done. A parameter the program
  // aliases to an output is donated (its buffer is consumed) unless its
  // index is in `keep`.
  std::vector<BufferPtr> execute(const std::vector<PJRT_Buffer*>& args, PJRT_Device* device,
                                 const std::vector<int64_t>& keep = {}) const;
  // Multi-device (replicated) execution: args[d][i] for device d.
  // `keep`: as for execute(), per argument index on every device.
  std::vector<std::vector<BufferPtr>> execute_replicated(const std::vector<std::vector<PJRT_Buffer*>>& args,
                                                         const std::vector<int64_t>& keep = {}) const;
  // The compiled module after XLA's passes, as a serialised HloModuleProto
  // (for an SPMD program: the partitioned module with its result shardings).
  // Plugins may wrap it in an HloModuleProtoWithConfig: see `format`.
  std::string optimized_program(std::string* format = nullptr) const;
  // Bytes accepted by Client::deserialize on the same plugin and host.
  // Returns "" and sets `*why` when the plugin cannot serialise this
  // executable. That is a normal outcome (the program stays memory-only), so
  // it is a return value, not an exception (see docs/testing.md).
  std::string serialize(std::string* why = nullptr) const;

 private:
  ClientRef client_;
  PJRT_LoadedExecutable* exe_;
  PJRT_Executable* desc_ = nullptr;
  size_t num_outputs_ = 0;
};

}  // namespace torch_tpu::runtime
