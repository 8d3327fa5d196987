#include "hooks/host_alias.h"

#include <ATen/ops/from_blob.h>

#include <mutex>
#include <unordered_map>

#include "aten/device.h"
#include "aten/storage.h"
#include "record/op_call.h"

namespace torch_tpu {

namespace {
// Aliases hold a reference to the buffer they view. An alias still in use
// (a collective in flight) makes the buffer shared, as any other holder
// does; a released one (its collective done, though Gloo's kept work still
// holds the CPU tensor) must not: otherwise every collective after the
// first on the same tensor would stage through a copy.
struct AliasRecord {
  runtime::BufferPtr buf;
  bool active = true;  // under g_mu
};
struct AliasCounts {
  int total = 0;   // live aliases of the buffer
  int active = 0;  // of which not released
};
std::mutex g_mu;
std::unordered_map<const void*, AliasCounts>& counts() {
  static auto* m = new std::unordered_map<const void*, AliasCounts>();
  return *m;
}

void alias_deleter(void* ctx) {
  auto* r = static_cast<AliasRecord*>(ctx);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = counts().find(r->buf.get());
    if (it != counts().end()) {
      if (r->active) --it->second.active;
      if (--it->second.total == 0) counts().erase(it);
    }
  }
  // The reference goes after the count: a check in between sees one more
  // holder than aliases, and refuses (safe), never the reverse.
  delete r;
}
}  // namespace

bool release_host_alias(const at::Tensor& alias) {
  if (!alias.defined() || !alias.has_storage()) return false;
  const c10::DataPtr& dp = alias.storage().data_ptr();
  if (dp.get_deleter() != &alias_deleter) return false;
  auto* r = static_cast<AliasRecord*>(dp.get_context());
  std::lock_guard<std::mutex> lock(g_mu);
  if (r->active) {
    r->active = false;
    --counts()[r->buf.get()].active;
  }
  return true;
}

std::optional<at::Tensor> host_alias(const at::Tensor& t) {
  if (t.device().type() != c10::DeviceType::PrivateUse1 || !t.is_contiguous() || t.numel() == 0) return std::nullopt;
  runtime::Client& c = client();
  if (c.platform_name() != "cpu") return std::nullopt;
  record::synchronize();
  StorageSlot* s = slot_of(t.storage());
  materialize_slot(s);
  if (!s->buffer || s->pending || s->elem != to_elem(t.scalar_type())) return std::nullopt;
  if (static_cast<size_t>(s->numel) * t.element_size() < (t.storage_offset() + t.numel()) * t.element_size())
    return std::nullopt;
  // The slot's reference is the only one besides released aliases: no other
  // storage, pending graph or collective in flight holds this buffer, so
  // writing it changes `t` alone.
  std::lock_guard<std::mutex> lock(g_mu);
  AliasCounts n;
  if (auto it = counts().find(s->buffer.get()); it != counts().end()) n = it->second;
  if (n.active > 0 || s->buffer.use_count() - n.total != 1) return std::nullopt;
  const uintptr_t ptr = s->buffer->unsafe_pointer();
  if (ptr == 0) return std::nullopt;
  auto* rec = new AliasRecord{s->buffer};
  AliasCounts& c2 = counts()[s->buffer.get()];
  ++c2.total;
  ++c2.active;
  char* base = reinterpret_cast<char*>(ptr) + t.storage_offset() * t.element_size();
  return at::for_blob(base, t.sizes())
      .strides(t.strides())
      .context(rec, &alias_deleter)
      .options(at::TensorOptions().dtype(t.scalar_type()).device(c10::kCPU))
      .make_tensor();
}

}  // namespace torch_tpu
