#include "runtime/event.h"

#include "runtime/error.h"

namespace torch_tpu::runtime {

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    reset();
    api_ = o.api_;
    ev_ = o.ev_;
    o.ev_ = nullptr;
  }
  return *this;
}

void Event::reset() {
  if (ev_ == nullptr) return;
  PJRT_Event_Destroy_Args a{};
  a.struct_size = PJRT_Event_Destroy_Args_STRUCT_SIZE;
  a.event = ev_;
  take_error(api_, api_->PJRT_Event_Destroy(&a));
  ev_ = nullptr;
}

bool Event::is_ready() const {
  if (ev_ == nullptr) return true;
  PJRT_Event_IsReady_Args a{};
  a.struct_size = PJRT_Event_IsReady_Args_STRUCT_SIZE;
  a.event = ev_;
  check(api_, api_->PJRT_Event_IsReady(&a), "PJRT_Event_IsReady");
  return a.is_ready;
}

void Event::await(const char* what) {
  if (ev_ == nullptr) return;
  PJRT_Event_Await_Args a{};
  a.struct_size = PJRT_Event_Await_Args_STRUCT_SIZE;
  a.event = ev_;
  check(api_, api_->PJRT_Event_Await(&a), what);
  PJRT_Event_Error_Args e{};
  e.struct_size = PJRT_Event_Error_Args_STRUCT_SIZE;
  e.event = ev_;
  check(api_, api_->PJRT_Event_Error(&e), what);
}

namespace {
struct OnReadyCtx {
  const PJRT_Api* api;
  std::function<void(const std::string&)> fn;
};
void on_ready_trampoline(PJRT_Error* err, void* user) {
  auto* ctx = static_cast<OnReadyCtx*>(user);
  std::string msg = take_error(ctx->api, err);
  ctx->fn(msg);
  delete ctx;
}
}  // namespace

void Event::on_ready(std::function<void(const std::string&)> fn) {
  if (ev_ == nullptr) {
    fn({});
    return;
  }
  auto* ctx = new OnReadyCtx{api_, std::move(fn)};
  PJRT_Event_OnReady_Args a{};
  a.struct_size = PJRT_Event_OnReady_Args_STRUCT_SIZE;
  a.event = ev_;
  a.callback = &on_ready_trampoline;
  a.user_arg = ctx;
  PJRT_Error* err = api_->PJRT_Event_OnReady(&a);
  if (err != nullptr) {
    delete ctx;
    check(api_, err, "PJRT_Event_OnReady");
  }
}

}  // namespace torch_tpu::runtime
