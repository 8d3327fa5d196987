// torch.tpu.graph / torch.accelerator.Graph: a region recorded by fused
// eager is compiled, not run, into StaticGraphs bound to the storages it
// touched (as a CUDA graph is bound to addresses). A replay runs them on
// those storages' current buffers. Storages freed while a graph names them
// are adopted by the graph, as a CUDA graph's private pool outlives the
// tensors allocated in it.
#include "eager/compile_ahead.h"
#include "eager/drivers.h"
#include "eager/fused_driver.h"

namespace torch_tpu::eager {

// --- graph capture (torch.accelerator.Graph) ---
void GraphCapture::begin(bool keep_text) {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  TORCH_CHECK(!capturing_, "tpu graph capture is already underway; graphs cannot be captured inside each other");
  core_.flush_locked(SyncReason::kMarkStep, "before a graph capture");
  drain_compile_ahead();
  capturing_ = true;
  break_.clear();
  keep_text_ = keep_text;
}

// A sync during a capture breaks it: the first one is the reason end() gives.
void GraphCapture::note_sync(SyncReason why, std::string_view op) {
  if (capturing_ && break_.empty())
    break_ = std::string(to_string(why)) + (op.empty() ? "" : " (" + std::string(op) + ")");
}

// A storage is being freed: a captured graph that names it adopts it, and
// a part of the capture underway that wrote it reads the adopted copy.
void GraphCapture::on_free(StorageSlot* s) {
  StorageSlot* own = adopt(s);
  if (seg_written_.erase(s) && own) adopted_now_[s] = own;
}

// Ends the current part of the region being captured and starts the next
// (the optimizer hook calls this before optimizer.step(): one program for
// forward+backward and one for the step run faster on XLA:CPU than one
// for both; see _eager._optimizer_step_begin). The part's results stay
// pending until the capture ends, so a host read of one still breaks the
// capture, and later parts read them as parameters.
void GraphCapture::cut() {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  if (!capturing_ || !break_.empty() || !core_.p_) return;
  auto seg = close_segment(std::move(core_.p_));
  if (seg->prog) segments_.push_back(std::move(seg));
}

// Builds the captured graph without running it (a CUDA graph's capture
// runs nothing either): the storages keep their old values until replay().
std::shared_ptr<StaticGraph> GraphCapture::end(bool keep_text) {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  TORCH_CHECK(capturing_, "tpu graph capture_end() called without capture_begin()");
  keep_text_ = keep_text_ || keep_text;
  struct Done {  // whatever happens, the slots go back to their pre-capture state
    GraphCapture& c;
    ~Done() {
      c.capturing_ = false;
      c.restore_captured_slots();
    }
  } done{*this};
  if (!break_.empty()) {
    std::string why = std::move(break_);
    break_.clear();
    capturing_ = false;
    core_.flush_locked(SyncReason::kMarkStep, "after a failed graph capture");
    TORCH_CHECK(false, "tpu graph capture failed: a ", why,
                " happened while capturing. A captured graph cannot read tpu values on the host, copy "
                "between host and device, or wait for the device; do that before capture_begin() or after "
                "capture_end(). The work recorded so far was run eagerly.");
  }
  std::vector<std::shared_ptr<StaticGraph>> before = std::move(segments_);
  segments_.clear();
  if (!core_.p_ && before.empty()) {
    TORCH_WARN("tpu graph capture recorded no tpu op; replay() will do nothing");
    return std::make_shared<StaticGraph>();
  }
  std::shared_ptr<StaticGraph> g = core_.p_ ? close_segment(std::move(core_.p_)) : std::make_shared<StaticGraph>();
  if (!g->prog && before.empty())
    TORCH_WARN("tpu graph capture: no result of the captured work is still alive; replay() will do nothing");
  g->before = std::move(before);
  return g;
}

// Ends a capture that raised: what was recorded runs eagerly.
void GraphCapture::abort() {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  if (!capturing_) return;
  capturing_ = false;
  break_.clear();
  settle();
  restore_captured_slots();
  core_.flush_locked(SyncReason::kMarkStep, "after a failed graph capture");
}

void GraphCapture::replay(StaticGraph& g) {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  TORCH_CHECK(!capturing_, "a tpu graph cannot be replayed while another is being captured");
  core_.flush_locked(SyncReason::kMarkStep, "before a graph replay");
  drain_compile_ahead();
  RECORD_FUNCTION("tpu::graph_replay", std::vector<c10::IValue>());
  for (auto& seg : g.before) replay_one(*seg);
  replay_one(g);
}

void GraphCapture::replay_one(StaticGraph& g) {
  if (!g.prog) return;
  std::vector<runtime::BufferPtr> scalars;
  auto input = [&](const StaticGraph::Arg& a) {
    StorageSlot* s = g.slots[a.input];
    TORCH_CHECK(s->buffer && s->elem == a.elem && s->numel == a.numel,
                "tpu graph replay: a storage the graph reads was resized or emptied after capture (it held ", a.numel,
                " elements then); capture the graph again");
    return s->buffer->get();
  };
  std::vector<PJRT_Buffer*> argv =
      replay_args(g.args, g.device, scalars, input, [](int) -> c10::Scalar { TORCH_INTERNAL_ASSERT(false); });
  std::vector<int64_t> keep;
  for (int j : g.donated)
    if (g.slots[g.args[j].input]->buffer.use_count() != 1) keep.push_back(j);
  std::vector<runtime::BufferPtr> donated;
  for (int j : g.donated)
    if (std::find(keep.begin(), keep.end(), j) == keep.end()) donated.push_back(g.slots[g.args[j].input]->buffer);
  auto results = execute_replay(*g.prog, argv, g.device, "a captured tpu graph", g.donated.size(), keep);
  DonatedHandles::get().add(std::move(donated), results);
  for (size_t k = 0; k < g.results.size(); ++k) {
    StorageSlot* s = g.slots[g.results[k].slot];
    s->set_buffer(results[k]);
    s->elem = g.results[k].elem;
    s->numel = g.results[k].numel;
    OpCall::track_result(s->buffer, "captured graph");
  }
}

// A storage a captured graph names is being freed: the graphs keep its
// slot (and buffer) as their own, as a CUDA graph's private memory pool
// outlives the tensors allocated in it.
StorageSlot* GraphCapture::adopt(StorageSlot* s) {
  if (users_.empty()) return nullptr;
  auto it = users_.find(s);
  if (it == users_.end()) return nullptr;
  auto own = std::make_shared<StorageSlot>();
  own->nbytes = s->nbytes;
  own->device = s->device;
  own->buffer = s->buffer;
  own->sharded = s->sharded;
  own->elem = s->elem;
  own->numel = s->numel;
  for (StaticGraph* g : it->second) {
    for (auto& gs : g->slots)
      if (gs == s) gs = own.get();
    g->adopted.push_back(own);
  }
  users_.erase(it);
  return own.get();
}

void GraphCapture::release(StaticGraph* g) {
  std::lock_guard<std::recursive_mutex> lock(core_.mu_);
  for (StorageSlot* s : g->slots) {
    auto it = users_.find(s);
    if (it == users_.end()) continue;  // an adopted slot
    std::erase(it->second, g);
    if (it->second.empty()) users_.erase(it);
  }
  core_.remove_hooks_if_idle();
}

// One part of a graph capture as a StaticGraph bound to the storages it
// touched; compiles (or finds) its program and runs nothing. The slots it
// wrote stay pending (in seg_written_) until the capture ends.
std::shared_ptr<StaticGraph> GraphCapture::close_segment(std::unique_ptr<PendingGraph> p) {
  auto g = std::shared_ptr<StaticGraph>(new StaticGraph(), [](StaticGraph* sg) {
    FusedDriver::get().graphs().release(sg);
    delete sg;
  });
  for (auto& gs : p->slots)
    if (gs.written && gs.slot) seg_written_.try_emplace(gs.slot, std::make_pair(gs.elem0, gs.numel0));
  ++core_.flush_count_;
  bump(metrics().fused_ops, p->ops);
  g->device = p->device;
  g->ops = p->ops;
  std::vector<int> outs = FusedDriver::live_outputs(*p);
  if (outs.empty()) return g;
  for (const FusedParam& pr : p->params)
    TORCH_CHECK(!pr.sharded,
                "tpu graph capture of a tensor sharded over a mesh is not supported; compile the step with "
                "torch.compile(backend=\"tpu\"), which runs it as one SPMD program");
  std::vector<std::pair<int, int>> aliases = FusedDriver::donations(*p, outs);
  std::unordered_map<StorageSlot*, int> index;
  auto slot_index = [&](StorageSlot* s) {
    auto [it, fresh] = index.try_emplace(s, static_cast<int>(g->slots.size()));
    if (fresh) g->slots.push_back(s);
    return it->second;
  };
  for (const FusedParam& pr : p->params) {
    StaticGraph::Arg a;
    a.elem = pr.elem;
    a.numel = pr.numel;
    StorageSlot* live = pr.gslot >= 0 ? p->slots[pr.gslot].slot : nullptr;
    // Freed during the capture after an earlier part wrote it: that
    // part's graph owns the storage now, and this one reads it there.
    if (!live && pr.slot)
      if (auto it = adopted_now_.find(pr.slot); it != adopted_now_.end()) live = it->second;
    if (live) {
      a.kind = StaticGraph::Arg::kInput;
      a.input = slot_index(live);
    } else {
      // A number, a CPU scalar tensor, or a storage freed during the
      // capture: its value at capture time is part of the graph, as a
      // CUDA graph keeps kernel arguments. Random ops draw anew.
      FusedDriver::fixed_or_rng(pr, a);
    }
    g->args.push_back(std::move(a));
  }
  for (int k : outs) {
    StorageSlot* s = p->slots[k].slot;
    g->results.push_back(StaticGraph::Result{slot_index(s), s->elem, s->numel});
  }
  for (auto [j, k] : aliases) g->donated.push_back(j);
  g->prog = core_.program_for(*p, outs, aliases, keep_text_ ? &g->text : nullptr);
  for (StorageSlot* s : g->slots) users_[s].push_back(g.get());
  core_.install_hooks();
  return g;
}

// The end of a capture: every slot a part wrote leaves the pending state
// with its pre-capture type (capturing ran nothing).
void GraphCapture::restore_captured_slots() {
  for (auto& [s, old] : seg_written_) {
    s->pending.release(PendingWrite::kGraph);
    if (s->buffer) {
      s->elem = old.first;
      s->numel = old.second;
    }
  }
  seg_written_.clear();
  adopted_now_.clear();
}

// A capture broke (a host read) after parts of it were closed: run those
// parts now, in order, so the eager run that follows sees their results.
void GraphCapture::settle() {
  if (segments_.empty()) return;
  std::vector<std::shared_ptr<StaticGraph>> segs = std::move(segments_);
  segments_.clear();
  for (auto& [s, old] : seg_written_) s->pending.release(PendingWrite::kGraph);
  seg_written_.clear();
  for (auto& seg : segs) replay_one(*seg);
  // The pending part read those storages at recording time: point its
  // parameters at their new buffers.
  if (auto& p = core_.p_)
    for (FusedParam& pr : p->params)
      if (pr.gslot >= 0 && p->slots[pr.gslot].slot) pr.buffer = p->slots[pr.gslot].slot->buffer;
}

namespace {
Driver* g_before_capture = nullptr;  // the driver to restore when a graph capture ends
}

void begin_graph_capture(bool keep_text) {
  GraphCapture& c = FusedDriver::get().graphs();
  Driver* prev = set_current_driver(&fused_driver());
  try {
    c.begin(keep_text);
  } catch (...) {
    set_current_driver(prev);
    throw;
  }
  g_before_capture = prev;
}
std::shared_ptr<StaticGraph> end_graph_capture(bool keep_text) {
  GraphCapture& c = FusedDriver::get().graphs();
  TORCH_CHECK(c.capturing(), "tpu graph capture_end() called without capture_begin()");
  struct Restore {
    ~Restore() { set_current_driver(g_before_capture); }
  } restore;
  return c.end(keep_text);
}
void abort_graph_capture() {
  GraphCapture& c = FusedDriver::get().graphs();
  if (!c.capturing()) return;
  c.abort();
  set_current_driver(g_before_capture);
}
bool graph_capturing() { return FusedDriver::get().graphs().capturing(); }
void cut_graph_capture() { FusedDriver::get().graphs().cut(); }
void replay_graph(StaticGraph& g) { FusedDriver::get().graphs().replay(g); }
std::string graph_text(const StaticGraph& g) {
  std::string text;
  for (const auto& seg : g.before) text += seg->text + "\n";
  return text + g.text;
}
int64_t graph_ops(const StaticGraph& g) {
  int64_t n = g.ops;
  for (const auto& seg : g.before) n += seg->ops;
  return n;
}

}  // namespace torch_tpu::eager
