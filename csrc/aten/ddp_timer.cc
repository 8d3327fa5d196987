// DDP's reducer times forward, backward compute and communication per
// iteration through a timer registered for the device type; without one it
// warns on every tpu model ("Time stats are currently only collected for CPU
// and CUDA devices"). This one reads the host clock, as CPU's does: tpu ops
// are asynchronous, so the times are those of launch, not completion.
#include <torch/csrc/distributed/c10d/reducer_timer.hpp>

namespace {

class TpuTimer : public c10d::Timer {
 public:
  explicit TpuTimer(c10::Device /*device*/) {}

  std::optional<int64_t> measureDifference(Event start, Event end) override {
    int64_t a = getTimeRef(start);
    int64_t b = getTimeRef(end);
    // Unset, or out of order (the start was not recorded this iteration).
    if (a == c10d::kUnsetTime || b == c10d::kUnsetTime || b < a) return std::nullopt;
    return b - a;
  }
};

}  // namespace

namespace c10d {
C10_REGISTER_TYPED_CLASS(TimerRegistry, c10::kPrivateUse1, TpuTimer);
}  // namespace c10d
