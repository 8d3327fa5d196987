// The compilation cache. Tier 1 is in memory, keyed by CacheKey. On a miss
// the caller's `emit` produces StableHLO text, which is compiled once.
// Further tiers (disk, shared) plug in behind the same interface.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "compile/cache_key.h"
#include "runtime/client.h"

namespace torch_tpu {

struct CompiledProgram {
  std::shared_ptr<runtime::Executable> exe;
  std::string name;  // op or graph name, for reports
  int64_t compile_ns = 0;
  std::atomic<int64_t> hits{0};
};
using ProgramPtr = std::shared_ptr<CompiledProgram>;

class ExecutableCache {
 public:
  static ExecutableCache& get();

  // Fast path: returns null on a miss.
  ProgramPtr lookup(const CacheKey& key);
  // Compiles `emit()` and inserts it (or returns the entry another thread
  // inserted meanwhile).
  ProgramPtr compile_and_insert(const runtime::Client& client, const CacheKey& key,
                                const std::string& name,
                                const std::function<std::string()>& emit);
  size_t size();
  void clear();

 private:
  std::mutex mu_;
  std::unordered_map<CacheKey, ProgramPtr, CacheKeyHash> map_;
};

}  // namespace torch_tpu
