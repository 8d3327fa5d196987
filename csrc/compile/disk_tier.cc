#include "compile/disk_tier.h"

#include <sys/stat.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fcntl.h>
#include <fstream>
#include <sstream>

#include "runtime/log.h"

namespace fs = std::filesystem;

namespace torch_tpu {
namespace {

constexpr char kMagic[8] = {'T', 'T', 'P', 'U', 'X', 'E', 'X', '\0'};

// Header: magic, format version, key, lengths, compile ns, payload
// checksum, a hit counter (updated in place); then the op name, the
// environment description and the payload.
struct Header {
  char magic[8];
  uint32_t version;
  uint32_t name_len;
  uint64_t key_hi, key_lo;
  uint64_t payload_len;
  int64_t compile_ns;
  uint64_t checksum;
  uint32_t env_len;
  uint32_t reserved;
  uint64_t hits;
};

bool read_header(std::ifstream& f, Header& h, std::string& name, std::string& env) {
  if (!f.read(reinterpret_cast<char*>(&h), sizeof h)) return false;
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0 || h.name_len > 4096 || h.env_len > 65536) return false;
  name.resize(h.name_len);
  env.resize(h.env_len);
  return static_cast<bool>(f.read(name.data(), h.name_len)) && static_cast<bool>(f.read(env.data(), h.env_len));
}

uint64_t checksum(const std::string& s) {
  KeyBuilder k;
  k.add(s);
  return k.finish().lo;
}

int64_t now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

DiskTier::DiskTier(std::string label, std::string dir, int64_t max_bytes)
    : label_(std::move(label)), dir_(std::move(dir)), max_bytes_(max_bytes) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec || ::access(dir_.c_str(), W_OK | R_OK) != 0) {
    disable("cannot create or write '" + dir_ + "'" + (ec ? ": " + ec.message() : ""));
    return;
  }
  writer_ = std::thread([this] { writer_loop(); });
}

DiskTier::~DiskTier() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (writer_.joinable()) writer_.join();
}

void DiskTier::disable(const std::string& why) {
  if (enabled_.exchange(false))
    log::write(log::Level::kWarning, "the " + label_ + " compilation cache is off for this process (" + why +
                                         "); compiled programs stay in memory only.");
}

void DiskTier::set_environment(const CacheKey& env, std::string description) {
  env_hex_ = env.hex().substr(0, 16);
  env_desc_ = std::move(description);
}

// File name: <op metadata key>-<environment key>.xex, so entries for other
// plugins or CPUs sit side by side and a miss can find and explain them.
std::string DiskTier::path_for(const CacheKey& key) const { return dir_ + "/" + key.hex() + "-" + env_hex_ + ".xex"; }

void DiskTier::explain_miss(const CacheKey& key, const std::string& name) {
  std::string prefix = key.hex() + "-";
  std::error_code ec;
  for (auto& de : fs::directory_iterator(dir_, ec)) {
    std::string fname = de.path().filename().string();
    if (fname.rfind(prefix, 0) != 0 || de.path().extension() != ".xex") continue;
    std::ifstream f(de.path(), std::ios::binary);
    Header h{};
    std::string n, env;
    if (!read_header(f, h, n, env)) continue;
    // Environment descriptions are "field=value" lines; report the changed ones.
    std::istringstream theirs(env), ours(env_desc_);
    std::string a, b, diff;
    while (std::getline(theirs, a) && std::getline(ours, b))
      if (a != b) diff += "\n    was: " + a + "\n    now: " + b;
    log::write(log::Level::kDebug, "compilation cache (" + label_ + ") miss for '" + name +
                                       "': an entry exists for another environment, not loaded:" + diff);
    return;
  }
  log::write(log::Level::kDebug, "compilation cache (" + label_ + ") miss for '" + name + "': no entry");
}

std::optional<DiskEntry> DiskTier::lookup(const CacheKey& key, const std::string& op_name) {
  if (!enabled()) return std::nullopt;
  requests++;
  std::string path = path_for(key);
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    misses++;
    if (log::enabled(log::Level::kDebug)) explain_miss(key, op_name);
    return std::nullopt;
  }
  auto bad = [&](const char* why) -> std::optional<DiskEntry> {
    corrupt++;
    misses++;
    if (!warned_corrupt_.exchange(true))
      log::write(log::Level::kWarning, "ignoring unusable compilation cache file " + path + " (" + why +
                                           "); it will be recompiled and replaced. Further such files are "
                                           "skipped silently.");
    std::error_code ec;
    fs::remove(path, ec);
    return std::nullopt;
  };
  Header h{};
  std::string name, env;
  if (!f.read(reinterpret_cast<char*>(&h), sizeof h)) return bad("truncated header");
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return bad("not a torch_tpu cache file");
  if (h.version != kCacheFormatVersion) return bad("written by another cache format version");
  if (h.key_hi != key.hi || h.key_lo != key.lo) return bad("key mismatch");
  if (h.name_len > 4096 || h.env_len > 65536 || h.payload_len > (uint64_t{1} << 34)) return bad("implausible sizes");
  name.resize(h.name_len);
  env.resize(h.env_len);
  DiskEntry e;
  e.payload.resize(h.payload_len);
  if (!f.read(name.data(), h.name_len) || !f.read(env.data(), h.env_len) || !f.read(e.payload.data(), h.payload_len))
    return bad("truncated");
  if (checksum(e.payload) != h.checksum) return bad("checksum mismatch");
  if (env != env_desc_) return bad("environment mismatch");
  e.compile_ns = h.compile_ns;
  hits++;
  saved_ns += h.compile_ns;
  // Count the hit in the file and refresh its time: LRU follows use.
  int fd = ::open(path.c_str(), O_WRONLY);
  if (fd >= 0) {
    uint64_t n = h.hits + 1;
    if (::pwrite(fd, &n, sizeof n, offsetof(Header, hits)) != sizeof n) {
      // Best effort: a read-only shared directory still serves hits.
    }
    ::close(fd);
  }
  ::utime(path.c_str(), nullptr);
  return e;
}

void DiskTier::store(const CacheKey& key, const std::string& name, std::string payload, int64_t compile_ns) {
  if (!enabled()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Job{key, name, std::move(payload), compile_ns});
  }
  cv_.notify_one();
}

void DiskTier::flush() {
  std::unique_lock<std::mutex> lock(mu_);
  idle_cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || !enabled(); });
}

void DiskTier::writer_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) {
        if (stop_) return;
        continue;
      }
      job = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    if (enabled()) write_now(job.key, job.name, job.payload, job.compile_ns);
    {
      std::lock_guard<std::mutex> lock(mu_);
      busy_ = false;
      if (!enabled()) queue_.clear();
    }
    idle_cv_.notify_all();
  }
}

void DiskTier::write_now(const CacheKey& key, const std::string& name, const std::string& payload, int64_t compile_ns) {
  std::string path = path_for(key);
  // Unique temp name per process and thread; rename is atomic, so a
  // concurrent reader sees either no file or a whole one.
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                    std::to_string(std::hash<std::thread::id>()(std::this_thread::get_id()));
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kCacheFormatVersion;
  h.name_len = static_cast<uint32_t>(std::min<size_t>(name.size(), 4096));
  h.key_hi = key.hi;
  h.key_lo = key.lo;
  h.payload_len = payload.size();
  h.compile_ns = compile_ns;
  h.checksum = checksum(payload);
  h.env_len = static_cast<uint32_t>(env_desc_.size());
  h.hits = 0;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(&h), sizeof h);
    f.write(name.data(), h.name_len);
    f.write(env_desc_.data(), env_desc_.size());
    f.write(payload.data(), payload.size());
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      disable("writing '" + tmp + "' failed: " + std::strerror(errno));
      return;
    }
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    disable("renaming into '" + dir_ + "' failed");
    return;
  }
  writes++;
  if (max_bytes_ > 0) {
    int64_t written = static_cast<int64_t>(sizeof h + h.name_len + env_desc_.size() + payload.size());
    bool over;
    {
      std::lock_guard<std::mutex> lock(usage_mu_);
      if (usage_bytes_ < 0) {
        usage_bytes_ = 0;
        for (auto& e : scan()) usage_bytes_ += e.bytes;
      } else {
        usage_bytes_ += written;
      }
      over = usage_bytes_ > max_bytes_;
    }
    if (over) prune(max_bytes_);
  }
}

std::vector<DiskTier::Stat> DiskTier::scan() const {
  std::vector<Stat> out;
  std::error_code ec;
  int64_t now = now_s();
  for (auto& de : fs::directory_iterator(dir_, ec)) {
    if (de.path().extension() != ".xex") continue;
    struct stat st{};
    std::string file = de.path().string();
    if (::stat(file.c_str(), &st) != 0) continue;
    out.push_back({std::move(file), static_cast<int64_t>(st.st_size), now - st.st_mtime});
  }
  return out;
}

std::vector<DiskEntryInfo> DiskTier::list() const {
  std::vector<DiskEntryInfo> out;
  std::error_code ec;
  int64_t now = now_s();
  for (auto& de : fs::directory_iterator(dir_, ec)) {
    if (de.path().extension() != ".xex") continue;
    DiskEntryInfo info;
    info.file = de.path().string();
    struct stat st{};
    if (::stat(info.file.c_str(), &st) != 0) continue;
    info.bytes = st.st_size;
    info.age_s = now - st.st_mtime;
    std::ifstream f(info.file, std::ios::binary);
    Header h{};
    std::string env;
    if (read_header(f, h, info.name, env)) {
      info.compile_ns = h.compile_ns;
      info.hits = static_cast<int64_t>(h.hits);
      info.current = h.version == kCacheFormatVersion && (env_desc_.empty() || env == env_desc_);
    } else {
      info.name = "<unreadable>";
      info.current = false;
    }
    out.push_back(std::move(info));
  }
  return out;
}

int64_t DiskTier::prune(int64_t max_bytes) {
  auto entries = scan();
  int64_t total = 0;
  for (auto& e : entries) total += e.bytes;
  std::sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.age_s > b.age_s; });
  int64_t removed = 0;
  for (auto& e : entries) {
    if (total <= max_bytes) break;
    std::error_code ec;
    if (fs::remove(e.file, ec)) {
      total -= e.bytes;
      removed++;
    }
  }
  std::lock_guard<std::mutex> lock(usage_mu_);
  usage_bytes_ = total;
  return removed;
}

int64_t DiskTier::clear() { return prune(0); }

}  // namespace torch_tpu
