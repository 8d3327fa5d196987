// Launches of multi-device programs whose partitions (or replicas) meet in a
// collective. On XLA:CPU each partition runs on a host worker thread and
// holds it while it waits for its partners; with several launches queued the
// workers fill with partitions of different launches, none completes, and
// XLA aborts the process after 40 s. There a launch must wait until the
// previous one has finished. Devices with their own queues (TPU, GPU) hold
// no host thread in a collective, so launches pass straight through and the
// host can run ahead of the devices as with any other program.
#pragma once
#include <mutex>
#include <string>
#include <vector>

#include "runtime/buffer.h"

namespace torch_tpu::runtime {

class LaunchGate {
 public:
  // `serialise`: launches wait for the previous one (XLA:CPU).
  explicit LaunchGate(bool serialise) : serialise_(serialise) {}
  static bool serialises(const std::string& platform_name) { return platform_name == "cpu"; }

  // Held for the length of one launch; `done` names, per device, a result
  // of the launch that is ready when the launch has finished there.
  class Pass {
   public:
    void done(std::vector<BufferPtr> results) {
      if (gate_.serialise_) gate_.last_ = std::move(results);
    }

   private:
    friend class LaunchGate;
    Pass(LaunchGate& g, std::unique_lock<std::mutex> l) : gate_(g), lock_(std::move(l)) {}
    LaunchGate& gate_;
    std::unique_lock<std::mutex> lock_;
  };

  // Waits for the previous launch when serialising (`what` names the program
  // in an error), then lets one launch through.
  Pass enter(const char* what) {
    std::unique_lock<std::mutex> l(mu_);
    for (const auto& b : last_) b->ready_event().await(what);
    last_.clear();
    return Pass(*this, std::move(l));
  }

  bool serialise() const { return serialise_; }

 private:
  const bool serialise_;
  std::mutex mu_;
  std::vector<BufferPtr> last_;
};

}  // namespace torch_tpu::runtime
