#include "runtime/buffer.h"

#include <atomic>

#include "runtime/error.h"
#include "runtime/plugin.h"

namespace torch_tpu::runtime {

ClientCore::~ClientCore() {
  if (client == nullptr) return;
  PJRT_Client_Destroy_Args a{};
  a.struct_size = PJRT_Client_Destroy_Args_STRUCT_SIZE;
  a.client = client;
  take_error(api, api->PJRT_Client_Destroy(&a));
}

namespace {
std::atomic<void (*)(Event&&)> g_unfinished_sink{nullptr};
}  // namespace

void Buffer::set_unfinished_sink(void (*sink)(Event&&)) { g_unfinished_sink.store(sink); }

Buffer::~Buffer() {
  if (buf_ == nullptr) return;
  // Only a live buffer's event is worth keeping: the program a buffer was
  // donated to is tracked through its own results. Fetching the event of
  // every donated buffer (24 per AdamW step of the demo MLP) cost ~7% of a
  // compiled step's host time.
  if (auto sink = g_unfinished_sink.load(std::memory_order_relaxed); unfinished_ && sink && !is_deleted()) {
    try {
      Event e = ready_event();
      if (!e.is_ready()) sink(std::move(e));
    } catch (...) {  // a destructor must not throw; the value is gone either way
    }
  }
  PJRT_Buffer_Destroy_Args a{};
  a.struct_size = PJRT_Buffer_Destroy_Args_STRUCT_SIZE;
  a.buffer = buf_;
  take_error(client_->api, client_->api->PJRT_Buffer_Destroy(&a));
}

bool Buffer::is_deleted() const {
  PJRT_Buffer_IsDeleted_Args a{};
  a.struct_size = PJRT_Buffer_IsDeleted_Args_STRUCT_SIZE;
  a.buffer = buf_;
  PJRT_Error* err = client_->api->PJRT_Buffer_IsDeleted(&a);
  if (err != nullptr) {
    take_error(client_->api, err);
    return false;
  }
  return a.is_deleted;
}

PJRT_Buffer_Type Buffer::element_type() const {
  PJRT_Buffer_ElementType_Args a{};
  a.struct_size = PJRT_Buffer_ElementType_Args_STRUCT_SIZE;
  a.buffer = buf_;
  check(client_->api, client_->api->PJRT_Buffer_ElementType(&a), "PJRT_Buffer_ElementType");
  return a.type;
}

std::vector<int64_t> Buffer::dims() const {
  PJRT_Buffer_Dimensions_Args a{};
  a.struct_size = PJRT_Buffer_Dimensions_Args_STRUCT_SIZE;
  a.buffer = buf_;
  check(client_->api, client_->api->PJRT_Buffer_Dimensions(&a), "PJRT_Buffer_Dimensions");
  return std::vector<int64_t>(a.dims, a.dims + a.num_dims);
}

size_t Buffer::on_device_bytes() const {
  PJRT_Buffer_OnDeviceSizeInBytes_Args a{};
  a.struct_size = PJRT_Buffer_OnDeviceSizeInBytes_Args_STRUCT_SIZE;
  a.buffer = buf_;
  check(client_->api, client_->api->PJRT_Buffer_OnDeviceSizeInBytes(&a), "PJRT_Buffer_OnDeviceSizeInBytes");
  return a.on_device_size_in_bytes;
}

Event Buffer::ready_event() const {
  PJRT_Buffer_ReadyEvent_Args a{};
  a.struct_size = PJRT_Buffer_ReadyEvent_Args_STRUCT_SIZE;
  a.buffer = buf_;
  check(client_->api, client_->api->PJRT_Buffer_ReadyEvent(&a), "PJRT_Buffer_ReadyEvent");
  return Event(client_->api, a.event);
}

Event Buffer::to_host_async(void* dst, size_t size) const {
  PJRT_Buffer_ToHostBuffer_Args a{};
  a.struct_size = PJRT_Buffer_ToHostBuffer_Args_STRUCT_SIZE;
  a.src = buf_;
  a.dst = dst;
  a.dst_size = size;
  check(client_->api, client_->api->PJRT_Buffer_ToHostBuffer(&a), "PJRT_Buffer_ToHostBuffer");
  return Event(client_->api, a.event);
}

void Buffer::to_host(void* dst, size_t size) const { to_host_async(dst, size).await("PJRT_Buffer_ToHostBuffer"); }

}  // namespace torch_tpu::runtime

namespace torch_tpu::runtime {

std::shared_ptr<Buffer> Buffer::copy_to_device(PJRT_Device* device) const {
  const PJRT_Api* api = client_->api;
  PJRT_Buffer_CopyToDevice_Args a{};
  a.struct_size = PJRT_Buffer_CopyToDevice_Args_STRUCT_SIZE;
  a.buffer = buf_;
  a.dst_device = device;
  check(api, api->PJRT_Buffer_CopyToDevice(&a), "PJRT_Buffer_CopyToDevice");
  return std::make_shared<Buffer>(client_, a.dst_buffer);
}

uintptr_t Buffer::unsafe_pointer() const {
  const PJRT_Api* api = client_->api;
  if (!TT_PJRT_HAS(api, PJRT_Buffer_UnsafePointer)) return 0;
  PJRT_Buffer_UnsafePointer_Args a{};
  a.struct_size = PJRT_Buffer_UnsafePointer_Args_STRUCT_SIZE;
  a.buffer = buf_;
  if (!take_error(api, api->PJRT_Buffer_UnsafePointer(&a)).empty()) return 0;
  return a.buffer_pointer;
}

namespace {
void release_window_base(void*, void* base) { delete static_cast<BufferPtr*>(base); }
}  // namespace

BufferPtr window_of(const BufferPtr& base, size_t byte_offset, const std::vector<int64_t>& dims,
                    PJRT_Buffer_Type type) {
  const ClientRef& core = base->client();
  const PJRT_Api* api = core->api;
  if (!TT_PJRT_HAS(api, PJRT_Client_CreateViewOfDeviceBuffer) || !TT_PJRT_HAS(api, PJRT_Buffer_Device)) return nullptr;
  const uintptr_t ptr = base->unsafe_pointer();
  if (ptr == 0) return nullptr;
  PJRT_Buffer_Device_Args d{};
  d.struct_size = PJRT_Buffer_Device_Args_STRUCT_SIZE;
  d.buffer = base->get();
  if (!take_error(api, api->PJRT_Buffer_Device(&d)).empty()) return nullptr;
  auto* keep = new BufferPtr(base);
  PJRT_Client_CreateViewOfDeviceBuffer_Args a{};
  a.struct_size = PJRT_Client_CreateViewOfDeviceBuffer_Args_STRUCT_SIZE;
  a.client = core->client;
  a.device_buffer_ptr = reinterpret_cast<char*>(ptr) + byte_offset;
  a.dims = dims.data();
  a.num_dims = dims.size();
  a.element_type = type;
  a.device = d.device;
  a.on_delete_callback = &release_window_base;
  a.on_delete_callback_arg = keep;
  if (!take_error(api, api->PJRT_Client_CreateViewOfDeviceBuffer(&a)).empty() || a.buffer == nullptr) {
    delete keep;
    return nullptr;
  }
  return std::make_shared<Buffer>(core, a.buffer);
}

}  // namespace torch_tpu::runtime
