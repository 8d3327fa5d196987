// Loading a PJRT plugin (.so exporting GetPjrtApi): selection, ABI checks,
// one-time initialisation. A plugin is loaded once per process and never
// dlclose'd, because XLA keeps static state and threads alive.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "pjrt_c_api.h"

namespace torch_tpu::runtime {

// Where a plugin may come from. The Python layer fills in the paths of
// installed packages; the runtime decides which one to use.
struct PluginCandidates {
  std::string tpu;   // libtpu.so, if installed
  std::string cuda;  // xla_cuda_plugin.so, if installed
  std::string cpu;   // xla_cpu_pjrt.so, if installed
};

struct PluginChoice {
  std::string path;
  std::string kind;    // "tpu", "cuda", "cpu" or "env"
  std::string reason;  // why it was chosen, for logs and errors
};

// Order: $TORCH_TPU_PJRT_PLUGIN, libtpu if a TPU is present, the CUDA plugin
// if a GPU is present, then XLA:CPU. Throws with a how-to-fix message when
// nothing usable is found.
PluginChoice choose_plugin(const PluginCandidates& c);

class Plugin {
 public:
  // Loads (once per realpath), checks the ABI and initialises.
  static Plugin& load(const std::string& path);

  const PJRT_Api* api() const { return api_; }
  const std::string& path() const { return path_; }
  int api_major() const { return major_; }
  int api_minor() const { return minor_; }
  // Plugin attributes (xla_version, stablehlo versions, ...) rendered as text.
  const std::map<std::string, std::string>& attributes() const { return attrs_; }
  // Stable identity of the plugin binary: size + mtime + api version + attrs.
  const std::string& identity() const { return identity_; }

 private:
  Plugin() = default;
  const PJRT_Api* api_ = nullptr;
  std::string path_;
  int major_ = 0, minor_ = 0;
  std::map<std::string, std::string> attrs_;
  std::string identity_;
};

// True when `fn` lies inside the plugin's PJRT_Api and is non-null.
#define TT_PJRT_HAS(api, fn) (offsetof(PJRT_Api, fn) < (api)->struct_size && (api)->fn != nullptr)

}  // namespace torch_tpu::runtime
