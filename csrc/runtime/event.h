// RAII wrapper over PJRT_Event: completion of async transfers and executions.
#pragma once
#include <functional>
#include <string>

#include "pjrt_c_api.h"

namespace torch_tpu::runtime {

class Event {
 public:
  Event() = default;
  Event(const PJRT_Api* api, PJRT_Event* ev) : api_(api), ev_(ev) {}
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& o) noexcept { *this = std::move(o); }
  Event& operator=(Event&& o) noexcept;
  ~Event() { reset(); }

  bool valid() const { return ev_ != nullptr; }
  bool is_ready() const;
  // Blocks until the event fires; throws PjrtError if it failed.
  void await(const char* what = "PJRT_Event_Await");
  // Runs `fn(error_message)` (empty on success) when the event fires, on a
  // plugin thread. The Event object can be dropped afterwards.
  void on_ready(std::function<void(const std::string&)> fn);

 private:
  void reset();
  const PJRT_Api* api_ = nullptr;
  PJRT_Event* ev_ = nullptr;
};

}  // namespace torch_tpu::runtime
