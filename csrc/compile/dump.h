// Program dumps (TORCH_TPU_DUMP_DIR) and the record of compiles behind
// torch_tpu.debug.compile_report(). When the variable names a directory,
// every program this process compiles or loads from a persistent tier is
// written there: its StableHLO, the ATen ops it came from with the user's
// Python line for each, its cache key and its compile time.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "compile/cache_key.h"

namespace torch_tpu {

// The dump directory; empty when dumping is off (read once).
const std::string& dump_dir();
inline bool dumping() { return !dump_dir().empty(); }

// Where the user's code is ("file:line in fn"), from a hook the Python layer
// installs; empty without one. Called only while dumping.
using LocationHook = std::string (*)();
void set_location_hook(LocationHook h);
std::string user_location();

// What the next program built on this thread came from: one line per ATen
// op ("aten_op  at file:line"). Drivers set it before a cache lookup.
void set_program_origin(std::string origin);
std::string take_program_origin();

// Called by the executable cache for every program it compiles (tier
// "compiled") or loads ("disk", "shared"): records it, and dumps it while
// dumping.
void note_program(std::string_view name, const CacheKey& key, const std::string& text, int64_t compile_ns,
                  std::string_view tier);

// Profiler spans for work in this layer (which has no torch): the record
// layer installs hooks that open and close torch.profiler ranges. A span
// object is whatever `begin` returns; null when no profiler is recording.
struct SpanHooks {
  void* (*begin)(const char* name) = nullptr;
  void (*end)(void* span) = nullptr;
};
void set_span_hooks(SpanHooks h);
class Span {
 public:
  explicit Span(const char* name);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  void* span_ = nullptr;
};

// One program compiled or loaded from a persistent tier, for
// compile_report(): its op (or graph) name, the argument and result types of
// its entry function, a digest of its body, the compile time (when it was
// first compiled, for a loaded one) and where it came from. The newest 4096
// are kept.
struct CompileRecord {
  std::string name;
  std::string signature;
  uint64_t body_digest = 0;
  int64_t compile_ns = 0;
  std::string key;
  std::string tier;  // "compiled", "disk" or "shared"
};
std::vector<CompileRecord> compile_records();
void clear_compile_records();

}  // namespace torch_tpu
