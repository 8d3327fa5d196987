#include "runtime/worker_threads.h"

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace torch_tpu::runtime {
namespace {

TEST(WorkerThreads, FindsAStartedThreadAndRanksItBelowTheCaller) {
  const std::vector<int> before = thread_ids();
  ASSERT_FALSE(before.empty());
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::atomic<int> tid{0};
  std::thread t([&] {
    tid = static_cast<int>(syscall(SYS_gettid));
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return done; });
  });
  while (tid == 0) std::this_thread::yield();
  const std::vector<int> started = new_threads(before, thread_ids());
  EXPECT_EQ(started, std::vector<int>{tid.load()});

  const int self = thread_nice(static_cast<int>(syscall(SYS_gettid)));
  EXPECT_EQ(lower_priority(started, 3), 1);
  EXPECT_EQ(thread_nice(tid), std::min(self + 3, 19));
  EXPECT_EQ(thread_nice(static_cast<int>(syscall(SYS_gettid))), self);  // the caller keeps its own
  EXPECT_EQ(lower_priority(started, 0), 0);                             // 0 changes nothing
  EXPECT_EQ(thread_nice(tid), std::min(self + 3, 19));
  {
    std::lock_guard<std::mutex> l(mu);
    done = true;
  }
  cv.notify_one();
  t.join();
}

}  // namespace
}  // namespace torch_tpu::runtime
