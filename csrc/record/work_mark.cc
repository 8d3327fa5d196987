#include "record/work_mark.h"

#include <c10/util/Exception.h>

#include <chrono>
#include <thread>

#include "record/op_call.h"

namespace torch_tpu::record {
namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void WorkMark::record() {
  std::vector<runtime::BufferPtr> live = enqueued_work("Event.record");
  auto clock = std::make_shared<Clock>();
  clock->left = 1;  // held until every callback is registered (one may fire at once)
  work_.clear();
  for (auto& b : live) {
    runtime::Event ev;
    try {
      ev = b->ready_event();
    } catch (const std::exception&) {
      continue;  // donated to a later program since: that program's own buffers are tracked
    }
    work_.push_back(b);
    ++clock->left;
    ev.on_ready([clock](const std::string&) {
      if (--clock->left == 0) clock->done_ns = now_ns();
    });
  }
  orphans_ = unfinished_orphans();
  for (auto& e : orphans_) {
    ++clock->left;
    e->on_ready([clock](const std::string&) {
      if (--clock->left == 0) clock->done_ns = now_ns();
    });
  }
  if (--clock->left == 0) clock->done_ns = now_ns();
  clock_ = std::move(clock);
}

bool WorkMark::query() const {
  if (clock_ && clock_->done_ns.load() >= 0) return true;
  for (auto& w : work_) {
    auto b = w.lock();
    try {
      if (b && !b->ready_event().is_ready()) return false;
    } catch (const std::exception&) {  // donated since: consumed, so done
    }
  }
  for (auto& e : orphans_)
    if (!e->is_ready()) return false;
  return (work_.empty() && orphans_.empty()) || clock_->left.load() == 0;
}

void WorkMark::synchronize() const {
  for (auto& w : work_)
    if (auto b = w.lock()) b->ready_event().await("Event.synchronize");
  for (auto& e : orphans_) {
    try {
      e->await("Event.synchronize");
    } catch (const std::exception&) {  // nobody holds its result: only the wait counts
    }
  }
  // The last callback may still be on its way: completion is what it stamps.
  for (int i = 0; clock_ && clock_->done_ns.load() < 0 && i < 100000; ++i) std::this_thread::yield();
  if (clock_ && clock_->done_ns.load() < 0) clock_->done_ns = now_ns();
}

double WorkMark::elapsed_ms(const WorkMark& end) const {
  TORCH_CHECK(clock_ && end.clock_, "elapsed_time: both events must be recorded before measuring");
  synchronize();
  end.synchronize();
  return static_cast<double>(end.clock_->done_ns.load() - clock_->done_ns.load()) / 1e6;
}

}  // namespace torch_tpu::record
