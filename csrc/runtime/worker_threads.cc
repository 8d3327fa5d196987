#include "runtime/worker_threads.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <iterator>
#include <mutex>
#include <utility>

#if defined(__linux__)
#include <dirent.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace torch_tpu::runtime {

std::vector<int> thread_ids() {
  std::vector<int> ids;
#if defined(__linux__)
  if (DIR* d = opendir("/proc/self/task")) {
    while (dirent* e = readdir(d)) {
      char* end = nullptr;
      long id = std::strtol(e->d_name, &end, 10);
      if (end != e->d_name && *end == '\0') ids.push_back(static_cast<int>(id));
    }
    closedir(d);
  }
#endif
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<int> new_threads(const std::vector<int>& before, const std::vector<int>& after) {
  std::vector<int> out;
  std::set_difference(after.begin(), after.end(), before.begin(), before.end(), std::back_inserter(out));
  return out;
}

int thread_nice(int tid) {
#if defined(__linux__)
  errno = 0;
  int n = getpriority(PRIO_PROCESS, static_cast<id_t>(tid));
  return errno == 0 ? n : 0;
#else
  (void)tid;
  return 0;
#endif
}

int lower_priority(const std::vector<int>& tids, int delta) {
  int changed = 0;
#if defined(__linux__)
  if (delta <= 0) return 0;
  const int self = thread_nice(static_cast<int>(syscall(SYS_gettid)));
  const int nice = std::min(self + delta, 19);
  // Linux keeps a niceness per thread, so this leaves the caller alone.
  for (int tid : tids)
    if (setpriority(PRIO_PROCESS, static_cast<id_t>(tid), nice) == 0) ++changed;
#else
  (void)tids;
  (void)delta;
#endif
  return changed;
}

namespace {
std::mutex g_mu;
std::vector<int> g_plugin_threads;
}  // namespace

void set_plugin_threads(std::vector<int> tids) {
  std::lock_guard<std::mutex> l(g_mu);
  g_plugin_threads = std::move(tids);
}

std::vector<int> plugin_threads() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_plugin_threads;
}

}  // namespace torch_tpu::runtime
