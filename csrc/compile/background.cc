#include "compile/background.h"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace torch_tpu {

void BackgroundWorker::submit(std::function<void()> job) {
  std::lock_guard<std::mutex> lock(mu_);
  jobs_.push_back(std::move(job));
  last_submit_ = std::chrono::steady_clock::now();
  if (owner_pid_ != ::getpid()) {
    // First job in this process (or in a forked child, which has no thread).
    // Detached: the worker lives as long as the process; owners drain it
    // before exit (cache.flush at interpreter exit).
    owner_pid_ = ::getpid();
    std::thread([this] { run(); }).detach();
  }
  cv_.notify_one();
}

void BackgroundWorker::run() {
  // Linux niceness is per thread; threads this one starts inherit it.
  ::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [this] { return !jobs_.empty(); });
    if (quiet_ms_ > 0 && waiters_ == 0) {
      const auto ready = last_submit_ + std::chrono::milliseconds(quiet_ms_);
      if (std::chrono::steady_clock::now() < ready) {
        cv_.wait_until(lock, ready);  // woken early by a submit or a waiter: check again
        continue;
      }
    }
    auto job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    try {
      job();
    } catch (...) {
      // A job reports its own failures; one that throws must not end the worker.
    }
    lock.lock();
    --running_;
    if (jobs_.empty() && running_ == 0) idle_.notify_all();
  }
}

bool BackgroundWorker::wait(int64_t timeout_ms) {
  std::unique_lock<std::mutex> lock(mu_);
  auto done = [this] { return jobs_.empty() && running_ == 0; };
  ++waiters_;
  cv_.notify_one();  // skip the quiet period
  bool ok = true;
  if (timeout_ms < 0)
    idle_.wait(lock, done);
  else
    ok = idle_.wait_for(lock, std::chrono::milliseconds(timeout_ms), done);
  --waiters_;
  return ok;
}

int64_t BackgroundWorker::pending() {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(jobs_.size()) + running_;
}

}  // namespace torch_tpu
