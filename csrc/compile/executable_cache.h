// The compilation cache, in tiers: memory -> disk -> shared directory.
// Lookups go down the tiers; a hit fills the faster ones. On a full miss the
// caller's `emit` produces StableHLO text, which is compiled once and
// written (in the background) to the persistent tiers.
//
// Persistent entries are keyed by the op's metadata key mixed with an
// environment key: plugin identity, compile options, platform and device
// kind, host CPU features, torch_tpu version and cache format version - so
// a changed plugin or CPU can never load a stale executable.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "compile/background.h"
#include "compile/cache_key.h"
#include "compile/disk_tier.h"
#include "runtime/client.h"

namespace torch_tpu {

struct CompiledProgram {
  std::shared_ptr<runtime::Executable> exe;
  std::string name;  // op or graph name, for reports
  int64_t compile_ns = 0;
  std::atomic<int64_t> hits{0};
  int64_t last_use = 0;  // the cache's use counter at the last hit (under its lock)
};
using ProgramPtr = std::shared_ptr<CompiledProgram>;

struct TierSettings {
  std::string disk_dir;    // "" = off
  std::string shared_dir;  // "" = off
  int64_t max_bytes = 0;   // 0 = unlimited
};

// Programs the memory tier keeps (TORCH_TPU_CACHE_MAX_PROGRAMS, default
// 8192). Each XLA:CPU program maps about five memory regions for its JIT
// code, and a process may hold only vm.max_map_count (65,530) of them, so an
// unbounded tier crashed a process after about 14,000 distinct programs. The
// least recently used programs are dropped past the cap; the disk tier
// brings them back without compiling.
int64_t max_programs_from_env();
// From TORCH_TPU_CACHE_DIR (default ~/.cache/torch_tpu, "disabled" = off),
// TORCH_TPU_SHARED_CACHE_DIR and TORCH_TPU_CACHE_MAX_BYTES (default 4 GiB).
TierSettings tier_settings_from_env();

class ExecutableCache {
 public:
  static ExecutableCache& get();

  // Fast path, memory only: returns null on a miss.
  ProgramPtr lookup(const CacheKey& key);
  // Slow path: persistent tiers, then compiling `emit()`.
  //
  // Tiered compiles (`tiered`, for single-op eager programs where
  // tiered_compile_enabled()): a miss in every tier is compiled first with
  // quick options (no LLVM optimisation, loop emitters: about half the
  // compile time, about half the speed), and at once again with the full
  // options on a background thread. The full program replaces the quick one
  // in memory when ready, and only it is written to the persistent tiers.
  //
  // `replica_devices` (cross-device collectives): the program runs as one
  // replica per listed PJRT device id, replica r on replica_devices[r].
  // With `spmd`, they are the partitions of one SPMD program instead.
  ProgramPtr compile_and_insert(const runtime::Client& client, const CacheKey& key, const std::string& name,
                                const std::function<std::string()>& emit, bool tiered = false,
                                const std::vector<int64_t>* replica_devices = nullptr, bool spmd = false);
  // Whether tiered compiles are on: TORCH_TPU_TIERED_COMPILE=1 (opt-in), in
  // a process that is not one of several ranks (WORLD_SIZE <= 1).
  bool tiered_compile_enabled();
  // Blocks until the background compiles have ended (timeout_ms < 0: no
  // limit); returns whether they have. flush() waits for them too.
  bool wait_background(int64_t timeout_ms = -1);
  int64_t background_pending() { return background_.pending(); }
  // Replaces the persistent tiers. Not while compiles run on other threads
  // (the Python binding drains the compile pool first).
  void configure(const TierSettings& s);
  TierSettings settings();
  DiskTier* disk();
  DiskTier* shared();
  void flush();
  size_t size();
  void clear();

  std::atomic<int64_t> mem_requests{0}, mem_hits{0}, mem_misses{0}, load_failures{0};
  // Compiled programs the plugin could not serialise (kept in memory only).
  std::atomic<int64_t> unserializable{0};
  std::atomic<int64_t> evictions{0};
  // Times the memory tier shrank because the process neared vm.max_map_count.
  std::atomic<int64_t> mapping_evictions{0};
  int64_t max_programs() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_programs_;
  }
  // Time spent getting executables from the persistent tiers (read + deserialise).
  std::atomic<int64_t> load_ns{0};

 private:
  void ensure_environment(const runtime::Client& client);
  std::mutex mu_;
  std::unordered_map<CacheKey, ProgramPtr, CacheKeyHash> map_;
  int64_t use_counter_ = 0;  // under mu_
  int64_t max_programs_ = max_programs_from_env();
  void evict_locked();
  // Every kMappingCheckEvery inserts, once the tier holds at least
  // kMappingCheckMinPrograms programs, the process's memory mappings are
  // counted (a few ms at tens of thousands) and the tier shrinks if they
  // near vm.max_map_count: a process past it fails in the JIT ("Cannot
  // allocate memory") or crashes in the C++ unwinder.
  static constexpr int64_t kMappingCheckEvery = 32;
  static constexpr size_t kMappingCheckMinPrograms = 256;
  int64_t inserts_ = 0;  // under mu_
  void bound_mappings();
  std::mutex tiers_mu_;
  std::atomic<bool> tiers_configured_{false};
  void configure_once();
  void configure_locked(const TierSettings& s);  // under tiers_mu_
  TierSettings settings_;
  std::unique_ptr<DiskTier> disk_, shared_;
  std::string env_desc_;
  CacheKey env_key_{};
  bool env_ready_ = false;
  std::atomic<bool> warned_load_{false}, warned_serialize_{false};
  void store_persistent(DiskTier* const tiers[2], const CacheKey& pkey, const std::string& name,
                        const runtime::Executable& exe, int64_t ns);
  void tier_up(const runtime::Client* client, CacheKey key, CacheKey pkey, std::string name, std::string text,
               ProgramPtr quick);
  int tiered_ = -1;  // -1: not decided yet (under tiers_mu_)
  static constexpr int64_t kTierUpQuietMs = 250;
  BackgroundWorker background_{kTierUpQuietMs};
};

}  // namespace torch_tpu
