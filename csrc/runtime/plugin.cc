#include "runtime/plugin.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>

#include "runtime/eh_frame_guard.h"
#include "runtime/error.h"

namespace torch_tpu::runtime {
namespace {

bool exists(const std::string& p) {
  struct stat st;
  return !p.empty() && ::stat(p.c_str(), &st) == 0;
}

// A TPU VM exposes its chips as /dev/accel* (v2-v4) or /dev/vfio (v5+).
bool tpu_present() { return exists("/dev/accel0") || exists("/dev/vfio/0") || exists("/dev/vfio/1"); }

bool gpu_present() { return exists("/dev/nvidia0") || exists("/proc/driver/nvidia/version"); }

std::string render(const PJRT_NamedValue& v) {
  std::ostringstream os;
  switch (v.type) {
    case PJRT_NamedValue_kString:
      os << std::string(v.string_value, v.value_size);
      break;
    case PJRT_NamedValue_kInt64:
      os << v.int64_value;
      break;
    case PJRT_NamedValue_kInt64List:
      for (size_t i = 0; i < v.value_size; ++i) os << (i ? "." : "") << v.int64_array_value[i];
      break;
    case PJRT_NamedValue_kFloat:
      os << v.float_value;
      break;
    case PJRT_NamedValue_kBool:
      os << (v.bool_value ? "true" : "false");
      break;
    default:
      os << "?";
  }
  return os.str();
}

}  // namespace

PluginChoice choose_plugin(const PluginCandidates& c) {
  if (const char* env = std::getenv("TORCH_TPU_PJRT_PLUGIN"); env && *env) {
    if (!exists(env))
      throw std::runtime_error(std::string("TORCH_TPU_PJRT_PLUGIN points to '") + env +
                               "', which does not exist. Set it to the path of a PJRT plugin .so "
                               "(one that exports GetPjrtApi), or unset it to use the default.");
    return {env, "env", "TORCH_TPU_PJRT_PLUGIN"};
  }
  if (exists(c.tpu) && tpu_present()) return {c.tpu, "tpu", "libtpu and a TPU are present"};
  if (exists(c.cuda) && gpu_present()) return {c.cuda, "cuda", "CUDA PJRT plugin and a GPU are present"};
  if (exists(c.cpu)) return {c.cpu, "cpu", "XLA:CPU plugin (xla-cpu-pjrt)"};
  throw std::runtime_error(
      "torch_tpu found no PJRT plugin. Install the XLA:CPU plugin with "
      "`pip install xla-cpu-pjrt==0.0.1` (or libtpu on a TPU VM), or set "
      "TORCH_TPU_PJRT_PLUGIN to the path of a PJRT plugin .so.");
}

Plugin& Plugin::load(const std::string& path) {
  static std::mutex mu;
  // Leaked on purpose: plugins are never unloaded (see header).
  static auto* loaded = new std::map<std::string, Plugin*>();
  std::lock_guard<std::mutex> lock(mu);

  char* real = ::realpath(path.c_str(), nullptr);
  if (real == nullptr) throw std::runtime_error("PJRT plugin '" + path + "' does not exist.");
  std::string key(real);
  std::free(real);
  if (auto it = loaded->find(key); it != loaded->end()) return *it->second;

  void* handle = ::dlopen(key.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr)
    throw std::runtime_error("could not load PJRT plugin '" + key + "': " + ::dlerror() +
                             ". Reinstall it, or point TORCH_TPU_PJRT_PLUGIN "
                             "at a working plugin.");
  // Before any compile: the plugin's JIT must not leave unwind tables of
  // unmapped code registered (runtime/eh_frame_guard.h).
  const char* guard = std::getenv("TORCH_TPU_EH_FRAME_GUARD");
  if (guard == nullptr || std::string(guard) != "0") guard_eh_frames(handle);
  using GetApiFn = const PJRT_Api* (*)();
  auto get_api = reinterpret_cast<GetApiFn>(::dlsym(handle, "GetPjrtApi"));
  if (get_api == nullptr)
    throw std::runtime_error("'" + key +
                             "' is not a PJRT plugin: it does not export "
                             "GetPjrtApi. Point TORCH_TPU_PJRT_PLUGIN at a "
                             "PJRT plugin .so.");
  const PJRT_Api* api = get_api();
  if (api == nullptr) throw std::runtime_error("GetPjrtApi returned null in '" + key + "'");

  auto* p = new Plugin();
  p->api_ = api;
  p->path_ = key;
  p->major_ = api->pjrt_api_version.major_version;
  p->minor_ = api->pjrt_api_version.minor_version;
  // A plugin older than 0.57 has a different PJRT_Api layout; a different
  // major version is an ABI break. Both would crash on the first call.
  if (p->major_ != PJRT_API_MAJOR || p->minor_ < 57)
    throw std::runtime_error("PJRT plugin '" + key + "' has API version " + std::to_string(p->major_) + "." +
                             std::to_string(p->minor_) + ", but torch_tpu needs " + std::to_string(PJRT_API_MAJOR) +
                             ".57 or newer (built against " + std::to_string(PJRT_API_MAJOR) + "." +
                             std::to_string(PJRT_API_MINOR) + ").");
  if (api->struct_size < offsetof(PJRT_Api, PJRT_Client_Create))
    throw std::runtime_error("PJRT plugin '" + key + "' has a truncated PJRT_Api table.");

  PJRT_Plugin_Initialize_Args init{};
  init.struct_size = PJRT_Plugin_Initialize_Args_STRUCT_SIZE;
  if (TT_PJRT_HAS(api, PJRT_Plugin_Initialize))
    check(api, api->PJRT_Plugin_Initialize(&init), "PJRT_Plugin_Initialize");

  if (TT_PJRT_HAS(api, PJRT_Plugin_Attributes)) {
    PJRT_Plugin_Attributes_Args a{};
    a.struct_size = PJRT_Plugin_Attributes_Args_STRUCT_SIZE;
    if (api->PJRT_Plugin_Attributes(&a) == nullptr) {
      for (size_t i = 0; i < a.num_attributes; ++i) {
        const auto& v = a.attributes[i];
        p->attrs_[std::string(v.name, v.name_size)] = render(v);
      }
    }
  }
  struct stat st{};
  ::stat(key.c_str(), &st);
  std::ostringstream id;
  id << "api=" << p->major_ << "." << p->minor_ << ";size=" << st.st_size << ";mtime=" << st.st_mtime;
  for (auto& [k, v] : p->attrs_) id << ";" << k << "=" << v;
  p->identity_ = id.str();
  (*loaded)[key] = p;
  return *p;
}

}  // namespace torch_tpu::runtime
