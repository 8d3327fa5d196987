#include "runtime/device_spans.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <map>
#include <thread>

namespace torch_tpu::runtime {

DeviceSpans& DeviceSpans::get() {
  static DeviceSpans* s = new DeviceSpans();  // never destroyed: plugin threads may still call back at exit
  return *s;
}

int64_t DeviceSpans::now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

void DeviceSpans::set_enabled(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  if (on) {
    pending_.clear();
    dropped_ = 0;
  }
  enabled_.store(on);
}

void DeviceSpans::note_launch(std::string name, int device, int64_t launch_ns, Event done) {
  auto p = std::make_shared<Pending>();
  p->name = std::move(name);
  p->device = device;
  p->launch_ns = launch_ns;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.size() >= kMaxSpans) {
      ++dropped_;
      return;
    }
    pending_.push_back(p);
  }
  // The callback owns a reference, so it stays valid after take() forgets it.
  // A failed program still ends; its error surfaces where its value is read.
  done.on_ready([p](const std::string&) { p->end_ns.store(std::max<int64_t>(now_ns(), p->launch_ns)); });
}

std::vector<DeviceSpan> DeviceSpans::take(int64_t wait_ms) {
  std::vector<std::shared_ptr<Pending>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(pending_);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<int64_t>(wait_ms, 0));
  for (const auto& p : all) {
    while (p->end_ns.load() == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  // Completion callbacks run on plugin threads and can be late: a program
  // whose callback ran after a later program's had already ended by then.
  // So walking back from the newest, an end is at most the next one's.
  std::vector<int64_t> ends(all.size());
  std::map<int, int64_t> next_end;  // per device
  for (size_t i = all.size(); i-- > 0;) {
    int64_t end = all[i]->end_ns.load();
    if (end == 0) continue;  // still running at the deadline
    auto it = next_end.find(all[i]->device);
    if (it != next_end.end()) end = std::min(end, it->second);
    ends[i] = end;
    next_end[all[i]->device] = end;
  }
  std::vector<DeviceSpan> out;
  out.reserve(all.size());
  std::map<int, int64_t> prev_end;  // per device
  for (size_t i = 0; i < all.size(); ++i) {
    const auto& p = all[i];
    const int64_t end = ends[i];
    if (end == 0) continue;
    int64_t& prev = prev_end[p->device];
    DeviceSpan s;
    s.name = p->name;
    s.device = p->device;
    s.start_ns = std::min(std::max(p->launch_ns, prev), end);
    s.end_ns = end;
    prev = std::max(prev, end);
    out.push_back(std::move(s));
  }
  return out;
}

}  // namespace torch_tpu::runtime
