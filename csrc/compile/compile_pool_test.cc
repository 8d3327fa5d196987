#include "compile/compile_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace torch_tpu {
namespace {

ProgramPtr named(const std::string& name) {
  auto p = std::make_shared<CompiledProgram>();
  p->name = name;
  return p;
}

TEST(CompilePool, JobsRunConcurrentlyAndReturnTheirPrograms) {
  auto& pool = *new CompilePool(2);  // never destroyed: its threads never end
  std::atomic<int> running{0}, most{0};
  std::vector<std::shared_future<ProgramPtr>> futs;
  for (int i = 0; i < 4; ++i)
    futs.push_back(pool.submit([&, i] {
      int now = ++running;
      for (int m = most.load(); now > m && !most.compare_exchange_weak(m, now);) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      --running;
      return named("p" + std::to_string(i));
    }));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(futs[i].get()->name, "p" + std::to_string(i));
  EXPECT_EQ(most.load(), 2);  // two threads: two compiles at once, never more
  pool.wait_idle();
}

TEST(CompilePool, AFailedJobRethrowsAtGetAndThePoolGoesOn) {
  auto& pool = *new CompilePool(1);
  auto bad = pool.submit([]() -> ProgramPtr { throw std::runtime_error("bad program"); });
  auto good = pool.submit([] { return named("good"); });
  EXPECT_THROW(
      {
        try {
          bad.get();
        } catch (const std::runtime_error& e) {
          EXPECT_STREQ(e.what(), "bad program");
          throw;
        }
      },
      std::runtime_error);
  EXPECT_EQ(good.get()->name, "good");
}

TEST(CompilePool, UrgentJobsGoAheadOfQueuedOnes) {
  auto& pool = *new CompilePool(1);
  std::mutex mu;
  std::vector<std::string> order;
  auto record = [&](const std::string& n) {
    return [&, n] {
      std::lock_guard<std::mutex> lock(mu);
      order.push_back(n);
      return named(n);
    };
  };
  std::atomic<bool> release{false};
  auto blocker = pool.submit([&] {
    while (!release.load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    return named("blocker");
  });
  auto a = pool.submit(record("a"));
  auto b = pool.submit(record("b"));
  auto u = pool.submit(record("urgent"), /*urgent=*/true);
  release = true;
  pool.wait_idle();
  EXPECT_EQ(order, (std::vector<std::string>{"urgent", "a", "b"}));
}

TEST(CompilePool, DelayHoldsJobsBack) {
  auto& pool = *new CompilePool(1);
  pool.set_delay_ms(100);
  const auto t0 = std::chrono::steady_clock::now();
  pool.submit([] { return named("late"); }).get();
  EXPECT_GE(std::chrono::steady_clock::now() - t0, std::chrono::milliseconds(100));
  pool.set_delay_ms(0);
}

}  // namespace
}  // namespace torch_tpu
