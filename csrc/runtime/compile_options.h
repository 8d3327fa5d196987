// Hand-encoded xla.CompileOptionsProto bytes (protobuf wire format), so the
// runtime needs no libprotobuf. An empty options string aborts XLA, so every
// compile goes through here.
#pragma once
#include <cstdint>
#include <string>

namespace torch_tpu::runtime {

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  bool use_spmd_partitioning = false;
  // Portable: no device baked in; run with an explicit execute device.
  bool portable = true;

  std::string serialize() const;
};

}  // namespace torch_tpu::runtime
