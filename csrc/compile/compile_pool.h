// Threads that compile programs while the thread that records ops goes on:
// strict eager's compile-ahead queue (eager/strict_driver.cc) hands each
// cache miss here, so the misses of a model's first step compile on every
// core at once instead of one after another (XLA:CPU's compiler is
// single-threaded per program; two programs compile in the time of one on
// two cores). Jobs start in FIFO order, urgent ones first.
//
// Threads are started on the first submit in a process (a forked child
// starts its own) and never end, so the pool is never destroyed.
#pragma once
#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>

#include "compile/executable_cache.h"

namespace torch_tpu {

class CompilePool {
 public:
  // TORCH_TPU_COMPILE_THREADS: 0 turns compile-ahead off (every miss
  // compiles on the recording thread, as before); unset means one thread per
  // core, at most 8, and off on a single core.
  static int threads_from_env();
  static CompilePool& get();

  explicit CompilePool(int threads) : threads_(threads) {}
  CompilePool(const CompilePool&) = delete;
  CompilePool& operator=(const CompilePool&) = delete;

  int threads() const { return threads_; }
  // Runs `job` on a pool thread; its exception, if any, is rethrown by get().
  // An urgent job goes ahead of the queued ones.
  std::shared_future<ProgramPtr> submit(std::function<ProgramPtr()> job, bool urgent = false);
  // Blocks until no job is queued or running (before the process exits:
  // the plugin must not be torn down under a compile).
  void wait_idle();
  // Tests only: each job waits this long before it starts, so that ops
  // reliably queue behind it.
  void set_delay_ms(int ms) { delay_ms_.store(ms); }

 private:
  void run();
  const int threads_;
  std::mutex mu_;
  std::condition_variable cv_, idle_;
  int running_ = 0;
  std::atomic<int> delay_ms_{0};
  std::deque<std::packaged_task<ProgramPtr()>> jobs_;
  int owner_pid_ = 0;
};

}  // namespace torch_tpu
