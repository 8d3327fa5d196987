#include "compile/executable_cache.h"

#include <algorithm>

#include "runtime/log.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>

#include "compile/dump.h"
#include "compile/metrics.h"
#include "runtime/error.h"

namespace torch_tpu {
namespace {

const char* kTorchTpuVersion = "0.1.0";

// Host CPU model and feature flags: XLA:CPU code is compiled for the host
// ISA and can SIGILL (or be rejected) on another CPU.
std::string host_cpu_features() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model, flags;
  while (std::getline(f, line)) {
    auto starts = [&](const char* p) { return line.rfind(p, 0) == 0; };
    if (model.empty() && (starts("model name") || starts("CPU part"))) model = line;
    if (flags.empty() && (starts("flags") || starts("Features"))) flags = line;
    if (!model.empty() && !flags.empty()) break;
  }
  return model + "|" + flags;
}

// Identity of the binary holding the lowerings (size and mtime of the
// shared object this code is linked into): a rebuilt torch_tpu with changed
// lowerings must not load executables compiled from the old ones.
std::string build_identity() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&host_cpu_features), &info) == 0 || info.dli_fname == nullptr) return "unknown";
  struct stat st{};
  if (::stat(info.dli_fname, &st) != 0) return "unknown";
  return std::to_string(st.st_size) + "@" + std::to_string(st.st_mtime);
}

// TORCH_TPU_XLA_OPTIONS, read once: every full compile uses them.
const runtime::CompileOptions& env_options() {
  static const runtime::CompileOptions options = runtime::CompileOptions::from_env();
  return options;
}

// Quick options for a first, tier-0 compile of a small eager program: no
// LLVM optimisation and XLA:CPU's loop emitters, unless the user's
// TORCH_TPU_XLA_OPTIONS sets the same flags. Measured on the GPT training
// step (bench/cold_start.py): compile time 3.5 s -> 1.6 s, steps/s halved.
runtime::CompileOptions quick_options(const runtime::CompileOptions& base) {
  runtime::CompileOptions o = base;
  auto has = [&](const std::string& n) {
    for (auto& [k, v] : o.int_overrides)
      if (k == n) return true;
    for (auto& [k, v] : o.bool_overrides)
      if (k == n) return true;
    return false;
  };
  if (!has("xla_backend_optimization_level")) o.int_overrides.emplace_back("xla_backend_optimization_level", 0);
  if (!has("xla_cpu_use_fusion_emitters")) o.bool_overrides.emplace_back("xla_cpu_use_fusion_emitters", false);
  return o;
}

}  // namespace

std::string CacheKey::hex() const {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", (unsigned long long)hi, (unsigned long long)lo);
  return buf;
}

TierSettings tier_settings_from_env() {
  TierSettings s;
  const char* d = std::getenv("TORCH_TPU_CACHE_DIR");
  if (d && *d) {
    s.disk_dir = std::string(d) == "disabled" ? "" : d;
  } else {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg && *xdg)
      s.disk_dir = std::string(xdg) + "/torch_tpu";
    else if (home && *home)
      s.disk_dir = std::string(home) + "/.cache/torch_tpu";
  }
  const char* sh = std::getenv("TORCH_TPU_SHARED_CACHE_DIR");
  if (sh && *sh && std::string(sh) != "disabled") s.shared_dir = sh;
  const char* mb = std::getenv("TORCH_TPU_CACHE_MAX_BYTES");
  s.max_bytes = (mb && *mb) ? std::atoll(mb) : (int64_t{4} << 30);
  return s;
}

int64_t max_programs_from_env() {
  const char* v = std::getenv("TORCH_TPU_CACHE_MAX_PROGRAMS");
  int64_t n = (v && *v) ? std::atoll(v) : 8192;
  return n > 0 ? n : 8192;
}

ExecutableCache& ExecutableCache::get() {
  static auto* c = new ExecutableCache();
  return *c;
}

ProgramPtr ExecutableCache::lookup(const CacheKey& key) {
  mem_requests.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  if (it == map_.end()) {
    mem_misses.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
  }
  mem_hits.fetch_add(1, std::memory_order_relaxed);
  it->second->hits.fetch_add(1, std::memory_order_relaxed);
  it->second->last_use = ++use_counter_;
  return it->second;
}

void ExecutableCache::configure(const TierSettings& s) {
  std::lock_guard<std::mutex> lock(tiers_mu_);
  configure_locked(s);
}

void ExecutableCache::configure_locked(const TierSettings& s) {
  if (disk_) disk_->flush();
  if (shared_) shared_->flush();
  settings_ = s;
  disk_ = s.disk_dir.empty() ? nullptr : std::make_unique<DiskTier>("disk", s.disk_dir, s.max_bytes);
  shared_ = s.shared_dir.empty() ? nullptr : std::make_unique<DiskTier>("shared", s.shared_dir, s.max_bytes);
  tiers_configured_.store(true, std::memory_order_release);
  if (env_ready_) {
    if (disk_) disk_->set_environment(env_key_, env_desc_);
    if (shared_) shared_->set_environment(env_key_, env_desc_);
  }
}

TierSettings ExecutableCache::settings() {
  std::lock_guard<std::mutex> lock(tiers_mu_);
  if (!tiers_configured_) {
    settings_ = tier_settings_from_env();
    return settings_;
  }
  return settings_;
}

// Configured once, on first use; compile-pool threads may race to it.
DiskTier* ExecutableCache::disk() {
  if (!tiers_configured_.load(std::memory_order_acquire)) configure_once();
  return disk_.get();
}
DiskTier* ExecutableCache::shared() {
  if (!tiers_configured_.load(std::memory_order_acquire)) configure_once();
  return shared_.get();
}
void ExecutableCache::configure_once() {
  TierSettings s = tier_settings_from_env();
  std::lock_guard<std::mutex> lock(tiers_mu_);
  if (!tiers_configured_.load()) configure_locked(s);
}

void ExecutableCache::flush() {
  // Background compiles end by writing their programs to the tiers.
  background_.wait();
  std::lock_guard<std::mutex> lock(tiers_mu_);
  if (disk_) disk_->flush();
  if (shared_) shared_->flush();
}

// Everything besides the op itself that makes an executable valid, as
// "field=value" lines (stored in each file, so a miss can say what changed).
void ExecutableCache::ensure_environment(const runtime::Client& client) {
  if (env_ready_) return;
  const char* plugin_id = std::getenv("TORCH_TPU_INTERNAL_PLUGIN_IDENTITY");  // tests simulate a new plugin
  std::string cpu = host_cpu_features();
  KeyBuilder cpu_hash, opts_hash;
  cpu_hash.add(std::string_view(cpu));
  opts_hash.add(std::string_view(runtime::CompileOptions{}.serialize()));
  env_desc_ = std::string("torch_tpu=") + kTorchTpuVersion + "\n" + "build=" + build_identity() + "\n" +
              "cache_format=" + std::to_string(kCacheFormatVersion) + "\n" + "platform=" + client.platform_name() +
              "\n" + "device_kind=" + (client.devices().empty() ? "" : client.devices()[0].kind) + "\n" +
              "compile_options=" + opts_hash.finish().hex().substr(0, 12) + "\n" +
              "plugin=" + (plugin_id && *plugin_id ? plugin_id : client.plugin_identity()) + "\n" +
              "host_cpu=" + cpu.substr(0, cpu.find('|')) + " features#" + cpu_hash.finish().hex().substr(0, 12) + "\n";
  KeyBuilder e;
  e.add(std::string_view(env_desc_));
  env_key_ = e.finish();
  if (disk_) disk_->set_environment(env_key_, env_desc_);
  if (shared_) shared_->set_environment(env_key_, env_desc_);
  env_ready_ = true;
}

ProgramPtr ExecutableCache::compile_and_insert(const runtime::Client& client, const CacheKey& key,
                                               const std::string& name, const std::function<std::string()>& emit,
                                               bool tiered, const std::vector<int64_t>* replica_devices, bool spmd) {
  DiskTier* tiers[2] = {disk(), shared()};
  {
    std::lock_guard<std::mutex> lock(tiers_mu_);
    ensure_environment(client);
  }
  runtime::CompileOptions options = env_options();
  if (replica_devices && spmd) {
    options.spmd_devices = *replica_devices;
    tiered = false;
  } else if (replica_devices) {
    options.num_replicas = static_cast<int64_t>(replica_devices->size());
    options.portable = false;
    options.device_assignment = *replica_devices;
    tiered = false;
  }
  // Persistent entries compiled with other XLA options must not be reused.
  CacheKey pkey = key;
  if (!options.int_overrides.empty() || !options.bool_overrides.empty() || replica_devices) {
    KeyBuilder kb;
    kb.add(key.hi);
    kb.add(key.lo);
    kb.add(options.serialize());
    pkey = kb.finish();
  }
  std::shared_ptr<runtime::Executable> exe;
  int64_t ns = 0;
  // Emitted at most once (a loaded program is dumped and recorded too, and
  // a failed load falls through to compiling the same text).
  std::optional<std::string> text_once;
  auto program_text = [&]() -> const std::string& {
    if (!text_once) text_once = emit();
    return *text_once;
  };
  auto load_start = std::chrono::steady_clock::now();
  for (int t = 0; t < 2 && !exe; ++t) {
    if (!tiers[t]) continue;
    auto entry = tiers[t]->lookup(pkey, name);
    if (!entry) continue;
    try {
      Span span(t == 0 ? "tpu::cache_load (disk tier)" : "tpu::cache_load (shared tier)");
      exe = client.deserialize(entry->payload);
      ns = entry->compile_ns;
      note_program(name, key, program_text(), ns, t == 0 ? "disk" : "shared");
      // A shared-tier hit fills the local disk tier.
      if (t == 1 && tiers[0]) tiers[0]->store(pkey, name, std::move(entry->payload), ns);
    } catch (const std::exception& e) {
      load_failures++;
      if (!warned_load_.exchange(true))
        log::write(log::Level::kWarning,
                   std::string("a cached executable failed to load (") + e.what() + "); recompiling.");
    }
  }
  load_ns +=
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - load_start).count();
  bool quick = false;
  if (!exe) {
    const std::string& text = program_text();
    if (!options.spmd_devices.empty()) options.shardy = text.find("sdy.mesh @") != std::string::npos;
    quick = tiered && tiered_compile_enabled();
    auto t0 = std::chrono::steady_clock::now();
    {
      Span span(quick ? "tpu::compile (quick)" : "tpu::compile");
      std::string quick_error;
      if (quick) {
        try {
          exe = client.compile(text, quick_options(options));
        } catch (const runtime::PjrtError& e) {
          quick_error = e.what();
          quick = false;
        }
      }
      if (!exe) {
        exe = client.compile(text, options);  // a bad program throws here as usual
        if (!quick_error.empty()) {
          // The program is fine, so the plugin rejects the quick flags.
          {
            std::lock_guard<std::mutex> lock(tiers_mu_);
            tiered_ = 0;
          }
          log::write(log::Level::kWarning,
                     "quick compile options rejected (" + quick_error + "); tiered compiles are off.");
        }
      }
    }
    ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    bump(metrics().compiles);
    bump(metrics().compile_ns, ns);
    metrics().note_compile(name, ns);
    note_program(name, key, text, ns, quick ? "compiled (quick)" : "compiled");
    // The quick program stays in memory; the full one is persisted when its
    // background compile ends.
    if (!quick) store_persistent(tiers, pkey, name, *exe, ns);
  }
  auto prog = std::make_shared<CompiledProgram>();
  prog->exe = std::move(exe);
  prog->name = name;
  prog->compile_ns = ns;
  ProgramPtr out;
  bool check_mappings = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    prog->last_use = ++use_counter_;
    auto [it, inserted] = map_.emplace(key, prog);
    out = it->second;
    if (static_cast<int64_t>(map_.size()) > max_programs_) evict_locked();
    if (!inserted) quick = false;  // another thread's program won the race
    check_mappings = ++inserts_ % kMappingCheckEvery == 0 && map_.size() >= kMappingCheckMinPrograms;
  }
  if (check_mappings) bound_mappings();
  if (quick) {
    // A weak reference: a quick program evicted (and not running) before its
    // turn is not worth compiling again, and the queue must not keep the
    // executables of a long burst of misses alive (their JIT mappings are
    // what the memory tier's bound protects).
    background_.submit([this, c = &client, key, pkey, name, text = program_text(),
                        weak = std::weak_ptr<CompiledProgram>(prog)]() mutable {
      ProgramPtr quick = weak.lock();
      if (quick) tier_up(c, key, pkey, std::move(name), std::move(text), std::move(quick));
    });
  }
  return out;
}

void ExecutableCache::store_persistent(DiskTier* const tiers[2], const CacheKey& pkey, const std::string& name,
                                       const runtime::Executable& exe, int64_t ns) {
  if (!tiers[0] && !tiers[1]) return;
  // Some plugins (or programs) cannot be serialised: memory-only then.
  std::string why;
  std::string bytes = exe.serialize(&why);
  if (!why.empty()) {
    unserializable++;
    if (!warned_serialize_.exchange(true))
      log::write(log::Level::kWarning, "the compiled program for '" + name + "' cannot be saved to the disk cache (" +
                                           why + "); it stays in memory. Further such programs are skipped silently.");
  }
  if (!bytes.empty()) {
    if (tiers[0]) tiers[0]->store(pkey, name, bytes, ns);
    if (tiers[1]) tiers[1]->store(pkey, name, std::move(bytes), ns);
  }
}

// On the background thread: the full compile of a program that ran quick.
void ExecutableCache::tier_up(const runtime::Client* client, CacheKey key, CacheKey pkey, std::string name,
                              std::string text, ProgramPtr quick) {
  const runtime::CompileOptions& options = env_options();
  std::shared_ptr<runtime::Executable> exe;
  auto t0 = std::chrono::steady_clock::now();
  try {
    exe = client->compile(text, options);
  } catch (const std::exception& e) {
    // The quick program stays: it is correct, only slower.
    log::write(log::Level::kWarning, "background compile of '" + name + "' failed (" + e.what() + ")");
    return;
  }
  const int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
  bump(metrics().background_compiles);
  bump(metrics().background_compile_ns, ns);
  {
    std::lock_guard<std::mutex> lock(tiers_mu_);  // configure() may swap the tiers
    DiskTier* tiers[2] = {disk_.get(), shared_.get()};
    store_persistent(tiers, pkey, name, *exe, ns);
  }
  auto full = std::make_shared<CompiledProgram>();
  full->exe = std::move(exe);
  full->name = quick->name;
  full->compile_ns = quick->compile_ns;  // what the op waited for
  full->hits = quick->hits.load();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = map_.find(key);
  // Only where the quick program still is: after clear() or an eviction the
  // disk tier has the full one for the next miss.
  if (it != map_.end() && it->second == quick) {
    full->last_use = quick->last_use;
    it->second = std::move(full);
  }
}

bool ExecutableCache::tiered_compile_enabled() {
  std::lock_guard<std::mutex> lock(tiers_mu_);
  if (tiered_ < 0) {
    const char* env = std::getenv("TORCH_TPU_TIERED_COMPILE");
    // Opt-in: quick programs are not bit-identical to full ones, and on
    // XLA:CPU 0.0.1 some are wrong (integer pow with a negative exponent gave
    // 0 instead of +-1 without LLVM optimisation; docs/compilation_cache.md).
    // Never across ranks: each rank would switch an op to its full program
    // at another step, so replicas that must stay identical could drift.
    const char* world = std::getenv("WORLD_SIZE");  // set by torchrun
    tiered_ = env && std::string(env) == "1" && (!world || std::atoi(world) <= 1);
  }
  return tiered_ == 1;
}

bool ExecutableCache::wait_background(int64_t timeout_ms) { return background_.wait(timeout_ms); }

// Drops the least recently used eighth, so the sort is paid once per
// max/8 inserts. A program still held elsewhere (a running op, a captured
// graph) stays alive through its own reference.
void ExecutableCache::evict_locked() {
  std::vector<std::pair<int64_t, CacheKey>> by_use;
  by_use.reserve(map_.size());
  for (auto& [k, p] : map_) by_use.emplace_back(p->last_use, k);
  size_t target = static_cast<size_t>(max_programs_ - max_programs_ / 8);
  size_t drop = by_use.size() > target ? by_use.size() - target : 0;
  std::nth_element(by_use.begin(), by_use.begin() + drop, by_use.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (size_t i = 0; i < drop; ++i) map_.erase(by_use[i].second);
  evictions.fetch_add(static_cast<int64_t>(drop), std::memory_order_relaxed);
}

namespace {
// The number of lines of /proc/self/maps (-1 where there is none).
int64_t process_mappings() {
  std::FILE* f = std::fopen("/proc/self/maps", "r");
  if (!f) return -1;
  int64_t lines = 0;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) lines += std::count(buf, buf + n, '\n');
  std::fclose(f);
  return lines;
}

int64_t mapping_limit() {
  static const int64_t limit = [] {
    int64_t v = 65530;  // Linux's default
    if (std::FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
      long long x = 0;
      if (std::fscanf(f, "%lld", &x) == 1 && x > 0) v = x;
      std::fclose(f);
    }
    return v;
  }();
  return limit;
}
}  // namespace

// Past three quarters of the limit, the least recently used quarter goes,
// and the cap on programs comes down to what is left: how many mappings a
// program takes varies (3 for a small op; 27 on average for the conv tests'
// forward and backward programs), so only the count itself bounds them.
void ExecutableCache::bound_mappings() {
  int64_t maps = process_mappings();
  if (maps < 0 || maps * 4 < mapping_limit() * 3) return;
  std::lock_guard<std::mutex> lock(mu_);
  int64_t keep = static_cast<int64_t>(map_.size()) * 3 / 4;
  if (keep < kMappingCheckMinPrograms / 2) return;  // the mappings are someone else's
  if (keep < max_programs_) {
    max_programs_ = keep + keep / 7;  // evict_locked() keeps 7/8 of the cap: `keep`
    evict_locked();
    mapping_evictions.fetch_add(1, std::memory_order_relaxed);
  }
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
