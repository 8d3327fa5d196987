// Process-wide device state: the chosen PJRT plugin and client, created
// lazily on first use. Also the torch <-> IR/PJRT dtype mapping.
#pragma once
#include <c10/core/ScalarType.h>

#include <string>
#include <utility>

#include "ir/types.h"
#include "runtime/client.h"

namespace torch_tpu {

struct DeviceConfig {
  runtime::PluginCandidates candidates;  // filled by the Python loader
  int cpu_device_count = 1;
};

// Set before first use (the Python loader does this at import).
void configure(const DeviceConfig& cfg);
// The client; initialises the runtime on first call. Throws a clear
// RuntimeError when no plugin can be loaded.
runtime::Client& client();
bool runtime_initialized();
// (free, total) bytes of tpu:`index`: the plugin's figures where it reports
// a limit, else the host's available and total memory (XLA:CPU).
std::pair<size_t, size_t> device_memory_info(int index);
int device_count();  // never throws; 0 if the runtime cannot start
const runtime::PluginChoice& plugin_choice();
PJRT_Device* pjrt_device(int index);

ir::ElemType to_elem(c10::ScalarType t);  // throws for unsupported dtypes
PJRT_Buffer_Type to_pjrt(ir::ElemType t);
bool is_supported(c10::ScalarType t);

}  // namespace torch_tpu
