#include "aten/device.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "runtime/worker_threads.h"

namespace torch_tpu {
namespace {

std::mutex g_mu;
DeviceConfig g_cfg;
runtime::Client* g_client = nullptr;  // leaked at exit on purpose: XLA's
                                      // threads outlive static destructors
runtime::PluginChoice g_choice;
std::string g_init_error;

// Nice levels below the Python thread for XLA:CPU's worker threads.
int cpu_worker_nice() {
  const char* v = std::getenv("TORCH_TPU_CPU_WORKER_NICE");
  if (v == nullptr || *v == '\0') return 5;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  TORCH_CHECK(end != v && *end == '\0' && n >= 0 && n <= 19,
              "TORCH_TPU_CPU_WORKER_NICE must be an integer from 0 to 19, got '", v, "'");
  return static_cast<int>(n);
}

}  // namespace

void configure(const DeviceConfig& cfg) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_cfg = cfg;
}

runtime::Client& client() {
  if (g_client) return *g_client;
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_client) return *g_client;
  if (!g_init_error.empty()) TORCH_CHECK(false, g_init_error);
  try {
    // XLA:CPU sizes its thread pool from PJRT_NPROC; default it to the
    // cores torch itself uses so the two pools don't oversubscribe.
    g_choice = runtime::choose_plugin(g_cfg.candidates);
    auto& plugin = runtime::Plugin::load(g_choice.path);
    const int worker_nice = cpu_worker_nice();
    const std::vector<int> before = runtime::thread_ids();
    g_client = new runtime::Client(plugin, g_cfg.cpu_device_count);
    std::vector<int> workers = runtime::new_threads(before, runtime::thread_ids());
    // On XLA:CPU the "device" is this machine's cores, and the client's
    // worker threads (its Eigen pools) compete with the Python thread that
    // launches their work. Ranked below it, they take the cores whenever
    // Python waits, but slow less the Python a step is waiting for
    // (docs/environment_variables.md, TORCH_TPU_CPU_WORKER_NICE).
    if (g_client->platform_name() == "cpu") runtime::lower_priority(workers, worker_nice);
    runtime::set_plugin_threads(std::move(workers));
  } catch (const std::exception& e) {
    g_init_error = std::string("torch_tpu could not start the PJRT runtime: ") + e.what();
    TORCH_CHECK(false, g_init_error);
  }
  return *g_client;
}

bool runtime_initialized() { return g_client != nullptr; }

int device_count() {
  try {
    return static_cast<int>(client().devices().size());
  } catch (...) {
    return 0;
  }
}

const runtime::PluginChoice& plugin_choice() {
  client();
  return g_choice;
}

PJRT_Device* pjrt_device(int index) {
  auto& devs = client().devices();
  TORCH_CHECK(index >= 0 && index < static_cast<int>(devs.size()), "tpu device index ", index, " is out of range (",
              devs.size(), " devices)");
  return devs[index].device;
}

std::pair<size_t, size_t> device_memory_info(int index) {
  auto [used, limit] = client().memory_stats(pjrt_device(index));
  if (limit > 0) return {static_cast<size_t>(std::max<int64_t>(limit - used, 0)), static_cast<size_t>(limit)};
  // XLA:CPU buffers live in host memory.
  size_t total = 0, avail = 0;
  if (std::FILE* f = std::fopen("/proc/meminfo", "r")) {
    char key[64];
    unsigned long long kb;
    while (std::fscanf(f, "%63s %llu kB", key, &kb) == 2) {
      if (std::strcmp(key, "MemTotal:") == 0) total = kb * 1024;
      if (std::strcmp(key, "MemAvailable:") == 0) avail = kb * 1024;
    }
    std::fclose(f);
  }
  return {avail, total};
}

bool is_supported(c10::ScalarType t) {
  switch (t) {
    case c10::kBool:
    case c10::kByte:
    case c10::kChar:
    case c10::kShort:
    case c10::kInt:
    case c10::kLong:
    case c10::kHalf:
    case c10::kBFloat16:
    case c10::kFloat:
    case c10::kDouble:
    case c10::kUInt64:  // hash_tensor's result; few ops take it, as on CPU
    case c10::kComplexFloat:
    case c10::kComplexDouble:
      return true;
    default:
      return false;
  }
}

ir::ElemType to_elem(c10::ScalarType t) {
  switch (t) {
    case c10::kBool:
      return ir::ElemType::kPred;
    case c10::kByte:
      return ir::ElemType::kU8;
    case c10::kChar:
      return ir::ElemType::kS8;
    case c10::kShort:
      return ir::ElemType::kS16;
    case c10::kInt:
      return ir::ElemType::kS32;
    case c10::kLong:
      return ir::ElemType::kS64;
    case c10::kHalf:
      return ir::ElemType::kF16;
    case c10::kBFloat16:
      return ir::ElemType::kBF16;
    case c10::kFloat:
      return ir::ElemType::kF32;
    case c10::kDouble:
      return ir::ElemType::kF64;
    case c10::kUInt64:
      return ir::ElemType::kU64;
    case c10::kComplexFloat:
      return ir::ElemType::kC64;
    case c10::kComplexDouble:
      return ir::ElemType::kC128;
    case c10::kComplexHalf:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t, " (XLA has no complex32; use complex64)");
    default:
      TORCH_CHECK_TYPE(false, "tpu does not support dtype ", t);
  }
}

PJRT_Buffer_Type to_pjrt(ir::ElemType t) {
  switch (t) {
    case ir::ElemType::kPred:
      return PJRT_Buffer_Type_PRED;
    case ir::ElemType::kS8:
      return PJRT_Buffer_Type_S8;
    case ir::ElemType::kS16:
      return PJRT_Buffer_Type_S16;
    case ir::ElemType::kS32:
      return PJRT_Buffer_Type_S32;
    case ir::ElemType::kS64:
      return PJRT_Buffer_Type_S64;
    case ir::ElemType::kU8:
      return PJRT_Buffer_Type_U8;
    case ir::ElemType::kU32:
      return PJRT_Buffer_Type_U32;
    case ir::ElemType::kU64:
      return PJRT_Buffer_Type_U64;
    case ir::ElemType::kF16:
      return PJRT_Buffer_Type_F16;
    case ir::ElemType::kBF16:
      return PJRT_Buffer_Type_BF16;
    case ir::ElemType::kF32:
      return PJRT_Buffer_Type_F32;
    case ir::ElemType::kF64:
      return PJRT_Buffer_Type_F64;
    case ir::ElemType::kC64:
      return PJRT_Buffer_Type_C64;
    case ir::ElemType::kC128:
      return PJRT_Buffer_Type_C128;
  }
  return PJRT_Buffer_Type_INVALID;
}

}  // namespace torch_tpu
