// C++-side logging, gated by TORCH_TPU_LOG_LEVEL (DEBUG, INFO, WARNING,
// ERROR; default WARNING) - the same variable the Python "torch_tpu" logger
// reads. Lines go to stderr as "[torch_tpu LEVEL] message".
#pragma once
#include <string>

namespace torch_tpu::log {

enum class Level { kDebug = 10, kInfo = 20, kWarning = 30, kError = 40 };

bool enabled(Level l);
void write(Level l, const std::string& message);

}  // namespace torch_tpu::log
