#include "record/op_call.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <c10/util/Exception.h>

#include <array>
#include <cerrno>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <cstring>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "aten/device.h"
#include "compile/dump.h"
#include "aten/storage.h"
#include "compile/executable_cache.h"
#include "compile/metrics.h"
#include "record/driver.h"
#include "runtime/device_spans.h"
#include "runtime/error.h"

namespace torch_tpu::record {
namespace {

using ir::ElemType;
using ir::Value;

bool env_flag(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

// Host bytes of `s` as element type `t` (complex128 needs all 16).
using ScalarBits = std::array<uint64_t, 2>;
ScalarBits scalar_bits(const c10::Scalar& s, ElemType t) {
  ScalarBits bits{0, 0};
  auto put = [&](auto v) {
    static_assert(sizeof v <= sizeof bits);
    std::memcpy(bits.data(), &v, sizeof v);
  };
  switch (t) {
    case ElemType::kPred:
      put(static_cast<uint8_t>(s.toBool()));
      break;
    case ElemType::kS8:
      put(s.toChar());
      break;
    case ElemType::kU8:
      put(s.toByte());
      break;
    case ElemType::kS16:
      put(s.toShort());
      break;
    case ElemType::kS32:
      put(s.toInt());
      break;
    case ElemType::kS64:
      put(s.toLong());
      break;
    case ElemType::kU32:
      put(static_cast<uint32_t>(s.toLong()));
      break;
    case ElemType::kU64:
      put(static_cast<uint64_t>(s.toLong()));
      break;
    case ElemType::kF16:
      put(s.toHalf());
      break;
    case ElemType::kBF16:
      put(s.toBFloat16());
      break;
    case ElemType::kF32:
      put(s.toFloat());
      break;
    case ElemType::kF64:
      put(s.toDouble());
      break;
    case ElemType::kC64:
      put(s.toComplexFloat());
      break;
    case ElemType::kC128:
      put(s.toComplexDouble());
      break;
  }
  return bits;
}

// Small cache of 0-d device scalars: a loop doing `x * 0.9` transfers the
// 0.9 once.
runtime::BufferPtr device_scalar(const ScalarBits& bits, ElemType t, int device) {
  static std::mutex mu;
  static std::map<std::tuple<uint64_t, uint64_t, int, int>, runtime::BufferPtr> cache;
  auto k = std::make_tuple(bits[0], bits[1], static_cast<int>(t), device);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(k); it != cache.end()) return it->second;
  }
  auto buf = client().buffer_from_host(bits.data(), to_pjrt(t), {}, device);
  bump(metrics().h2d_count);
  bump(metrics().h2d_bytes, ir::byte_size(t));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();
  cache.emplace(k, buf);
  return buf;
}

// Whether a slot holds a value (run, or pending in a deferred graph).
bool has_value(const StorageSlot* s) { return s->buffer || s->pending || (s->sharded && !s->sharded->shards.empty()); }

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

ViewMeta view_of(const at::Tensor& t) {
  ViewMeta v;
  v.elem = to_elem(t.scalar_type());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  v.offset = t.storage_offset();
  return v;
}

namespace {
// A contiguous view as the 1-D view of the same elements.
ViewMeta flat_view_of(const at::Tensor& t) {
  ViewMeta v;
  v.elem = to_elem(t.scalar_type());
  v.sizes = {t.numel()};
  v.strides = {1};
  v.offset = t.storage_offset();
  return v;
}
}  // namespace

OpCall::OpCall(std::string_view name) : name_(name) {
  bump(metrics().ops_dispatched);
  key_.add(name);
}

int OpCall::slot_index(StorageSlot* s) {
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].slot == s) return static_cast<int>(i);
  slots_.push_back(SlotUse{s});
  return static_cast<int>(slots_.size() - 1);
}

void OpCall::key_view(const ViewMeta& v, int slot) {
  key_.add(static_cast<uint64_t>(v.elem) | (static_cast<uint64_t>(slot) << 8) |
           (static_cast<uint64_t>(v.sizes.size()) << 16));
  for (int64_t s : v.sizes) key_.add(static_cast<uint64_t>(s));
  for (int64_t s : v.strides) key_.add(static_cast<uint64_t>(s));
  key_.add(static_cast<uint64_t>(v.offset));
}

int OpCall::input(const at::Tensor& t) {
  TORCH_CHECK(t.defined(), name_, ": undefined tensor argument");
  Arg a;
  if (t.device().type() == c10::DeviceType::PrivateUse1) {
    int dev = t.device().index() < 0 ? 0 : t.device().index();
    TORCH_CHECK(device_ < 0 || device_ == dev,
                "Expected all tensors to be on the same device, but found at least two devices, tpu:", device_,
                " and tpu:", dev, "!");
    device_ = dev;
    a.kind = Arg::kView;
    a.view = flat_ ? flat_view_of(t) : view_of(t);
    a.elem = a.view.elem;
    a.slot = slot_index(slot_of(t.storage()));
    slots_[a.slot].read = true;
    key_.add(1);
    key_view(a.view, a.slot);
  } else {
    TORCH_CHECK(t.device().is_cpu() && t.dim() == 0,
                "Expected all tensors to be on the same device, but found at least two devices, tpu:0 and ", t.device(),
                "! (only 0-dim CPU tensors may be mixed with tpu tensors, as scalars)");
    a.kind = Arg::kScalarTensor;
    a.cpu = t;
    a.elem = to_elem(t.scalar_type());
    key_.add(2 | (static_cast<uint64_t>(a.elem) << 8));
  }
  args_.push_back(std::move(a));
  return static_cast<int>(args_.size() - 1);
}

int OpCall::scalar(const c10::Scalar& s, c10::ScalarType dtype) {
  Arg a;
  a.kind = Arg::kScalar;
  a.value = s;
  a.elem = to_elem(dtype);
  key_.add(3 | (static_cast<uint64_t>(a.elem) << 8));
  args_.push_back(std::move(a));
  return static_cast<int>(args_.size() - 1);
}

void OpCall::rng_state(c10::GeneratorImpl* gen, uint64_t seed, uint64_t offset, uint64_t advance) {
  scalar(c10::Scalar(static_cast<int64_t>(seed)), c10::kLong);
  scalar(c10::Scalar(static_cast<int64_t>(offset)), c10::kLong);
  auto g = c10::intrusive_ptr<c10::GeneratorImpl>::reclaim_copy(gen);
  for (int part = 0; part < 2; ++part) {
    Arg& a = args_[args_.size() - 2 + part];
    a.rng_part = part;
    a.gen = g;
    a.rng_advance = advance;
  }
  // The generator algorithm is in every random program's key: persistent
  // cache entries from before the switch to PHILOX are not reused.
  key_.add(std::string_view("rng:philox"));
}

OpCall& OpCall::attr(int64_t v) {
  key_.add(static_cast<uint64_t>(v));
  return *this;
}
OpCall& OpCall::attr(double v) {
  key_.add_double(v);
  return *this;
}
OpCall& OpCall::attr(c10::IntArrayRef v) {
  key_.add(v.size());
  for (int64_t x : v) key_.add(static_cast<uint64_t>(x));
  return *this;
}
OpCall& OpCall::attr(std::string_view v) {
  key_.add(v);
  return *this;
}

void OpCall::output(const at::Tensor& t) {
  TORCH_CHECK(t.device().type() == c10::DeviceType::PrivateUse1, name_, ": expected a tpu output tensor, got ",
              t.device());
  int dev = t.device().index() < 0 ? 0 : t.device().index();
  TORCH_CHECK(device_ < 0 || device_ == dev,
              "Expected all tensors to be on the same device, but found at least two devices, tpu:", device_,
              " and tpu:", dev, "!");
  device_ = dev;
  // As CPU's TensorIterator: a write through a view whose elements share
  // memory (an expanded tensor) has no defined result.
  at::assert_no_internal_overlap(t);
  ViewMeta v = flat_ ? flat_view_of(t) : view_of(t);
  int s = slot_index(slot_of(t.storage()));
  key_.add(4);
  key_view(v, s);
  outs_.emplace_back(s, std::move(v));
}

namespace {
std::string gib(int64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  return buf;
}
// torch.OutOfMemoryError for an op's results, with `cause` in parentheses.
[[noreturn]] void raise_oom(int device, std::string_view what, const std::string& cause, int64_t out_bytes) {
  ++memory_stats(device).num_ooms;
  const int64_t held = memory_stats(device).allocated.load();
  // Like CUDA's "Tried to allocate": the op's own results apart from what
  // other tensors hold (torch counts the result storages as allocated
  // before the device has made them).
  std::string sizes = out_bytes >= 0
                          ? "Tried to allocate " + gib(out_bytes) + " for its results; other tpu tensors hold " +
                                gib(std::max<int64_t>(held - out_bytes, 0))
                          : "tpu tensors allocated: " + gib(held);
  TORCH_CHECK_WITH(OutOfMemoryError, false, "tpu out of memory on tpu:", device, " while running ", what, " (", cause,
                   "). ", sizes,
                   ". Free tensors you no longer need (del, or zero_grad(set_to_none=True)) or use a smaller batch.");
  std::abort();  // unreachable: TORCH_CHECK_WITH threw
}
// Results larger than the device's whole memory never reach the plugin:
// XLA:CPU crashed now and then in long test runs on such a program.
// Checked only for large results, since it reads meminfo.
void check_fits_device(int device, std::string_view what, int64_t out_bytes) {
  if (out_bytes < (int64_t{64} << 20)) return;
  const size_t total = device_memory_info(device).second;
  if (total > 0 && static_cast<size_t>(out_bytes) > total)
    raise_oom(device, what, "the device has " + gib(static_cast<int64_t>(total)) + " in all", out_bytes);
}
}  // namespace

void OpCall::run(const Lowering& lower) {
  if (device_ < 0) device_ = 0;
  // Per-slot state decides the program's parameters, so it is in the key.
  for (auto& [s, v] : outs_) {
    if (v.numel() == 0) continue;
    SlotUse& u = slots_[s];
    int64_t storage_elems = static_cast<int64_t>(u.slot->nbytes) / ir::byte_size(v.elem);
    if (v.covers(storage_elems) && static_cast<int64_t>(u.slot->nbytes) == storage_elems * ir::byte_size(v.elem))
      u.full_write = true;
    u.written = true;
  }
  bool any_write = false;
  for (size_t i = 0; i < slots_.size(); ++i) {
    const SlotUse& u = slots_[i];
    const StorageSlot* s = u.slot;
    any_write |= u.written;
    bool has = has_value(s);
    key_.add((u.read ? 1 : 0) | (u.written ? 2 : 0) | (u.full_write ? 4 : 0) | (has ? 8 : 0) |
             (static_cast<uint64_t>(s->elem) << 8));
    key_.add(static_cast<uint64_t>(has ? s->numel : static_cast<int64_t>(s->nbytes)));
  }
  if (!any_write) return;  // every output is empty
  key_done_ = key_.finish();
  // Before any driver sees it, so that no program is compiled for it.
  check_fits_device(device_, name_, output_bytes());
  // Asked before any driver lock is held: it runs Python.
  if (dumping()) set_program_origin(std::string(name_) + "  at " + user_location());
  current_driver().dispatch(*this, lower);
}

bool OpCall::needs_param(const SlotUse& u) const {
  return has_value(u.slot) && (u.read || (u.written && !u.full_write));
}

std::pair<ElemType, int64_t> OpCall::written_elem(size_t si) const {
  const SlotUse& u = slots_[si];
  if (u.full_write || !has_value(u.slot)) {
    ElemType e = ElemType::kU8;
    for (auto& [s, v] : outs_)
      if (s == static_cast<int>(si) && v.numel() > 0) e = v.elem;
    return {e, static_cast<int64_t>(u.slot->nbytes) / ir::byte_size(e)};
  }
  return {u.slot->elem, u.slot->numel};
}

std::vector<Value> OpCall::assemble(ir::Builder& b, std::vector<Value>& storage, const std::vector<Value>& scalars,
                                    const Lowering& lower) const {
  // An unwritten storage reads as zeros (torch.empty is uninitialised).
  auto storage_value = [&](size_t si, ElemType e) {
    if (!storage[si].valid())
      storage[si] = b.constant(0, e, {static_cast<int64_t>(slots_[si].slot->nbytes) / ir::byte_size(e)});
    return storage[si];
  };
  std::vector<Value> ins;
  size_t k = 0;
  for (const Arg& a : args_) {
    if (a.kind == Arg::kView)
      ins.push_back(read_view(b, storage_value(a.slot, a.elem), a.view));
    else
      ins.push_back(scalars[k++]);
  }
  std::vector<Value> results = lower(b, ins);
  TORCH_INTERNAL_ASSERT(results.size() == outs_.size(), name_, ": lowering returned ", results.size(), " values for ",
                        outs_.size(), " outputs");
  std::vector<Value> final(slots_.size());
  for (size_t i = 0; i < outs_.size(); ++i) {
    auto& [s, v] = outs_[i];
    if (v.numel() == 0) continue;
    Value r = b.convert(results[i], v.elem);
    if (b.dims(r) != v.sizes) {
      if (b.type(r).numel() == v.numel())
        r = b.reshape(r, v.sizes);
      else
        r = b.broadcast_to(r, v.sizes);
    }
    if (slots_[s].full_write) {
      final[s] = b.reshape(r, {v.numel()});
    } else {
      Value base = final[s].valid() ? final[s] : storage_value(s, written_elem(s).first);
      final[s] = write_view(b, base, r, v);
    }
  }
  std::vector<Value> written;
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].written) written.push_back(final[i]);
  return written;
}

void OpCall::build_program(ir::Graph& g, const Lowering& lower) const {
  ir::Builder b(g);
  std::vector<Value> storage(slots_.size());
  for (size_t i = 0; i < slots_.size(); ++i)
    if (needs_param(slots_[i])) storage[i] = g.param(ir::TensorType{slots_[i].slot->elem, {slots_[i].slot->numel}});
  std::vector<Value> scalars;
  for (const Arg& a : args_)
    if (a.kind != Arg::kView) scalars.push_back(g.param(ir::TensorType{a.elem, {}}));
  g.set_outputs(assemble(b, storage, scalars, lower));
}

// TORCH_TPU_CHECK_KEYS=1: the structural fingerprint of the program each key
// stood for in this process; a later hit that builds a different program
// means the kernel's key misses something its lowering captured.
bool check_keys() {
  static bool v = env_flag("TORCH_TPU_CHECK_KEYS");
  return v;
}

namespace {
std::mutex g_fp_mu;
std::unordered_map<CacheKey, std::pair<uint64_t, std::string>, CacheKeyHash> g_fingerprints;

void check_fingerprint(const CacheKey& key, std::string_view name, uint64_t fp) {
  std::lock_guard<std::mutex> lock(g_fp_mu);
  auto [it, inserted] = g_fingerprints.try_emplace(key, fp, std::string(name));
  TORCH_CHECK(inserted || it->second.first == fp, "torch_tpu: cache key collision: op '", name,
              "' built a different program than '", it->second.second, "' under the same key ", key.hex(),
              ". The kernel captures a value in its lowering that it did not add with OpCall::attr().");
}
}  // namespace

ProgramPtr OpCall::lookup(const Lowering& lower) const {
  ProgramPtr prog = ExecutableCache::get().lookup(key_done_);
  if (!prog) return nullptr;
  bump(metrics().cache_hits);
  if (check_keys()) {
    ir::Graph g;
    build_program(g, lower);
    bump(metrics().key_checks);
    check_fingerprint(key_done_, name_, g.fingerprint());
  }
  return prog;
}

std::string OpCall::program_text(const Lowering& lower) const {
  ir::Graph g;
  build_program(g, lower);
  if (check_keys()) check_fingerprint(key_done_, name_, g.fingerprint());
  return g.to_mlir();
}

// A single op compiles quick first, then fully in the background
// (executable_cache.h); the two may round differently, so not when the user
// asked for deterministic algorithms.
bool OpCall::tiered_allowed() { return !at::globalContext().deterministicAlgorithms(); }

ProgramPtr OpCall::compile(const Lowering& lower) const {
  return ExecutableCache::get().compile_and_insert(
      client(), key_done_, std::string(name_), [&]() { return program_text(lower); }, tiered_allowed());
}

namespace {
// The bits of a splat constant's value as the builder renders it
// ("dense<0x3F800000> : tensor<4xf32>", "dense<-1> : ...", "dense<true> :
// ..."); nullopt for any other form.
std::optional<uint64_t> splat_bits(const std::string& text, ElemType t) {
  if (text.rfind("dense<", 0) != 0 || is_complex(t)) return std::nullopt;
  const std::string lit = text.substr(6, text.find('>') - 6);
  if (lit.empty()) return std::nullopt;
  if (t == ElemType::kPred) {
    if (lit == "true" || lit == "false") return lit == "true" ? 1 : 0;
    return std::nullopt;
  }
  const bool hex = lit.rfind("0x", 0) == 0;
  if (is_float(t) != hex) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  uint64_t v = hex             ? std::strtoull(lit.c_str() + 2, &end, 16)
               : lit[0] == '-' ? static_cast<uint64_t>(std::strtoll(lit.c_str(), &end, 10))
                               : std::strtoull(lit.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

// Fills larger than this still run as a program: on a TPU or GPU a program
// writes device memory without a transfer, and it is cached after one compile.
constexpr int64_t kMaxHostFillBytes = int64_t{4} << 20;
}  // namespace

// XLA:CPU spends about 30 ms compiling even a broadcast of zero, and an
// optimizer's first step creates its state this way (GPT AdamW: 106
// zeros_like over 9 sizes, 9 programs, 0.3-0.4 s of compiling).
bool OpCall::try_host_fill(const Lowering& lower) const {
  int64_t bytes = 0;
  for (const SlotUse& u : slots_) {
    if (needs_param(u)) return false;
    if (u.written) bytes += static_cast<int64_t>(u.slot->nbytes);
  }
  if (bytes == 0 || bytes > kMaxHostFillBytes) return false;
  std::vector<const Arg*> scalars;
  for (const Arg& a : args_) {
    if (a.kind == Arg::kView) continue;
    if (a.rng_part >= 0 || is_complex(a.elem)) return false;
    scalars.push_back(&a);
  }
  ir::Graph g;
  build_program(g, lower);
  std::unordered_map<int32_t, size_t> param_of;
  for (size_t k = 0; k < g.params().size(); ++k) param_of[g.params()[k]] = k;
  // Per written slot: its element type, count and the value's bits. Every
  // output must be a broadcast (and reshapes) of one scalar of its own type.
  struct Fill {
    StorageSlot* slot;
    ElemType elem;
    int64_t numel;
    uint64_t bits;
  };
  std::vector<Fill> fills;
  size_t oi = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].written) continue;
    if (oi >= g.outputs().size()) return false;
    ir::Value v = g.outputs()[oi++];
    const ir::TensorType out = g.type(v);
    auto [e, n] = written_elem(i);
    if (out.elem != e || out.numel() != n || ir::byte_size(e) < 1) return false;
    for (;;) {
      const ir::Node& node = g.nodes()[v.node];
      if (node.op != "stablehlo.broadcast_in_dim" && node.op != "stablehlo.reshape") break;
      v = node.operands[0];
    }
    if (g.type(v).elem != e) return false;
    const ir::Node& root = g.nodes()[v.node];
    std::optional<uint64_t> bits;
    if (root.op == "param") {
      const Arg& a = *scalars.at(param_of.at(v.node));
      bits = scalar_bits(a.kind == Arg::kScalar ? a.value : a.cpu.item(), a.elem)[0];
    } else if (root.op == "stablehlo.constant" && !root.attrs.empty()) {
      bits = splat_bits(root.attrs[0].text, e);
    }
    if (!bits) return false;
    fills.push_back(Fill{slots_[i].slot, e, n, *bits});
  }
  if (oi != g.outputs().size()) return false;
  for (const Fill& f : fills) {
    const size_t bs = ir::byte_size(f.elem);
    std::vector<unsigned char> host(static_cast<size_t>(f.numel) * bs);  // zeroed
    if (f.bits != 0)  // little-endian: the value is the bits' low bytes
      for (size_t k = 0; k < host.size(); k += bs) std::memcpy(host.data() + k, &f.bits, bs);
    f.slot->set_buffer(client().buffer_from_host(host.data(), to_pjrt(f.elem), {f.numel}, device_));
    f.slot->elem = f.elem;
    f.slot->numel = f.numel;
    bump(metrics().h2d_count);
    bump(metrics().h2d_bytes, static_cast<int64_t>(host.size()));
    track_result(f.slot->buffer, name_);
  }
  bump(metrics().host_fills);
  return true;
}

int64_t OpCall::output_bytes() const {
  int64_t n = 0;
  for (const SlotUse& u : slots_)
    if (u.written) n += static_cast<int64_t>(u.slot->nbytes);
  return n;
}

std::vector<runtime::BufferPtr> execute_on(const runtime::Executable& exe, const std::vector<PJRT_Buffer*>& args,
                                           int device, std::string_view what, const std::vector<int64_t>& keep,
                                           int64_t out_bytes) {
  // The launch on the host; the device runs it asynchronously afterwards.
  RECORD_FUNCTION("tpu::launch", std::vector<c10::IValue>());
  auto& spans = runtime::DeviceSpans::get();
  const int64_t launched = spans.enabled() ? runtime::DeviceSpans::now_ns() : 0;
  check_fits_device(device, what, out_bytes);  // a fused graph's results
  try {
    auto outs = exe.execute(args, pjrt_device(device), keep);
    if (launched != 0 && !outs.empty()) {
      // "a fused graph" reads as a message; the trace names it "fused graph".
      std::string_view name = what.substr(0, 2) == "a " ? what.substr(2) : what;
      spans.note_launch(std::string(name), device, launched, outs[0]->ready_event());
    }
    return outs;
  } catch (const runtime::PjrtError& e) {
    if (!e.out_of_memory()) throw;
    std::string msg = e.what();
    while (!msg.empty() && (msg.back() == '.' || msg.back() == ' ')) msg.pop_back();
    raise_oom(device, what, msg, out_bytes);
  }
}

void OpCall::execute_and_swap(const CompiledProgram& prog) const {
  // Arguments: storage buffers, then scalars.
  std::vector<PJRT_Buffer*> argv;
  for (const SlotUse& u : slots_)
    if (needs_param(u)) argv.push_back(u.slot->buffer->get());
  std::vector<runtime::BufferPtr> keep = scalar_buffers();
  for (auto& b : keep) argv.push_back(b->get());
  auto outs = execute_on(*prog.exe, argv, device_, name_, {}, output_bytes());
  bump(metrics().executions);
  size_t oi = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].written) continue;
    auto [e, n] = written_elem(i);
    StorageSlot* s = slots_[i].slot;
    s->set_buffer(outs[oi++]);
    s->elem = e;
    s->numel = n;
    track_result(s->buffer, name_);
  }
}

std::vector<runtime::BufferPtr> OpCall::scalar_buffers() const {
  std::vector<runtime::BufferPtr> bufs;
  for (const Arg& a : args_)
    if (a.kind != Arg::kView) bufs.push_back(device_scalar(scalar_bits(scalar_value(a), a.elem), a.elem, device_));
  return bufs;
}

const OpCall::Arg& OpCall::scalar_arg(size_t k) const {
  for (const Arg& a : args_)
    if (a.kind != Arg::kView && k-- == 0) return a;
  TORCH_INTERNAL_ASSERT(false, "runtime scalar index out of range");
}

runtime::BufferPtr OpCall::scalar_buffer_at(size_t k) const {
  const Arg& a = scalar_arg(k);
  return device_scalar(scalar_bits(scalar_value(a), a.elem), a.elem, device_);
}

uint64_t OpCall::scalar_bits_at(size_t k) const {
  const Arg& a = scalar_arg(k);
  return scalar_bits(scalar_value(a), a.elem)[0];
}

std::vector<OpCall::ScalarSource> OpCall::scalar_sources() const {
  std::vector<ScalarSource> out;
  for (const Arg& a : args_) {
    if (a.kind == Arg::kView) continue;
    ScalarSource src;
    if (a.kind == Arg::kScalarTensor) {
      src.kind = ScalarSource::kCpuTensor;
      src.cpu = a.cpu.unsafeGetTensorImpl();
      src.wrapped = src.cpu->is_wrapped_number();
    } else if (a.rng_part >= 0) {
      src.kind = a.rng_part == 0 ? ScalarSource::kRngSeed : ScalarSource::kRngOffset;
      src.gen = a.gen;
      src.advance = a.rng_advance;
    }
    out.push_back(std::move(src));
  }
  return out;
}

runtime::BufferPtr scalar_buffer(const c10::Scalar& s, ElemType elem, int device) {
  return device_scalar(scalar_bits(s, elem), elem, device);
}

std::vector<ElemType> OpCall::scalar_elems() const {
  std::vector<ElemType> elems;
  for (const Arg& a : args_)
    if (a.kind != Arg::kView) elems.push_back(a.elem);
  return elems;
}

void OpCall::track_result(const runtime::BufferPtr& b, std::string_view what) {
  if (launch_blocking())
    b->ready_event().await(std::string(what).c_str());
  else
    track(b);
}

// Views of values up to this size are read through a host copy of the whole value.
constexpr size_t kHostViewBytes = size_t{1} << 20;

void copy_to_host(const at::Tensor& src, void* dst, size_t nbytes) {
  if (nbytes == 0) return;
  RECORD_FUNCTION("tpu::device_to_host", std::vector<c10::IValue>());
  // Every host read passes here: a deferred driver materialises first.
  // Strict eager runs its queue only up to the call that writes this value.
  Driver& d = current_driver();
  const bool strict = &d == &strict_driver();
  StorageSlot* s = slot_of(src.storage());
  if (strict)
    run_queued_until(s);
  else
    d.sync_point(SyncReason::kHostRead, "copy_to_host");
  ViewMeta v = view_of(src);
  if (!s->buffer && s->sharded && !s->sharded->shards.empty() && s->elem == v.elem && v.covers(s->numel)) {
    // A sharded value read whole: assembled from its shards on the host.
    std::vector<uint8_t> host = assemble_sharded(*s->sharded, s->elem);
    TORCH_INTERNAL_ASSERT(host.size() == nbytes, "tpu: a sharded value's size differs from its storage's");
    std::memcpy(dst, host.data(), nbytes);
    bump(metrics().d2h_count);
    bump(metrics().d2h_bytes, static_cast<int64_t>(nbytes));
    return;
  }
  gather_slot(s, "a host read of part of it");
  if (s->buffer && s->elem == v.elem && v.covers(s->numel)) {
    s->buffer->to_host(dst, nbytes);
  } else if (s->buffer && s->elem == v.elem && s->nbytes <= kHostViewBytes) {
    // A view of a small value (an output sliced back from its bucket size,
    // one row printed): the whole value comes to the host and the view is
    // taken there, instead of a program per view shape.
    at::Tensor whole = at::empty({s->numel}, src.options().device(c10::kCPU));
    s->buffer->to_host(whole.mutable_data_ptr(), whole.nbytes());
    at::Tensor out = at::from_blob(dst, src.sizes(), src.options().device(c10::kCPU));
    out.copy_(whole.as_strided(src.sizes(), src.strides(), src.storage_offset()));
  } else {
    // Materialise the view as its own contiguous buffer first.
    at::Tensor tmp = at::empty(src.sizes(), src.options());
    OpCall call("materialize");
    call.input(src);
    call.output(tmp);
    call.run([](ir::Builder&, const std::vector<Value>& in) { return std::vector<Value>{in[0]}; });
    StorageSlot* t = slot_of(tmp.storage());
    if (strict)
      run_queued_until(t);  // it may have queued behind `src`
    else
      current_driver().sync_point(SyncReason::kHostRead, "copy_to_host");  // a deferred driver recorded it
    t->buffer->to_host(dst, nbytes);
  }
  bump(metrics().d2h_count);
  bump(metrics().d2h_bytes, static_cast<int64_t>(nbytes));
}

void copy_from_host(const at::Tensor& dst, const void* src, size_t nbytes) {
  if (nbytes == 0) return;
  RECORD_FUNCTION("tpu::host_to_device", std::vector<c10::IValue>());
  StorageSlot* s = slot_of(dst.storage());
  ViewMeta v = view_of(dst);
  ElemType e = v.elem;
  int dev = dst.device().index() < 0 ? 0 : dst.device().index();
  int64_t storage_elems = static_cast<int64_t>(s->nbytes) / ir::byte_size(e);
  bump(metrics().h2d_count);
  bump(metrics().h2d_bytes, static_cast<int64_t>(nbytes));
  if (v.covers(storage_elems) && static_cast<int64_t>(s->nbytes) == storage_elems * ir::byte_size(e)) {
    // A pending write recorded earlier must not land after this one.
    materialize_slot(s);
    if (s->sharded && s->elem == e && s->numel == v.numel()) {
      // A sharded tensor written whole from the host keeps its layout
      // (a checkpoint loaded into another mesh lands sharded).
      ShardedPtr fresh = scatter_host(*s->sharded, src, e);
      s->buffer = nullptr;
      s->sharded = std::move(fresh);
      return;
    }
    s->set_buffer(client().buffer_from_host(src, to_pjrt(e), {v.numel()}, dev));
    s->elem = e;
    s->numel = v.numel();
    return;
  }
  at::Tensor tmp = at::empty(dst.sizes(), dst.options().memory_format(c10::MemoryFormat::Contiguous));
  copy_from_host(tmp, src, nbytes);
  OpCall call("copy_");
  call.input(tmp);
  call.output(dst);
  call.run([](ir::Builder&, const std::vector<Value>& in) { return std::vector<Value>{in[0]}; });
}

}  // namespace torch_tpu::record
