// Hand-encoded xla.CompileOptionsProto bytes (protobuf wire format), so the
// runtime needs no libprotobuf. An empty options string aborts XLA, so every
// compile goes through here.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace torch_tpu::runtime {

struct CompileOptions {
  int64_t num_replicas = 1;
  int64_t num_partitions = 1;
  bool use_spmd_partitioning = false;
  // Portable: no device baked in; run with an explicit execute device.
  bool portable = true;
  // Replica r runs on the device with id device_assignment[r] (global PJRT
  // device ids; one computation per replica). Empty: XLA's default.
  std::vector<int64_t> device_assignment;
  // SPMD: partition p runs on the device with id spmd_devices[p] (one
  // replica, num_partitions = size). XLA's partitioner splits the program by
  // the sharding annotations in it, and chooses the shardings of results that
  // carry none (read back with Executable::output_shardings).
  std::vector<int64_t> spmd_devices;
  // SPMD: the module's shardings are Shardy's (`sdy.sharding`), not GSPMD's.
  bool shardy = false;
  // XLA debug options by flag name (CompileOptionsProto.env_option_overrides,
  // applied on top of XLA's defaults): "xla_backend_optimization_level" -> 1.
  std::vector<std::pair<std::string, int64_t>> int_overrides;
  std::vector<std::pair<std::string, bool>> bool_overrides;

  // From TORCH_TPU_XLA_OPTIONS ("name=value,name=value"; true/false or an
  // integer). Empty when unset.
  static CompileOptions from_env();

  std::string serialize() const;
};

}  // namespace torch_tpu::runtime
