#include "record/window.h"

#include "aten/device.h"
#include "record/driver.h"
#include "record/op_call_internal.h"
#include "runtime/buffer.h"

namespace torch_tpu::record {
namespace {

// XLA:CPU refuses a view whose address is not a multiple of its minimum
// alignment (64 bytes in the plugins measured). A window therefore starts at
// the aligned address at or before the view, and the view keeps the few
// leading elements as its offset: an op's key then holds that offset (at
// most 64 / element size values, 8 for int64) instead of the storage's size
// and the view's position.
constexpr int64_t kWindowAlign = 64;

bool windows_on() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_EAGER_WINDOWS");
    return !(v && std::string_view(v) == "0");
  }();
  return on;
}

bool integral(ir::ElemType e) { return !ir::is_float(e) && !ir::is_complex(e); }

}  // namespace

std::optional<Window> window_for(StorageSlot* s, const ViewMeta& v, int device) {
  if (!windows_on() || !integral(v.elem) || !current_driver().one_program_per_call()) return std::nullopt;
  const int64_t n = v.numel();
  if (n == 0 || !v.is_contiguous() || s->sharded || !has_value(s)) return std::nullopt;
  static const bool host_memory = client().platform_name() == "cpu";
  if (!host_memory) return std::nullopt;
  // A queued write (compile-ahead) lands first, so that the decision never
  // depends on whether a compile has finished.
  if (s->pending) current_driver().before_host_read(s);
  if (s->pending || !s->buffer || s->elem != v.elem) return std::nullopt;
  if (n >= s->numel || v.offset + n > s->numel) return std::nullopt;  // the whole storage: nothing to gain
  // A window carries no event: the storage's value must be there first.
  runtime::Event ready = s->buffer->ready_event();
  if (!ready.is_ready()) {
    try {
      ready.await("a window's storage");
    } catch (const std::exception&) {
      return std::nullopt;  // a failed value: the usual path reports it
    }
  }
  const int64_t esize = ir::byte_size(v.elem);
  const int64_t start = v.offset * esize;
  const int64_t lead = (start % kWindowAlign) / esize;
  const int64_t len = lead + n;
  runtime::BufferPtr w =
      runtime::window_of(s->buffer, static_cast<size_t>(start - lead * esize), {len}, to_pjrt(v.elem));
  if (!w) return std::nullopt;
  Window out;
  out.slot = std::make_unique<StorageSlot>();
  out.slot->nbytes = static_cast<size_t>(len * esize);
  out.slot->device = device;
  out.slot->elem = v.elem;
  out.slot->numel = len;
  out.slot->buffer = std::move(w);
  out.view.elem = v.elem;
  out.view.sizes = v.sizes;
  out.view.strides = v.strides;  // contiguous (checked above), size-1 strides canonical
  out.view.offset = lead;
  return out;
}

bool read_at_runtime_position(const StorageSlot* s, const ViewMeta& v) {
  // A gather per element: for the small views of generate()'s glue.
  constexpr int64_t kMaxElems = int64_t{1} << 16;
  if (!windows_on() || !integral(v.elem) || !current_driver().runtime_lengths()) return false;
  const int64_t n = v.numel();
  const int64_t storage_elems = static_cast<int64_t>(s->nbytes) / ir::byte_size(v.elem);
  return n > 0 && n <= kMaxElems && !s->sharded && !v.covers(storage_elems);
}

}  // namespace torch_tpu::record
