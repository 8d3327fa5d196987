// A point in a device's work queue: what torch.Event records on tpu.
//
// PJRT runs a device's programs in the order their buffers depend on each
// other, so a stream is not a separate queue here: an event covers all work
// enqueued before it, and a stream waiting on an event needs no action (any
// op it runs afterwards reads buffers whose producers PJRT already waits
// for). Completion times come from the buffers' ready callbacks, so
// elapsed_time measures device work, not when the host asked.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/buffer.h"

namespace torch_tpu::record {

class WorkMark {
 public:
  void record();
  bool query() const;
  void synchronize() const;
  // Milliseconds between this mark's completion and `end`'s.
  double elapsed_ms(const WorkMark& end) const;

 private:
  struct Clock {
    std::atomic<int64_t> left{0};
    std::atomic<int64_t> done_ns{-1};
    uint64_t seq = 0;  // order of record() calls, process-wide
  };
  std::vector<std::shared_ptr<runtime::Event>> work_;     // ready events of the work before the mark
  std::vector<std::shared_ptr<runtime::Event>> orphans_;  // work whose results were dropped
  std::shared_ptr<Clock> clock_;
};

}  // namespace torch_tpu::record
