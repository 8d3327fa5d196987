#include "compile/executable_cache.h"

#include <chrono>
#include <cstdio>

#include "compile/metrics.h"

namespace torch_tpu {

std::string CacheKey::hex() const {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
  return buf;
}

ExecutableCache& ExecutableCache::get() {
  static auto* c = new ExecutableCache();
  return *c;
}

ProgramPtr ExecutableCache::lookup(const CacheKey& key) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  it->second->hits.fetch_add(1, std::memory_order_relaxed);
  return it->second;
}

ProgramPtr ExecutableCache::compile_and_insert(const runtime::Client& client, const CacheKey& key,
                                               const std::string& name,
                                               const std::function<std::string()>& emit) {
  std::string text = emit();
  auto t0 = std::chrono::steady_clock::now();
  auto exe = client.compile(text, runtime::CompileOptions{});
  int64_t ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now() - t0).count();
  bump(metrics().compiles);
  bump(metrics().compile_ns, ns);
  auto prog = std::make_shared<CompiledProgram>();
  prog->exe = std::move(exe);
  prog->name = name;
  prog->compile_ns = ns;
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, inserted] = map_.emplace(key, prog);
  return it->second;
}

size_t ExecutableCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return map_.size();
}

void ExecutableCache::clear() {
  std::lock_guard<std::mutex> lock(mu_);
  map_.clear();
}

}  // namespace torch_tpu
