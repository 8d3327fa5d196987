#include "runtime/compile_options.h"

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

}  // namespace

std::string CompileOptions::serialize() const {
  // ExecutableBuildOptionsProto: num_replicas = 4, num_partitions = 5,
  // use_spmd_partitioning = 6.
  std::string build;
  put_tag(build, 4, 0);
  put_varint(build, num_replicas);
  put_tag(build, 5, 0);
  put_varint(build, num_partitions);
  if (use_spmd_partitioning) {
    put_tag(build, 6, 0);
    put_varint(build, 1);
  }
  // CompileOptionsProto: executable_build_options = 3,
  // compile_portable_executable = 4.
  std::string out;
  if (portable) {
    put_tag(out, 4, 0);
    put_varint(out, 1);
  }
  put_tag(out, 3, 2);
  put_varint(out, build.size());
  out += build;
  return out;
}

}  // namespace torch_tpu::runtime
