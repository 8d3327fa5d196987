#include "record/work_mark.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "record/op_call.h"

namespace torch_tpu::record {
namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
std::atomic<uint64_t> next_seq{0};
}  // namespace

void WorkMark::record() {
  std::vector<runtime::BufferPtr> live = enqueued_work("Event.record");
  auto clock = std::make_shared<Clock>();
  clock->left = 1;  // held until every callback is registered (one may fire at once)
  clock->seq = ++next_seq;
  work_.clear();
  // The events are taken now: a buffer may be donated to a later program
  // before this mark is waited on, and a donated buffer has no event left.
  for (auto& b : live) {
    auto ev = std::make_shared<runtime::Event>(b->ready_event());
    ++clock->left;
    ev->on_ready([clock](const std::string&) {
      if (--clock->left == 0) clock->done_ns = now_ns();
    });
    work_.push_back(std::move(ev));
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
  for (auto& e : work_)
    if (!e->is_ready()) return false;
  for (auto& e : orphans_)
    if (!e->is_ready()) return false;
  return (work_.empty() && orphans_.empty()) || clock_->left.load() == 0;
}

void WorkMark::synchronize() const {
  for (auto& e : work_) e->await("Event.synchronize");
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
  // A mark covers all work enqueued before it, so the later-recorded of the
  // two cannot finish first. Their stamps are taken in ready callbacks, which
  // PJRT may deliver out of order (seen: -0.06 ms), so order them as recorded.
  int64_t start = clock_->done_ns.load(), stop = end.clock_->done_ns.load();
  if (end.clock_->seq > clock_->seq)
    stop = std::max(stop, start);
  else
    start = std::max(start, stop);
  return static_cast<double>(stop - start) / 1e6;
}

}  // namespace torch_tpu::record
