// One low-priority worker thread that runs jobs in FIFO order: the
// executable cache's tier-up compiles (executable_cache.h). It yields to the
// thread that runs the user's ops in two ways: nice 10, and a quiet period -
// a job starts only once no job has been submitted for `quiet_ms`, so a
// burst of first compiles (a model's first step) is not slowed by the
// background compiles it queues (on two cores it was, by ~30%).
// The thread is detached and never ends, so an instance must never be
// destroyed (allocate it with new, as ExecutableCache::get() is).
#pragma once
#include <condition_variable>
#include <cstdint>
#include <chrono>
#include <deque>
#include <functional>
#include <mutex>

namespace torch_tpu {

class BackgroundWorker {
 public:
  explicit BackgroundWorker(int64_t quiet_ms = 0) : quiet_ms_(quiet_ms) {}
  BackgroundWorker(const BackgroundWorker&) = delete;
  BackgroundWorker& operator=(const BackgroundWorker&) = delete;

  void submit(std::function<void()> job);
  // Blocks until every submitted job has run, or `timeout_ms` (< 0: no
  // limit) has passed; the quiet period does not apply while someone waits.
  // Returns whether the queue is empty.
  bool wait(int64_t timeout_ms = -1);
  // Jobs queued or running.
  int64_t pending();

 private:
  void run();
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  std::deque<std::function<void()>> jobs_;
  int64_t running_ = 0;
  int owner_pid_ = 0;  // the process whose thread serves the queue (a fork has none)
  const int64_t quiet_ms_;
  std::chrono::steady_clock::time_point last_submit_{};
  int waiters_ = 0;
};

}  // namespace torch_tpu
