#include "record/op_call.h"

#include <ATen/Context.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>

#include "aten/device.h"
#include "aten/storage.h"
#include "compile/dump.h"
#include "compile/executable_cache.h"
#include "compile/metrics.h"
#include "record/driver.h"
#include "record/op_call_internal.h"
#include "record/window.h"

namespace torch_tpu::record {

using ir::ElemType;
using ir::Value;

ViewMeta view_of(const at::Tensor& t) {
  ViewMeta v;
  v.elem = to_elem(t.scalar_type());
  v.sizes.assign(t.sizes().begin(), t.sizes().end());
  v.strides.assign(t.strides().begin(), t.strides().end());
  v.offset = t.storage_offset();
  // A size-1 dimension's stride addresses nothing; it is keyed as the
  // contiguous one, so that `x[:, -1:]` of a growing `x` (whose stride there
  // is x's length) keys the same at every length.
  int64_t contiguous = 1;
  for (size_t d = v.sizes.size(); d-- > 0;) {
    if (v.sizes[d] == 1) v.strides[d] = contiguous;
    contiguous *= v.sizes[d];
  }
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

OpCall::~OpCall() = default;

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
    StorageSlot* s = slot_of(t.storage());
    bool written = false;  // an output registered first: no window (unwindow())
    for (const auto& o : outs_) written |= slots_[o.first].slot == s;
    if (auto w = written ? std::nullopt : window_for(s, a.view, dev)) {
      a.windowed = s;
      a.whole_view = std::move(a.view);
      a.view = std::move(w->view);
      windows_.push_back(std::move(w->slot));
      s = windows_.back().get();
    } else if (!written && read_at_runtime_position(s, a.view)) {
      a.at_runtime = true;
    }
    a.slot = slot_index(s);
    slots_[a.slot].read = true;
    key_.add(a.at_runtime ? 6 : 1);
    if (a.at_runtime) {
      ViewMeta shape_only{a.view.elem, a.view.sizes, {}, 0};
      key_view(shape_only, a.slot);
      ViewMeta v = a.view;
      args_.push_back(std::move(a));
      add_view_position(v);
      return visible_++;
    }
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
  return visible_++;
}

void OpCall::add_view_position(const ViewMeta& v) {
  std::vector<int64_t> pos = {v.offset};
  pos.insert(pos.end(), v.strides.begin(), v.strides.end());
  for (int64_t x : pos) {
    scalar(c10::Scalar(x), c10::kLong);
    args_.back().hidden = true;
    --visible_;
  }
}

int OpCall::scalar(const c10::Scalar& s, c10::ScalarType dtype) {
  Arg a;
  a.kind = Arg::kScalar;
  a.value = s;
  a.elem = to_elem(dtype);
  key_.add(3 | (static_cast<uint64_t>(a.elem) << 8));
  args_.push_back(std::move(a));
  return visible_++;
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
  StorageSlot* target = slot_of(t.storage());
  unwindow(target);
  int s = slot_index(target);
  key_.add(4);
  key_view(v, s);
  outs_.emplace_back(s, std::move(v));
}

void OpCall::unwindow(StorageSlot* target) {
  // The call writes a storage it reads through a window: the window would
  // alias the storage the program writes, so that input reads the storage
  // as usual. The key records the change.
  for (size_t i = 0; i < args_.size(); ++i) {
    Arg& a = args_[i];
    if (a.kind == Arg::kView && a.at_runtime && slots_[a.slot].slot == target) {
      // Its hidden scalars stay (unused): the key records the change.
      a.at_runtime = false;
      key_.add(7 | (static_cast<uint64_t>(i) << 8));
      key_view(a.view, a.slot);
      continue;
    }
    if (a.kind != Arg::kView || a.windowed != target) continue;
    slots_[a.slot].read = false;
    a.view = std::move(a.whole_view);
    a.slot = slot_index(target);
    a.windowed = nullptr;
    slots_[a.slot].read = true;
    key_.add(5 | (static_cast<uint64_t>(i) << 8));
    key_view(a.view, a.slot);
  }
}

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
    if (a.kind == Arg::kView && a.at_runtime) {
      // Its position is in the hidden scalars that follow: offset, strides.
      std::vector<Value> strides(scalars.begin() + k + 1, scalars.begin() + k + 1 + a.view.sizes.size());
      ins.push_back(read_view_at(b, storage_value(a.slot, a.elem), a.elem, a.view.sizes, scalars[k], strides));
    } else if (a.kind == Arg::kView) {
      ins.push_back(read_view(b, storage_value(a.slot, a.elem), a.view));
    } else if (a.hidden) {
      ++k;
    } else {
      ins.push_back(scalars[k++]);
    }
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

int64_t OpCall::output_bytes() const {
  int64_t n = 0;
  for (const SlotUse& u : slots_)
    if (u.written) n += static_cast<int64_t>(u.slot->nbytes);
  return n;
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

}  // namespace torch_tpu::record
