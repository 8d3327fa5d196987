#include "runtime/compile_options.h"

#include <cstdlib>
#include <stdexcept>

namespace torch_tpu::runtime {
namespace {

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7f) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_tag(std::string& out, int field, int wire_type) {
  put_varint(out, (static_cast<uint64_t>(field) << 3) | wire_type);
}

void put_bytes(std::string& out, int field, const std::string& bytes) {
  put_tag(out, field, 2);
  put_varint(out, bytes.size());
  out += bytes;
}

// One env_option_overrides map entry: key = 1 (the flag name), value = 2
// (OptionOverrideProto: bool_field = 2, int_field = 3).
void put_override(std::string& out, const std::string& name, int value_field, int64_t value) {
  std::string val;
  put_tag(val, value_field, 0);
  put_varint(val, static_cast<uint64_t>(value));
  std::string entry;
  put_bytes(entry, 1, name);
  put_bytes(entry, 2, val);
  put_bytes(out, 7, entry);
}

}  // namespace

std::string CompileOptions::serialize() const {
  const bool spmd = !spmd_devices.empty();
  // ExecutableBuildOptionsProto: num_replicas = 4, num_partitions = 5,
  // use_spmd_partitioning = 6, allow_spmd_sharding_propagation_to_output =
  // 12 (repeated bool; one value stands for every result).
  std::string build;
  put_tag(build, 4, 0);
  put_varint(build, spmd ? 1 : num_replicas);
  put_tag(build, 5, 0);
  put_varint(build, spmd ? spmd_devices.size() : num_partitions);
  if (use_spmd_partitioning || spmd) {
    put_tag(build, 6, 0);
    put_varint(build, 1);
  }
  if (spmd) put_bytes(build, 12, std::string(1, '\x01'));
  // use_shardy_partitioner = 19.
  if (spmd && shardy) {
    put_tag(build, 19, 0);
    put_varint(build, 1);
  }
  // ExecutableBuildOptionsProto.device_assignment = 9: DeviceAssignmentProto
  // {replica_count = 1, computation_count = 2, computation_devices = 3
  // {replica_device_ids = 1 (repeated int64)}}.
  if (spmd) {
    // One replica; computation p (partition p) on spmd_devices[p].
    std::string da;
    put_tag(da, 1, 0);
    put_varint(da, 1);
    put_tag(da, 2, 0);
    put_varint(da, spmd_devices.size());
    for (int64_t d : spmd_devices) {
      std::string ids;
      put_tag(ids, 1, 0);
      put_varint(ids, static_cast<uint64_t>(d));
      put_bytes(da, 3, ids);
    }
    put_bytes(build, 9, da);
  } else if (!device_assignment.empty()) {
    std::string ids;
    for (int64_t d : device_assignment) {
      put_tag(ids, 1, 0);
      put_varint(ids, static_cast<uint64_t>(d));
    }
    std::string da;
    put_tag(da, 1, 0);
    put_varint(da, device_assignment.size());
    put_tag(da, 2, 0);
    put_varint(da, 1);
    put_bytes(da, 3, ids);
    put_bytes(build, 9, da);
  }
  // CompileOptionsProto: executable_build_options = 3,
  // compile_portable_executable = 4.
  std::string out;
  if (portable && !spmd) {
    put_tag(out, 4, 0);
    put_varint(out, 1);
  }
  put_tag(out, 3, 2);
  put_varint(out, build.size());
  out += build;
  // CompileOptionsProto: env_option_overrides = 7.
  for (const auto& [name, v] : int_overrides) put_override(out, name, 3, v);
  for (const auto& [name, v] : bool_overrides) put_override(out, name, 2, v ? 1 : 0);
  return out;
}

CompileOptions CompileOptions::from_env() {
  CompileOptions o;
  const char* env = std::getenv("TORCH_TPU_XLA_OPTIONS");
  if (!env || !*env) return o;
  std::string spec(env);
  size_t start = 0;
  while (start < spec.size()) {
    size_t end = spec.find(',', start);
    if (end == std::string::npos) end = spec.size();
    std::string item = spec.substr(start, end - start);
    start = end + 1;
    if (item.empty()) continue;
    size_t eq = item.find('=');
    if (eq == std::string::npos)
      throw std::invalid_argument("TORCH_TPU_XLA_OPTIONS: expected name=value, got '" + item + "'");
    std::string name = item.substr(0, eq), value = item.substr(eq + 1);
    if (value == "true" || value == "false") {
      o.bool_overrides.emplace_back(name, value == "true");
    } else {
      char* rest = nullptr;
      long long v = std::strtoll(value.c_str(), &rest, 10);
      if (value.empty() || *rest)
        throw std::invalid_argument("TORCH_TPU_XLA_OPTIONS: " + name + " needs true, false or an integer, got '" +
                                    value + "'");
      o.int_overrides.emplace_back(name, v);
    }
  }
  return o;
}

}  // namespace torch_tpu::runtime
