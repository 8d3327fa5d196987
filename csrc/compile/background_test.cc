#include "compile/background.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

namespace torch_tpu {
namespace {

TEST(BackgroundWorker, RunsJobsInOrderAndWaitDrains) {
  // Never destroyed: its detached thread outlives the test (and a destroyed
  // condition variable with a waiter blocks exit).
  auto& w = *new BackgroundWorker();
  std::vector<int> order;  // written by the worker only; read after wait()
  for (int i = 0; i < 5; ++i) w.submit([&order, i] { order.push_back(i); });
  w.submit([] { throw std::runtime_error("a failing job does not stop the worker"); });
  w.submit([&order] { order.push_back(5); });
  EXPECT_TRUE(w.wait(10000));
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(w.pending(), 0);
}

TEST(BackgroundWorker, QuietPeriodDelaysJobsUnlessSomeoneWaits) {
  auto& w = *new BackgroundWorker(300);
  std::atomic<int> ran{0};
  w.submit([&ran] { ++ran; });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(ran.load(), 0);  // still inside the quiet period
  EXPECT_EQ(w.pending(), 1);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_TRUE(w.wait(10000));  // a waiter skips the rest of it
  EXPECT_EQ(ran.load(), 1);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(150));
  // Without a waiter the job runs once the period has passed.
  w.submit([&ran] { ++ran; });
  for (int i = 0; i < 200 && ran.load() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(ran.load(), 2);
}

}  // namespace
}  // namespace torch_tpu
