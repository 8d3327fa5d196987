// Device execution spans for the profiler. PJRT has no "program started"
// event, only completion events, so a span runs from the later of its launch
// and the end of the previous program on the same device (XLA runs one
// device's programs in launch order) to its completion event. Times are
// CLOCK_REALTIME nanoseconds, the clock Kineto's traces use.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "runtime/event.h"

namespace torch_tpu::runtime {

struct DeviceSpan {
  std::string name;
  int device = 0;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
};

class DeviceSpans {
 public:
  static DeviceSpans& get();
  static int64_t now_ns();

  // Cheap enough for the launch path: one relaxed load when off.
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  // Turning recording on drops anything left from an earlier recording.
  void set_enabled(bool on);

  // A program launched at `launch_ns`; `done` fires when the device ends it
  // (an invalid event means it already has).
  void note_launch(std::string name, int device, int64_t launch_ns, Event done);

  // Waits up to `wait_ms` for launched programs to end, then returns the
  // ended spans in launch order and forgets every span, ended or not.
  std::vector<DeviceSpan> take(int64_t wait_ms);

  // Spans dropped because a recording passed `kMaxSpans`.
  int64_t dropped() const { return dropped_.load(); }
  static constexpr size_t kMaxSpans = 1 << 20;

 private:
  struct Pending {
    std::string name;
    int device;
    int64_t launch_ns;
    std::atomic<int64_t> end_ns{0};  // 0 until the completion event fires
  };
  std::atomic<bool> enabled_{false};
  std::atomic<int64_t> dropped_{0};
  std::mutex mu_;
  std::vector<std::shared_ptr<Pending>> pending_;
};

}  // namespace torch_tpu::runtime
