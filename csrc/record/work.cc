// Work tracking: the buffers whose programs may still run, for
// torch.tpu.synchronize(), work_in_flight() and launch blocking; and the
// torch.profiler ranges of the compile layer.
#include "record/op_call.h"

#include <ATen/record_function.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "compile/dump.h"
#include "compile/executable_cache.h"
#include "record/driver.h"
#include "runtime/error.h"

#include "record/op_call_internal.h"

namespace torch_tpu::record {

using ir::ElemType;
using ir::Value;

namespace {

// Buffers produced since the last synchronize(), for torch.tpu.synchronize,
// and the ready events of those destroyed before their work ended (so that
// synchronize waits for work nobody holds a result of). Both leak on purpose:
// buffers die during static destruction too.
std::mutex g_pending_mu;
std::vector<std::weak_ptr<runtime::Buffer>>& g_pending = *new std::vector<std::weak_ptr<runtime::Buffer>>();
std::vector<std::shared_ptr<runtime::Event>>& g_orphans = *new std::vector<std::shared_ptr<runtime::Event>>();

// torch.profiler ranges for the compile layer's work (compiles, cache loads).
void* span_begin(const char* name) {
  auto rf = std::make_unique<at::RecordFunction>(at::RecordScope::USER_SCOPE);
  if (!rf->isActive()) return nullptr;
  rf->before(name);
  return rf.release();
}
void span_end(void* rf) { delete static_cast<at::RecordFunction*>(rf); }
const bool g_spans_installed = (set_span_hooks(SpanHooks{&span_begin, &span_end}), true);

void keep_orphan(runtime::Event&& e) {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  if (g_orphans.size() >= 1024) std::erase_if(g_orphans, [](const auto& o) { return o->is_ready(); });
  g_orphans.push_back(std::make_shared<runtime::Event>(std::move(e)));
}

void track(const runtime::BufferPtr& b) {
  static bool sink_set = (runtime::Buffer::set_unfinished_sink(&keep_orphan), true);
  (void)sink_set;
  b->mark_unfinished();
  std::lock_guard<std::mutex> lock(g_pending_mu);
  if (g_pending.size() > 8192) {
    std::vector<std::weak_ptr<runtime::Buffer>> live;
    for (auto& w : g_pending)
      if (!w.expired()) live.push_back(w);
    g_pending.swap(live);
  }
  g_pending.push_back(b);
}

}  // namespace

namespace {
std::atomic<bool>& blocking_flag() {
  static std::atomic<bool> v{env_flag("TORCH_TPU_LAUNCH_BLOCKING") || env_flag("TPU_LAUNCH_BLOCKING")};
  return v;
}
}  // namespace

bool launch_blocking() { return blocking_flag().load(std::memory_order_relaxed); }
void set_launch_blocking(bool on) { blocking_flag().store(on); }

std::vector<runtime::BufferPtr> enqueued_work(std::string_view why) {
  current_driver().sync_point(SyncReason::kSynchronize, why);
  std::vector<runtime::BufferPtr> live;
  std::lock_guard<std::mutex> lock(g_pending_mu);
  for (auto& w : g_pending)
    // A buffer donated to a later program (its handle kept alive until that
    // program runs) has no event of its own: that program's results count.
    if (auto b = w.lock(); b && !b->is_deleted()) live.push_back(std::move(b));
  return live;
}

std::vector<std::shared_ptr<runtime::Event>> unfinished_orphans() {
  std::lock_guard<std::mutex> lock(g_pending_mu);
  std::erase_if(g_orphans, [](const auto& o) { return o->is_ready(); });
  return g_orphans;
}

int64_t work_in_flight() {
  int64_t n = 0;
  for (auto& b : enqueued_work("work_in_flight")) {
    try {
      n += !b->ready_event().is_ready();
    } catch (const std::exception&) {  // donated to a later program: counted there
    }
  }
  return n + static_cast<int64_t>(unfinished_orphans().size());
}

void synchronize() {
  current_driver().sync_point(SyncReason::kSynchronize, "torch.tpu.synchronize");
  std::vector<std::weak_ptr<runtime::Buffer>> pending;
  std::vector<std::shared_ptr<runtime::Event>> orphans;
  {
    std::lock_guard<std::mutex> lock(g_pending_mu);
    pending.swap(g_pending);
    orphans.swap(g_orphans);
  }
  for (auto& w : pending) {
    auto b = w.lock();
    // A buffer donated to a later program has no event of its own; that
    // program's results are tracked and waited for instead.
    if (b && !b->is_deleted()) b->ready_event().await("torch.tpu.synchronize");
  }
  // Nobody holds an orphan's result, so its failure (already reported by the
  // op that made it, or unobservable) is not raised here; only the wait counts.
  for (auto& e : orphans) {
    try {
      e->await("torch.tpu.synchronize");
    } catch (const runtime::PjrtError&) {
    }
  }
}

void OpCall::track_result(const runtime::BufferPtr& b, std::string_view what) {
  if (launch_blocking())
    b->ready_event().await(std::string(what).c_str());
  else
    track(b);
}

}  // namespace torch_tpu::record
