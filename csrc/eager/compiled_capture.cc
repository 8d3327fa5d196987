// Capture and replay of torch.compile(backend="tpu") graphs. A graph is
// recorded once by fused eager (begin_capture .. end_capture); its flush
// becomes a CapturedGraph that names each program argument and result in
// terms of the graph's inputs and outputs. A replay checks the inputs
// against the capture (dtype, device, storage size, view, aliasing) and
// runs the program on their current buffers without dispatching any op.
#include "eager/compile_ahead.h"
#include "eager/drivers.h"
#include "eager/fused_driver.h"

namespace torch_tpu::eager {

void CompiledCapture::begin() {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  TORCH_CHECK(!core_.graphs_.capturing(), "a compiled graph cannot be captured inside a tpu graph capture");
  core_.flush_locked(SyncReason::kMarkStep, "before a capture");
  drain_compile_ahead();
  start_ = core_.flush_count_;
  active_ = true;
  read_host_ = false;
}

std::shared_ptr<CapturedGraph> CompiledCapture::end(const std::vector<at::Tensor>& in,
                                                    const std::vector<at::Tensor>& out, std::string& why_not) {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  active_ = false;
  if (core_.flush_count_ != start_) {
    why_not = "the graph flushed before its end (a host read or a data-dependent shape)";
  } else if (read_host_) {
    why_not = "the graph read a device value on the host (a torch.cond predicate, .item())";
  } else if (!core_.p_) {
    why_not = "the graph recorded no op";
  }
  auto cap = std::make_shared<CapturedGraph>();
  in_ = &in;
  out_ = &out;
  why_ = &why_not;
  bool want = why_not.empty();
  core_.flush_locked(SyncReason::kMarkStep, "compiled graph", want ? cap.get() : nullptr);
  in_ = out_ = nullptr;
  why_ = nullptr;
  if (!want || (!cap->prog && !cap->pending_prog.valid())) {
    if (why_not.empty()) why_not = "the graph has no live result";
    return nullptr;
  }
  return cap;
}

std::optional<std::vector<at::Tensor>> CompiledCapture::replay(CapturedGraph& c, const std::vector<at::Tensor>& in) {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  core_.flush_locked(SyncReason::kMarkStep, "before a replay");
  drain_compile_ahead();
  if (!c.prog) c.prog = c.pending_prog.get();  // compiled by now (the queue has run); a failed compile rethrows
  RECORD_FUNCTION("tpu::compiled_graph_replay", std::vector<c10::IValue>());
  // Guards first: nothing (not even the generator) changes unless all pass.
  if (in.size() != c.inputs.size()) return std::nullopt;
  std::vector<StorageSlot*> slots(in.size(), nullptr);
  // (storage, input) pairs for the alias check below; reused, so a replay
  // allocates nothing for it.
  thread_local std::vector<std::pair<StorageSlot*, int>> by_storage;
  by_storage.clear();
  for (size_t i = 0; i < in.size(); ++i) {
    const auto& g = c.inputs[i];
    const at::Tensor& t = in[i];
    if (!t.defined() || t.scalar_type() != g.dtype) return std::nullopt;
    if (g.cpu_scalar) {
      if (!t.device().is_cpu() || t.dim() != 0) return std::nullopt;
      continue;
    }
    if (t.device().type() != c10::DeviceType::PrivateUse1 || std::max<int>(t.device().index(), 0) != c.device)
      return std::nullopt;
    StorageSlot* s = slot_of(t.storage());
    if (s->nbytes != g.nbytes || t.storage_offset() != g.view.offset || t.sizes() != c10::IntArrayRef(g.view.sizes) ||
        t.strides() != c10::IntArrayRef(g.view.strides))
      return std::nullopt;
    slots[i] = s;
    by_storage.emplace_back(s, static_cast<int>(i));
  }
  // Inputs sharing a storage must name, as at capture, the first of them.
  std::sort(by_storage.begin(), by_storage.end());
  for (size_t k = 0, first = 0; k < by_storage.size(); ++k) {
    if (by_storage[k].first != by_storage[first].first) first = k;
    if (c.inputs[by_storage[k].second].alias_of != by_storage[first].second) return std::nullopt;
  }
  if (c.spmd) return replay_spmd(c, in, slots);
  for (const auto& a : c.args) {
    if (a.kind != CapturedGraph::Arg::kInput) continue;
    StorageSlot* s = slots[a.input];
    if (!s->buffer || s->pending || s->elem != a.elem || s->numel != a.numel) return std::nullopt;
  }
  std::vector<runtime::BufferPtr> scalars;
  std::vector<PJRT_Buffer*> argv = replay_args(
      c.args, c.device, scalars, [&](const CapturedGraph::Arg& a) { return slots[a.input]->buffer->get(); },
      [&](int i) { return in[i].item(); });
  // A buffer another storage also holds must survive the call.
  std::vector<int64_t> keep;
  for (int j : c.donated)
    if (slots[c.args[j].input]->buffer.use_count() != 1) keep.push_back(j);
  std::vector<runtime::BufferPtr> donated;
  for (int j : c.donated)
    if (std::find(keep.begin(), keep.end(), j) == keep.end()) donated.push_back(slots[c.args[j].input]->buffer);
  auto results = execute_replay(*c.prog, argv, c.device, "a compiled graph", c.donated.size(), keep);
  DonatedHandles::get().add(std::move(donated), results);
  std::vector<c10::Storage> fresh;
  std::vector<at::Tensor> outs = make_outputs(c, in, fresh);
  for (size_t k = 0; k < c.results.size(); ++k) {
    const auto& r = c.results[k];
    StorageSlot* s = r.to_input ? slots[r.index] : slot_of(fresh[r.index]);
    s->set_buffer(results[k]);
    s->elem = r.elem;
    s->numel = r.numel;
    OpCall::track_result(s->buffer, "compiled graph");
  }
  return outs;
}

// Per result of a capture, the shape of the input or output tensor that
// holds its storage whole (empty when none does): an optimizer state's
// (rows, cols) lets the partitioner split it as its parameter is split.
std::vector<std::vector<int64_t>> CompiledCapture::result_shapes(const CapturedGraph& c) {
  std::vector<std::vector<int64_t>> shapes;
  for (const auto& r : c.results) {
    std::vector<int64_t> dims;
    if (r.to_input) {
      const ViewMeta& v = c.inputs[r.index].view;
      if (v.covers(r.numel)) dims = v.sizes;
    } else {
      for (const auto& o : c.outputs) {
        if (o.fresh != r.index) continue;
        ViewMeta v{r.elem, o.sizes, o.strides, o.offset};
        if (v.covers(r.numel)) dims = o.sizes;
      }
    }
    if (dims.empty() && r.numel == 1) dims = {1};
    shapes.push_back(std::move(dims));
  }
  return shapes;
}

// A replay of a capture that ran over a mesh: each input must have the
// layout it had then (else the caller captures again).
std::optional<std::vector<at::Tensor>> CompiledCapture::replay_spmd(CapturedGraph& c, const std::vector<at::Tensor>& in,
                                                                    const std::vector<StorageSlot*>& slots) {
  const SpmdPlan& plan = *c.spmd;
  std::vector<ShardedPtr> sharded(c.args.size());
  std::vector<runtime::BufferPtr> whole(c.args.size());
  for (size_t j = 0; j < c.args.size(); ++j) {
    const auto& a = c.args[j];
    if (a.kind != CapturedGraph::Arg::kInput) continue;
    StorageSlot* s = slots[a.input];
    if (!s->pending) reshard_slot(s);
    if (s->pending || s->elem != a.elem || s->numel != a.numel || !plan.matches(j, s->sharded)) return std::nullopt;
    if (plan.args[j].sharded) {
      sharded[j] = s->sharded;
    } else {
      if (!s->buffer) return std::nullopt;
      whole[j] = s->buffer;
    }
  }
  uint64_t rng_offset = 0;
  std::vector<std::optional<c10::Scalar>> numbers(c.args.size());
  for (size_t j = 0; j < c.args.size(); ++j) {
    const auto& a = c.args[j];
    switch (a.kind) {
      case CapturedGraph::Arg::kInput:
        break;
      case CapturedGraph::Arg::kConstant:
        whole[j] = a.constant;
        break;
      case CapturedGraph::Arg::kCpuInput:
        numbers[j] = in[a.input].item();
        break;
      case CapturedGraph::Arg::kRngSeed:
        whole[j] = reserve_rng(a.gen, a.advance, a.elem, c.device, rng_offset);
        break;
      case CapturedGraph::Arg::kRngOffset:
        whole[j] = scalar_buffer(c10::Scalar(static_cast<int64_t>(rng_offset)), a.elem, c.device);
        break;
    }
  }
  std::vector<const StorageSlot*> owners(c.args.size(), nullptr);
  for (size_t j = 0; j < c.args.size(); ++j)
    if (c.args[j].kind == CapturedGraph::Arg::kInput) owners[j] = slots[c.args[j].input];
  // A value's holders besides its storage: `whole` or `sharded` above.
  auto results = spmd_run(plan, whole, sharded, c.device, &numbers, &owners, 1);
  bump(metrics().replays);
  std::vector<c10::Storage> fresh;
  std::vector<at::Tensor> outs = make_outputs(c, in, fresh);
  for (size_t k = 0; k < c.results.size(); ++k) {
    const auto& r = c.results[k];
    StorageSlot* s = r.to_input ? slots[r.index] : slot_of(fresh[r.index]);
    s->elem = r.elem;
    s->numel = r.numel;
    spmd_store(s, results[k]);
  }
  return outs;
}

// A replay's output tensors: views of the inputs' storages or of new ones
// (made here, into `fresh`).
std::vector<at::Tensor> CompiledCapture::make_outputs(const CapturedGraph& c, const std::vector<at::Tensor>& in,
                                                      std::vector<c10::Storage>& fresh) {
  fresh.reserve(c.fresh_nbytes.size());
  {
    c10::DeviceGuard guard(c10::Device(c10::DeviceType::PrivateUse1, static_cast<c10::DeviceIndex>(c.device)));
    for (size_t n : c.fresh_nbytes) fresh.emplace_back(c10::Storage::use_byte_size_t(), n, tpu_allocator(), true);
  }
  std::vector<at::Tensor> outs;
  outs.reserve(c.outputs.size());
  // The tensors are made directly on their storage (empty + set_ went
  // through the dispatcher twice per output, on every replay).
  for (const auto& o : c.outputs) {
    c10::Storage st = o.input >= 0 ? in[o.input].storage() : fresh[o.fresh];
    auto impl = c10::make_intrusive<c10::TensorImpl>(std::move(st), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1),
                                                     c10::scalarTypeToTypeMeta(o.dtype));
    impl->set_sizes_and_strides(o.sizes, o.strides, o.offset);
    outs.emplace_back(std::move(impl));
  }
  return outs;
}

// Fills `c` from the graph about to run: the source of every parameter
// and the destination of every result, in terms of the capture's inputs
// and outputs. False (with the reason) when one is neither.
bool CompiledCapture::describe(PendingGraph& p, const std::vector<int>& outs, CapturedGraph& c) {
  const auto& in = *in_;
  const auto& out = *out_;
  std::string& why = *why_;
  std::unordered_map<StorageSlot*, int> in_slot;
  std::unordered_map<const at::TensorImpl*, int> in_cpu;
  c.device = p.device;
  c.inputs.resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const at::Tensor& t = in[i];
    auto& g = c.inputs[i];
    g.dtype = t.scalar_type();
    if (t.device().is_cpu() && t.dim() == 0) {
      g.cpu_scalar = true;
      in_cpu.emplace(t.unsafeGetTensorImpl(), static_cast<int>(i));
      continue;
    }
    if (t.device().type() != c10::DeviceType::PrivateUse1) {
      why = "an input is on " + t.device().str();
      return false;
    }
    StorageSlot* s = slot_of(t.storage());
    g.view = view_of(t);
    g.nbytes = s->nbytes;
    g.alias_of = in_slot.try_emplace(s, static_cast<int>(i)).first->second;
  }
  for (size_t k = 0; k < p.params.size(); ++k) {
    const FusedParam& pr = p.params[k];
    CapturedGraph::Arg a;
    a.elem = pr.elem;
    a.numel = pr.numel;
    if (pr.slot) {
      auto it = in_slot.find(pr.slot);
      if (it == in_slot.end()) {
        why = "the graph reads a tensor that is not one of its inputs";
        return false;
      }
      a.kind = CapturedGraph::Arg::kInput;
      a.input = it->second;
    } else {
      // A CPU scalar that is not an input was made inside the graph from
      // a constant (a wrapped number); the caller guarantees that no other
      // CPU value reaches it.
      auto it = pr.scalar.kind == OpCall::ScalarSource::kCpuTensor ? in_cpu.find(pr.scalar.cpu) : in_cpu.end();
      if (it != in_cpu.end()) {
        a.kind = CapturedGraph::Arg::kCpuInput;
        a.input = it->second;
      } else {
        FusedDriver::fixed_or_rng(pr, a);
      }
    }
    c.args.push_back(std::move(a));
  }
  // Outputs are views of new storages (several may share one: a saved
  // activation and its transpose) or of an input's storage.
  std::unordered_map<StorageSlot*, int> fresh;
  for (const at::Tensor& t : out) {
    if (t.device().type() != c10::DeviceType::PrivateUse1) {
      why = "an output is on " + t.device().str();
      return false;
    }
    StorageSlot* s = slot_of(t.storage());
    CapturedGraph::Output o{-1, -1, t.scalar_type(), t.sizes().vec(), t.strides().vec(), t.storage_offset()};
    if (auto it = in_slot.find(s); it != in_slot.end()) {
      o.input = it->second;
    } else {
      auto [jt, added] = fresh.try_emplace(s, static_cast<int>(c.fresh_nbytes.size()));
      if (added) c.fresh_nbytes.push_back(s->nbytes);
      o.fresh = jt->second;
    }
    c.outputs.push_back(std::move(o));
  }
  for (int k : outs) {
    StorageSlot* s = p.slots[k].slot;
    CapturedGraph::Result r{false, -1, s->elem, s->numel};
    if (auto it = in_slot.find(s); it != in_slot.end()) {
      r.to_input = true;
      r.index = it->second;
    } else if (auto jt = fresh.find(s); jt != fresh.end()) {
      r.index = jt->second;
    } else {
      why = "the graph writes a tensor that is neither an input nor an output";
      return false;
    }
    c.results.push_back(r);
  }
  return true;
}

void begin_capture() {
  set_current_driver(&fused_driver());
  FusedDriver::get().compiled().begin();
}
std::shared_ptr<CapturedGraph> end_capture(const std::vector<at::Tensor>& inputs,
                                           const std::vector<at::Tensor>& outputs, std::string& why_not) {
  return FusedDriver::get().compiled().end(inputs, outputs, why_not);
}
std::optional<std::vector<at::Tensor>> replay(CapturedGraph& c, const std::vector<at::Tensor>& inputs) {
  return FusedDriver::get().compiled().replay(c, inputs);
}

}  // namespace torch_tpu::eager
