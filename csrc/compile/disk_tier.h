// A persistent tier of the compilation cache: one file per executable in a
// directory (the local disk tier, or a shared directory several processes
// or hosts use). Entries are written in the background (temp file + rename,
// so readers never see half a file) and validated on read: a truncated,
// garbage or wrong-version file is a miss, warned about once, and replaced.
// An unwritable or full directory turns the tier off with a warning.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "compile/cache_key.h"

namespace torch_tpu {

struct DiskEntry {
  std::string payload;     // serialised executable
  int64_t compile_ns = 0;  // what compiling it cost (for "time saved")
};

struct DiskEntryInfo {
  std::string file;
  std::string name;
  int64_t bytes = 0;
  int64_t age_s = 0;  // since last use
  int64_t compile_ns = 0;
  int64_t hits = 0;     // loads from this tier, all processes
  bool current = true;  // written for this process's environment
};

class DiskTier {
 public:
  DiskTier(std::string label, std::string dir, int64_t max_bytes);
  ~DiskTier();

  const std::string& label() const { return label_; }
  const std::string& dir() const { return dir_; }
  bool enabled() const { return enabled_.load(); }

  // The environment (plugin, CPU, versions) entries are valid for; its key
  // is part of every file name, its description is stored in the file so a
  // miss can say what changed. Set once before the first lookup.
  void set_environment(const CacheKey& env, std::string description);

  std::optional<DiskEntry> lookup(const CacheKey& key, const std::string& name);
  // Queues a write; returns at once.
  void store(const CacheKey& key, const std::string& name, std::string payload, int64_t compile_ns);
  // Waits until queued writes are on disk.
  void flush();
  std::vector<DiskEntryInfo> list() const;
  // Removes least-recently-used entries until the tier holds <= max_bytes.
  int64_t prune(int64_t max_bytes);
  int64_t clear();

  std::atomic<int64_t> requests{0}, hits{0}, misses{0}, writes{0}, corrupt{0}, saved_ns{0};

 private:
  std::string path_for(const CacheKey& key) const;
  void explain_miss(const CacheKey& key, const std::string& name);
  void writer_loop();
  void write_now(const CacheKey& key, const std::string& name, const std::string& payload, int64_t compile_ns);
  void disable(const std::string& why);
  // (file, bytes, seconds since last use) of every entry, from stat() alone.
  struct Stat {
    std::string file;
    int64_t bytes, age_s;
  };
  std::vector<Stat> scan() const;

  std::string label_, dir_;
  std::string env_hex_, env_desc_;
  int64_t max_bytes_;
  std::atomic<bool> enabled_{true};
  std::atomic<bool> warned_corrupt_{false};

  struct Job {
    CacheKey key;
    std::string name, payload;
    int64_t compile_ns;
  };
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<Job> queue_;
  bool busy_ = false, stop_ = false;
  std::thread writer_;
  // Bytes in the directory as of the last scan plus what this process wrote
  // since (-1: not scanned yet). A write prunes only when it crosses
  // max_bytes_, so writing N entries costs O(N), not a scan per entry.
  std::mutex usage_mu_;
  int64_t usage_bytes_ = -1;
};

// The file format version; bump when the layout or key recipe changes.
constexpr uint32_t kCacheFormatVersion = 2;

}  // namespace torch_tpu
