#include "aten/pinned_host.h"

#include <c10/core/impl/alloc_cpu.h>

#include <map>
#include <mutex>

namespace torch_tpu {
namespace {

// Live allocations, base -> size, so that an interior pointer (a view's
// data_ptr) is found by the allocation that holds it.
struct Registry {
  std::mutex mu;
  std::map<const char*, size_t> live;
};
Registry& registry() {
  static auto* r = new Registry;  // outlives static destructors: tensors may die later
  return *r;
}

void free_pinned(void* p) {
  if (!p) return;
  {
    auto& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    r.live.erase(static_cast<const char*>(p));
  }
  c10::free_cpu(p);
}

class PinnedHostAllocator final : public c10::Allocator {
 public:
  c10::DataPtr allocate(size_t n) override {
    void* p = n ? c10::alloc_cpu(n) : nullptr;
    if (p) {
      auto& r = registry();
      std::lock_guard<std::mutex> lock(r.mu);
      r.live[static_cast<const char*>(p)] = n;
    }
    return {p, p, &free_pinned, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &free_pinned; }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
};

}  // namespace

c10::Allocator* pinned_host_allocator() {
  static PinnedHostAllocator a;
  return &a;
}

bool is_pinned_host_ptr(const void* p) {
  if (!p) return false;
  auto* c = static_cast<const char*>(p);
  auto& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto it = r.live.upper_bound(c);
  if (it == r.live.begin()) return false;
  --it;
  return c < it->first + it->second;
}

}  // namespace torch_tpu
