#include "compile/dump.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <utility>

#include "runtime/log.h"

namespace torch_tpu {
namespace {

std::atomic<LocationHook> g_hook{nullptr};
SpanHooks g_spans;
thread_local std::string t_origin;

std::mutex g_mu;
std::deque<CompileRecord>& records() {
  static auto* r = new std::deque<CompileRecord>();  // outlives static destruction
  return *r;
}
std::atomic<int64_t> g_seq{0};

std::string hex(const CacheKey& k) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%016llx", static_cast<unsigned long long>(k.hi),
                static_cast<unsigned long long>(k.lo));
  return buf;
}

// The entry function's argument and result types: the part of a program
// that changes with a new shape or dtype.
std::string signature_of(const std::string& text) {
  size_t at = text.find("@main(");
  if (at == std::string::npos) return {};
  size_t end = text.find('{', at);
  std::string sig = text.substr(at + 5, end == std::string::npos ? std::string::npos : end - at - 5);
  while (!sig.empty() && (sig.back() == ' ' || sig.back() == '\n')) sig.pop_back();
  return sig;
}

std::string file_part(std::string_view name) {
  std::string s;
  for (char c : name) s += (std::isalnum(static_cast<unsigned char>(c)) || c == '_') ? c : '_';
  return s.substr(0, 48);
}

}  // namespace

const std::string& dump_dir() {
  static const std::string dir = [] {
    const char* v = std::getenv("TORCH_TPU_DUMP_DIR");
    return std::string(v ? v : "");
  }();
  return dir;
}

void set_location_hook(LocationHook h) { g_hook.store(h); }

void set_span_hooks(SpanHooks h) { g_spans = h; }  // once, at module load
Span::Span(const char* name) {
  if (g_spans.begin) span_ = g_spans.begin(name);
}
Span::~Span() {
  if (span_) g_spans.end(span_);
}
std::string user_location() {
  LocationHook h = g_hook.load();
  return h ? h() : std::string();
}

void set_program_origin(std::string origin) { t_origin = std::move(origin); }
std::string take_program_origin() { return std::exchange(t_origin, std::string()); }

void note_program(std::string_view name, const CacheKey& key, const std::string& text, int64_t compile_ns,
                  std::string_view tier) {
  std::string origin = take_program_origin();
  {
    CompileRecord r{std::string(name), signature_of(text), std::hash<std::string>()(text.substr(text.find('{') + 1)),
                    compile_ns,        hex(key),           std::string(tier)};
    std::lock_guard<std::mutex> l(g_mu);
    records().push_back(std::move(r));
    if (records().size() > 4096) records().pop_front();
  }
  if (!dumping()) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dump_dir(), ec);
  char seq[16];
  std::snprintf(seq, sizeof seq, "%05lld", static_cast<long long>(g_seq++));
  fs::path path = fs::path(dump_dir()) / (std::string(seq) + "-" + file_part(name) + ".mlir");
  std::ofstream f(path);
  if (!f) {
    static std::atomic<bool> warned{false};
    if (!warned.exchange(true))
      log::write(log::Level::kWarning,
                 "TORCH_TPU_DUMP_DIR: cannot write " + path.string() + "; program dumps are skipped.");
    return;
  }
  f << "// program: " << name << "\n// cache key: " << hex(key) << "\n// " << tier;
  if (tier == "compiled") {
    char ms[32];
    std::snprintf(ms, sizeof ms, "%.1f", static_cast<double>(compile_ns) / 1e6);
    f << " in " << ms << " ms";
  } else {
    f << " tier (compiled earlier)";
  }
  f << "\n// from:\n";
  size_t start = 0;
  while (start < origin.size()) {
    size_t nl = origin.find('\n', start);
    f << "//   " << origin.substr(start, nl == std::string::npos ? std::string::npos : nl - start) << "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  f << text;
}

std::vector<CompileRecord> compile_records() {
  std::lock_guard<std::mutex> l(g_mu);
  return {records().begin(), records().end()};
}
void clear_compile_records() {
  std::lock_guard<std::mutex> l(g_mu);
  records().clear();
}

}  // namespace torch_tpu
