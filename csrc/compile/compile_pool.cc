#include "compile/compile_pool.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <thread>

namespace torch_tpu {

int CompilePool::threads_from_env() {
  if (const char* v = std::getenv("TORCH_TPU_COMPILE_THREADS"); v && *v) return std::max(0, std::atoi(v));
  const int cores = static_cast<int>(std::thread::hardware_concurrency());
  return cores < 2 ? 0 : std::min(cores, 8);
}

CompilePool& CompilePool::get() {
  static CompilePool* pool = new CompilePool(threads_from_env());  // never destroyed: its threads never end
  return *pool;
}

std::shared_future<ProgramPtr> CompilePool::submit(std::function<ProgramPtr()> job, bool urgent) {
  std::packaged_task<ProgramPtr()> task(std::move(job));
  std::shared_future<ProgramPtr> out = task.get_future().share();
  std::lock_guard<std::mutex> lock(mu_);
  if (owner_pid_ != ::getpid()) {
    // First job in this process, or in a forked child: it has none of the
    // parent's threads, and the parent's jobs are not its own.
    jobs_.clear();
    running_ = 0;
    owner_pid_ = ::getpid();
    for (int i = 0; i < std::max(threads_, 1); ++i) std::thread([this] { run(); }).detach();
  }
  if (urgent)
    jobs_.push_front(std::move(task));
  else
    jobs_.push_back(std::move(task));
  cv_.notify_one();
  return out;
}

void CompilePool::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !jobs_.empty(); });
    auto task = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    if (int ms = delay_ms_.load()) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    task();  // a packaged_task stores the job's exception in its future
    lock.lock();
    if (--running_ == 0 && jobs_.empty()) idle_.notify_all();
  }
}

void CompilePool::wait_idle() {
  std::unique_lock<std::mutex> lock(mu_);
  if (owner_pid_ != ::getpid()) return;  // a forked child: the parent's jobs are not its own
  idle_.wait(lock, [this] { return jobs_.empty() && running_ == 0; });
}

}  // namespace torch_tpu
