#include "runtime/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace torch_tpu::log {
namespace {

Level threshold() {
  static Level t = [] {
    const char* v = std::getenv("TORCH_TPU_LOG_LEVEL");
    if (!v || !*v) return Level::kWarning;
    if (!strcasecmp(v, "DEBUG")) return Level::kDebug;
    if (!strcasecmp(v, "INFO")) return Level::kInfo;
    if (!strcasecmp(v, "ERROR")) return Level::kError;
    return Level::kWarning;
  }();
  return t;
}

const char* name(Level l) {
  switch (l) {
    case Level::kDebug:
      return "DEBUG";
    case Level::kInfo:
      return "INFO";
    case Level::kWarning:
      return "WARNING";
    case Level::kError:
      return "ERROR";
  }
  return "?";
}

}  // namespace

bool enabled(Level l) { return static_cast<int>(l) >= static_cast<int>(threshold()); }

void write(Level l, const std::string& message) {
  if (!enabled(l)) return;
  std::fprintf(stderr, "[torch_tpu %s] %s\n", name(l), message.c_str());
}

}  // namespace torch_tpu::log
