// RAII wrapper over PJRT_Buffer: one immutable device array.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/client_core.h"
#include "runtime/event.h"

namespace torch_tpu::runtime {

class Buffer {
 public:
  Buffer(ClientRef client, PJRT_Buffer* buf) : client_(std::move(client)), buf_(buf) {}
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer();

  PJRT_Buffer* get() const { return buf_; }
  const ClientRef& client() const { return client_; }
  // The address of the buffer's memory, for platforms whose device memory
  // the host addresses; 0 where the plugin gives none.
  uintptr_t unsafe_pointer() const;
  PJRT_Buffer_Type element_type() const;
  std::vector<int64_t> dims() const;
  size_t on_device_bytes() const;
  // Fires when the value has been computed (or failed).
  Event ready_event() const;
  // True once the buffer was donated to a program (or deleted): its memory
  // belongs to that program now, whose own results stand for the work.
  bool is_deleted() const;
  // Starts an async copy into `dst` (exactly `size` bytes, dense row-major).
  Event to_host_async(void* dst, size_t size) const;
  // A copy on another device of the same client (asynchronous: the new
  // buffer's ready event fires when the copy is done).
  std::shared_ptr<Buffer> copy_to_device(PJRT_Device* device) const;
  // Blocking copy into `dst`.
  void to_host(void* dst, size_t size) const;

  // The value comes from work that may still be running. If the buffer is
  // destroyed before that work ends, its ready event is handed to the sink
  // (set once by the layer that tracks work), so a later synchronize() still
  // waits for work whose results nobody holds any more.
  void mark_unfinished() { unfinished_ = true; }
  static void set_unfinished_sink(void (*sink)(Event&&));

 private:
  ClientRef client_;
  PJRT_Buffer* buf_;
  bool unfinished_ = false;
};
using BufferPtr = std::shared_ptr<Buffer>;

// A buffer of `dims` elements of `type` over `base`'s memory from
// `byte_offset` on, without a copy (PJRT_Client_CreateViewOfDeviceBuffer); it
// keeps `base` alive until the plugin releases it. For platforms whose device
// memory the host can address. The caller makes sure `base`'s value is
// computed first: the window carries no event of its own. Null where the
// plugin cannot make one (no such call, no device pointer, an address the
// plugin refuses), so callers fall back to reading `base` whole.
BufferPtr window_of(const BufferPtr& base, size_t byte_offset, const std::vector<int64_t>& dims, PJRT_Buffer_Type type);

}  // namespace torch_tpu::runtime
