// Fused eager (EagerMode.DEFER_AND_FUSE): recorded calls are appended to one
// pending graph instead of running. A storage written by a pending call is
// marked `pending`; its value lives in the graph until a flush, which runs
// the whole graph as one program. The flush's outputs are the storages
// written in the graph that are still alive, so intermediates freed before
// the flush (most temporaries of a training step) never leave the program.
//
// The program's key is the sequence of the calls' own keys plus the data
// flow between them (which graph storage each call touched), so a loop that
// records the same calls again reuses the compiled program. The IR is built
// while recording, because kernels' lowerings capture their locals by
// reference; it is emitted as text only on a cache miss.
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/device.h"
#include "aten/generator.h"
#include "aten/storage.h"
#include "compile/dump.h"
#include "compile/executable_cache.h"
#include "compile/metrics.h"
#include "record/capture.h"
#include "record/driver.h"
#include "eager/spmd.h"

namespace torch_tpu::record {

struct CapturedGraph {
  struct Input {
    bool cpu_scalar = false;  // a 0-d CPU tensor, passed as a runtime scalar
    c10::ScalarType dtype;
    ViewMeta view;
    size_t nbytes = 0;
    int alias_of = -1;  // first input with the same storage
  };
  struct Arg {
    enum Kind { kInput, kConstant, kCpuInput, kRngSeed, kRngOffset } kind;
    int input = -1;
    ir::ElemType elem;
    int64_t numel = 0;
    runtime::BufferPtr constant;
    c10::intrusive_ptr<c10::GeneratorImpl> gen;
    uint64_t advance = 0;
  };
  struct Result {
    bool to_input;  // into input `index`'s storage, else into new storage `index`
    int index;
    ir::ElemType elem;
    int64_t numel;
  };
  struct Output {  // a view of input `input`'s storage, or of new storage `fresh`
    int input = -1;
    int fresh = -1;
    c10::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t offset = 0;
  };
  int device = 0;
  ProgramPtr prog;
  std::shared_future<ProgramPtr> pending_prog;  // set instead of prog while the program compiles on the pool
  std::vector<Input> inputs;
  std::vector<Arg> args;
  std::vector<Result> results;
  std::vector<Output> outputs;
  std::vector<size_t> fresh_nbytes;  // the new storages' sizes
  std::vector<int> donated;          // args whose buffer the program may consume
  std::shared_ptr<SpmdPlan> spmd;    // set: the program runs over a mesh (its inputs were sharded)
};

// A region captured by torch.accelerator.Graph / torch.tpu.graph: one
// program bound to the storages it touched, as a CUDA graph is bound to
// addresses. A replay reads those storages' current buffers and writes its
// results back into them; no op is dispatched.
struct StaticGraph {
  using Arg = CapturedGraph::Arg;  // kInput: index into `slots`; never kCpuInput
  struct Result {
    int slot;
    ir::ElemType elem;
    int64_t numel;
  };
  int device = 0;
  int64_t ops = 0;
  ProgramPtr prog;  // null: the region left no live result
  std::vector<Arg> args;
  std::vector<Result> results;
  std::vector<int> donated;                           // args whose buffer the program may consume
  std::vector<StorageSlot*> slots;                    // the storages read or written
  std::vector<std::shared_ptr<StorageSlot>> adopted;  // slots whose storage was freed: the graph owns them
  std::string text;                                   // the StableHLO, kept in debug mode
  // Parts of the region cut off before this one (at optimizer.step()), run
  // first on each replay: the region is several programs in order.
  std::vector<std::shared_ptr<StaticGraph>> before;
};

namespace {

int64_t max_ops_from_env() {
  const char* v = std::getenv("TORCH_TPU_FUSE_MAX_OPS");
  if (!v || !*v) return 4096;
  int64_t n = std::atoll(v);
  return n > 0 ? n : 4096;
}

// Destroying a PJRT buffer that a program is consuming (donated) blocks until
// that program has run: XLA:CPU waits for the donation to be confirmed. Freed
// at once, every donating execute would be synchronous and Python could not
// record the next step while the device runs this one. The donated buffers'
// handles are kept until the program's results are ready (their memory
// already belongs to the results).
class DonatedHandles {
 public:
  static DonatedHandles& get() {
    static auto* d = new DonatedHandles();  // never destroyed: no PJRT call after the client is gone
    return *d;
  }
  void add(std::vector<runtime::BufferPtr> old, const std::vector<runtime::BufferPtr>& results) {
    std::lock_guard<std::mutex> l(mu_);
    while (!q_.empty() && q_.front().ready.is_ready()) q_.pop_front();
    if (old.empty() || results.empty()) return;
    q_.push_back(Entry{results.front()->ready_event(), std::move(old)});
    if (q_.size() > kMaxPending) {  // far ahead of the device: wait for the oldest
      try {
        q_.front().ready.await("waiting for a donating program");
      } catch (...) {  // NOLINT(bugprone-empty-catch): its error surfaces through its results
      }
      q_.pop_front();
    }
  }

 private:
  struct Entry {
    runtime::Event ready;
    std::vector<runtime::BufferPtr> handles;
  };
  static constexpr size_t kMaxPending = 64;
  std::mutex mu_;
  std::deque<Entry> q_;
};

// Reserves `advance` counters of `gen` for one replayed random op: returns the
// seed as a device scalar and sets `offset` to the first reserved counter.
runtime::BufferPtr reserve_rng(const c10::intrusive_ptr<c10::GeneratorImpl>& gen, uint64_t advance, ir::ElemType elem,
                               int device, uint64_t& offset) {
  auto* g = static_cast<TpuGeneratorImpl*>(gen.get());
  uint64_t seed;
  {
    std::lock_guard<std::mutex> l(g->mutex_);
    seed = g->current_seed();
    offset = g->advance(advance);
  }
  return scalar_buffer(c10::Scalar(static_cast<int64_t>(seed)), elem, device);
}

// Runs a replayed program; `keep` lists the donatable arguments whose buffer
// another holder still needs (XLA copies those instead of consuming them).
std::vector<runtime::BufferPtr> execute_replay(const CompiledProgram& prog, const std::vector<PJRT_Buffer*>& argv,
                                               int device, std::string_view what, size_t donatable,
                                               const std::vector<int64_t>& keep) {
  auto results = execute_on(*prog.exe, argv, device, what, keep);
  bump(metrics().donated, static_cast<int64_t>(donatable - keep.size()));
  bump(metrics().executions);
  bump(metrics().replays);
  return results;
}

// A replay's arguments in order. `input(arg)` gives a kInput's buffer and
// `cpu(i)` the value of CPU input i; runtime scalars made here are kept
// alive in `scalars`. Random ops reserve fresh counters of their generator,
// as eager does (and as a CUDA graph's philox offsets advance): a replay
// draws new numbers, reproducibly from the seed.
template <class InputFn, class CpuFn>
std::vector<PJRT_Buffer*> replay_args(const std::vector<CapturedGraph::Arg>& args, int device,
                                      std::vector<runtime::BufferPtr>& scalars, InputFn input, CpuFn cpu) {
  std::vector<PJRT_Buffer*> argv;
  argv.reserve(args.size());
  scalars.reserve(args.size());
  uint64_t rng_offset = 0;
  for (const auto& a : args) {
    switch (a.kind) {
      case CapturedGraph::Arg::kInput:
        argv.push_back(input(a));
        continue;
      case CapturedGraph::Arg::kConstant:
        argv.push_back(a.constant->get());
        continue;
      case CapturedGraph::Arg::kCpuInput:
        scalars.push_back(scalar_buffer(cpu(a.input), a.elem, device));
        break;
      case CapturedGraph::Arg::kRngSeed:
        scalars.push_back(reserve_rng(a.gen, a.advance, a.elem, device, rng_offset));
        break;
      case CapturedGraph::Arg::kRngOffset:
        scalars.push_back(scalar_buffer(c10::Scalar(static_cast<int64_t>(rng_offset)), a.elem, device));
        break;
    }
    argv.push_back(scalars.back()->get());
  }
  return argv;
}

class FusedDriver final : public Driver {
 public:
  const char* name() const override { return "fused"; }

  void activate() override {
    active_ = true;
    set_slot_free_hook(&FusedDriver::on_free);
    set_slot_materialize_hook(&FusedDriver::on_materialize);
  }

  void dispatch(OpCall& call, const Lowering& lower) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    // An optimizer creates its state (zeros_like for Adam's moments) inside
    // its first step only. Recorded into the step's graph, those fills made
    // step 1 a program of its own, compiled once and never run again (GPT
    // AdamW: 530 ops, then 424 from step 2 on, 340-370 ms each). Run in
    // strict eager (a fill there needs no program: OpCall::try_host_fill),
    // the state enters the graph as parameters, as it does from step 2 on.
    if (optimizer_step_ && !graph_capturing_ && reads_no_storage(call)) {
      strict_driver().dispatch(call, lower);
      return;
    }
    if (p_ && p_->device != call.device()) flush_locked(SyncReason::kMarkStep, "device change");
    if (!p_) p_ = std::make_unique<Pending>(call.device());
    Pending& p = *p_;
    p.key.add(call.key().hi);
    p.key.add(call.key().lo);
    const size_t n = call.num_slots();
    std::vector<ir::Value> storage(n);
    std::vector<int> ids(n);
    for (size_t i = 0; i < n; ++i) {
      StorageSlot* s = call.slot(i);
      auto [it, fresh] = p.ids.try_emplace(s, static_cast<int>(p.slots.size()));
      if (fresh) p.slots.push_back(GraphSlot{s, {}, false, s->elem, s->numel});
      ids[i] = it->second;
      p.key.add(static_cast<uint64_t>(ids[i]));
      GraphSlot& gs = p.slots[ids[i]];
      if (gs.value.valid()) {
        storage[i] = gs.value;
      } else if (call.needs_value(i)) {
        // First use of a storage that holds a run buffer (or, in a graph
        // capture, one an earlier part of the region wrote): a parameter.
        // A value still in strict eager's compile-ahead queue is read at
        // the flush, once the queue has run (captures start with it empty).
        std::function<runtime::BufferPtr()> queued;
        if (s->pending && !seg_written_.count(s)) queued = queued_value(s);
        if (!queued && !s->pending) reshard_slot(s);
        TORCH_INTERNAL_ASSERT(((s->buffer || s->sharded) && !s->pending) || seg_written_.count(s) || queued,
                              "fused eager: storage state out of sync");
        ShardedPtr sharded =
            queued || seg_written_.count(s) || !s->sharded || s->sharded->shards.empty() ? nullptr : s->sharded;
        if (sharded) {
          // The value in the shape its sharding applies to, viewed flat as
          // every storage is (views of it fold that reshape away).
          ir::Builder vb(p.g);
          gs.value = vb.reshape(p.g.param(ir::TensorType{s->elem, sharded->dims}), {s->numel});
        } else {
          gs.value = p.g.param(ir::TensorType{s->elem, {s->numel}});
        }
        p.params.push_back(Param{
            queued ? nullptr : s->buffer, s, s->elem, s->numel, {}, ids[i], std::move(queued), std::move(sharded)});
        storage[i] = gs.value;
      }
    }
    std::vector<ir::Value> scalars;
    std::vector<ir::ElemType> elems = call.scalar_elems();
    std::vector<OpCall::ScalarSource> srcs = call.scalar_sources();
    ir::Builder b(p.g);
    for (size_t k = 0; k < srcs.size(); ++k) {
      // A constant rather than a parameter, its value in the key: an AdamW
      // step has ~100 numbers (lr, betas, eps per parameter), and each
      // parameter costs every execute.
      if (bakes(srcs[k], elems[k])) {
        const uint64_t bits = call.scalar_bits_at(k);
        scalars.push_back(b.constant_bits(bits, elems[k]));
        p.key.add(kBakedNumber);
        p.key.add(bits);
        continue;
      }
      scalars.push_back(p.g.param(ir::TensorType{elems[k], {}}));
      p.params.push_back(Param{call.scalar_buffer_at(k), nullptr, elems[k], 0, std::move(srcs[k]), -1});
    }
    // What each written slot holds afterwards, computed before any slot changes.
    std::vector<std::pair<ir::ElemType, int64_t>> after(n);
    for (size_t i = 0; i < n; ++i)
      if (call.writes(i)) after[i] = call.result_elem(i);
    std::vector<ir::Value> written = call.assemble(b, storage, scalars, lower);
    size_t wi = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!call.writes(i)) continue;
      GraphSlot& gs = p.slots[ids[i]];
      gs.value = written[wi++];
      gs.written = true;
      StorageSlot* s = call.slot(i);
      if (s->pending) forget_queued(s);  // this graph's value supersedes one still in the compile-ahead queue
      s->pending = true;
      s->elem = after[i].first;
      s->numel = after[i].second;
    }
    ++p.ops;
    if (dumping()) p.origin += take_program_origin() + "\n";
    // A graph capture holds the whole region, however long.
    if (p.ops >= max_ops_ && !graph_capturing_) flush_locked(SyncReason::kSizeLimit, "size limit");
  }

  void sync_point(SyncReason why, std::string_view op) override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    // A host read of a value that is already there flushes nothing, yet the
    // program being captured would bake what was read (the branch a
    // torch.cond predicate chose, an .item()): the capture must fail.
    if (why == SyncReason::kHostRead) {
      if (compiled_capture_) capture_read_host_ = true;
      if (graph_capturing_ && capture_break_.empty())
        capture_break_ = std::string(to_string(why)) + (op.empty() ? "" : " (" + std::string(op) + ")");
    }
    flush_locked(why, op);
    // Values strict eager queued before this mode began, and graphs queued
    // while their programs compile. A step boundary reads nothing on the
    // host: what it flushed may stay queued (Python records the next step).
    if (why != SyncReason::kMarkStep) drain_compile_ahead();
  }

  void deactivate() override {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush_locked(SyncReason::kModeChange, "mode change");
    active_ = false;
    // Captured graphs must still hear of freed slots they name.
    if (users_.empty()) {
      set_slot_free_hook(nullptr);
      set_slot_materialize_hook(nullptr);
    }
  }

  void set_bake_numbers(bool on) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    bake_numbers_ = on;
  }

  void set_optimizer_step(bool on) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    optimizer_step_ = on;
  }

  static FusedDriver& get() {
    static FusedDriver* d = new FusedDriver();  // never destroyed: slots may be freed at exit
    return *d;
  }

  void begin_capture() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    TORCH_CHECK(!graph_capturing_, "a compiled graph cannot be captured inside a tpu graph capture");
    flush_locked(SyncReason::kMarkStep, "before a capture");
    drain_compile_ahead();
    capture_start_ = flush_count_;
    compiled_capture_ = true;
    capture_read_host_ = false;
  }

  std::shared_ptr<CapturedGraph> end_capture(const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& out,
                                             std::string& why_not) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    compiled_capture_ = false;
    if (flush_count_ != capture_start_) {
      why_not = "the graph flushed before its end (a host read or a data-dependent shape)";
    } else if (capture_read_host_) {
      why_not = "the graph read a device value on the host (a torch.cond predicate, .item())";
    } else if (!p_) {
      why_not = "the graph recorded no op";
    }
    auto cap = std::make_shared<CapturedGraph>();
    cap_in_ = &in;
    cap_out_ = &out;
    cap_why_ = &why_not;
    bool want = why_not.empty();
    flush_locked(SyncReason::kMarkStep, "compiled graph", want ? cap.get() : nullptr);
    cap_in_ = cap_out_ = nullptr;
    cap_why_ = nullptr;
    if (!want || (!cap->prog && !cap->pending_prog.valid())) {
      if (why_not.empty()) why_not = "the graph has no live result";
      return nullptr;
    }
    return cap;
  }

  std::optional<std::vector<at::Tensor>> replay(CapturedGraph& c, const std::vector<at::Tensor>& in) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    flush_locked(SyncReason::kMarkStep, "before a replay");
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

  // --- graph capture (torch.accelerator.Graph) ---
  void begin_graph_capture(bool keep_text) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    TORCH_CHECK(!graph_capturing_,
                "tpu graph capture is already underway; graphs cannot be captured inside each other");
    flush_locked(SyncReason::kMarkStep, "before a graph capture");
    drain_compile_ahead();
    graph_capturing_ = true;
    capture_break_.clear();
    keep_text_ = keep_text;
  }

  // Ends the current part of the region being captured and starts the next
  // (the optimizer hook calls this before optimizer.step(): one program for
  // forward+backward and one for the step run faster on XLA:CPU than one
  // for both; see _eager._optimizer_step_begin). The part's results stay
  // pending until the capture ends, so a host read of one still breaks the
  // capture, and later parts read them as parameters.
  void cut_graph_capture() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!graph_capturing_ || !capture_break_.empty() || !p_) return;
    auto seg = close_segment(std::move(p_));
    if (seg->prog) segments_.push_back(std::move(seg));
  }

  bool graph_capturing() const { return graph_capturing_; }

  // Builds the captured graph without running it (a CUDA graph's capture
  // runs nothing either): the storages keep their old values until replay().
  std::shared_ptr<StaticGraph> end_graph_capture(bool keep_text) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    TORCH_CHECK(graph_capturing_, "tpu graph capture_end() called without capture_begin()");
    keep_text_ = keep_text_ || keep_text;
    struct Done {  // whatever happens, the slots go back to their pre-capture state
      FusedDriver& d;
      ~Done() {
        d.graph_capturing_ = false;
        d.restore_captured_slots();
      }
    } done{*this};
    if (!capture_break_.empty()) {
      std::string why = std::move(capture_break_);
      capture_break_.clear();
      graph_capturing_ = false;
      flush_locked(SyncReason::kMarkStep, "after a failed graph capture");
      TORCH_CHECK(false, "tpu graph capture failed: a ", why,
                  " happened while capturing. A captured graph cannot read tpu values on the host, copy "
                  "between host and device, or wait for the device; do that before capture_begin() or after "
                  "capture_end(). The work recorded so far was run eagerly.");
    }
    std::vector<std::shared_ptr<StaticGraph>> before = std::move(segments_);
    segments_.clear();
    if (!p_ && before.empty()) {
      TORCH_WARN("tpu graph capture recorded no tpu op; replay() will do nothing");
      return std::make_shared<StaticGraph>();
    }
    std::shared_ptr<StaticGraph> g = p_ ? close_segment(std::move(p_)) : std::make_shared<StaticGraph>();
    if (!g->prog && before.empty())
      TORCH_WARN("tpu graph capture: no result of the captured work is still alive; replay() will do nothing");
    g->before = std::move(before);
    return g;
  }

  // Ends a capture that raised: what was recorded runs eagerly.
  void abort_graph_capture() {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    if (!graph_capturing_) return;
    graph_capturing_ = false;
    capture_break_.clear();
    settle_segments();
    restore_captured_slots();
    flush_locked(SyncReason::kMarkStep, "after a failed graph capture");
  }

  void replay_graph(StaticGraph& g) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    TORCH_CHECK(!graph_capturing_, "a tpu graph cannot be replayed while another is being captured");
    flush_locked(SyncReason::kMarkStep, "before a graph replay");
    drain_compile_ahead();
    RECORD_FUNCTION("tpu::graph_replay", std::vector<c10::IValue>());
    for (auto& seg : g.before) replay_one(*seg);
    replay_one(g);
  }

 private:
  void replay_one(StaticGraph& g) {
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
  StorageSlot* adopt(StorageSlot* s) {
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

  void release(StaticGraph* g) {
    std::lock_guard<std::recursive_mutex> lock(mu_);
    for (StorageSlot* s : g->slots) {
      auto it = users_.find(s);
      if (it == users_.end()) continue;  // an adopted slot
      std::erase(it->second, g);
      if (it->second.empty()) users_.erase(it);
    }
    if (users_.empty() && !active_) {
      set_slot_free_hook(nullptr);
      set_slot_materialize_hook(nullptr);
    }
  }

  struct Param {  // one per graph parameter, in order
    runtime::BufferPtr buffer;
    StorageSlot* slot;  // the storage it was read from, or null for a runtime scalar
    ir::ElemType elem;
    int64_t numel;
    OpCall::ScalarSource scalar;
    int gslot;                                   // its graph slot, or -1
    std::function<runtime::BufferPtr()> queued;  // set: `buffer` comes from the compile-ahead queue
    ShardedPtr sharded;                          // set: the storage's value lives on a mesh (SPMD)
  };
  struct GraphSlot {
    StorageSlot* slot;  // null once the storage is freed
    ir::Value value;    // its current value in the graph (invalid: not read or written yet)
    bool written = false;
    ir::ElemType elem0;  // what the slot held before the graph (a capture restores it)
    int64_t numel0 = 0;
  };
  struct Pending {
    explicit Pending(int dev) : device(dev) {}
    int device;
    ir::Graph g;
    std::vector<Param> params;
    std::unordered_map<StorageSlot*, int> ids;
    std::vector<GraphSlot> slots;
    KeyBuilder key;
    int64_t ops = 0;
    std::string origin;  // the recorded ops and their Python lines, while dumping
  };

  // One part of a graph capture as a StaticGraph bound to the storages it
  // touched; compiles (or finds) its program and runs nothing. The slots it
  // wrote stay pending (in seg_written_) until the capture ends.
  std::shared_ptr<StaticGraph> close_segment(std::unique_ptr<Pending> p) {
    auto g = std::shared_ptr<StaticGraph>(new StaticGraph(), [](StaticGraph* sg) {
      get().release(sg);
      delete sg;
    });
    for (auto& gs : p->slots)
      if (gs.written && gs.slot) seg_written_.try_emplace(gs.slot, std::make_pair(gs.elem0, gs.numel0));
    ++flush_count_;
    bump(metrics().fused_ops, p->ops);
    g->device = p->device;
    g->ops = p->ops;
    std::vector<int> outs = live_outputs(*p);
    if (outs.empty()) return g;
    for (const Param& pr : p->params)
      TORCH_CHECK(!pr.sharded,
                  "tpu graph capture of a tensor sharded over a mesh is not supported; compile the step with "
                  "torch.compile(backend=\"tpu\"), which runs it as one SPMD program");
    std::vector<std::pair<int, int>> aliases = donations(*p, outs);
    std::unordered_map<StorageSlot*, int> index;
    auto slot_index = [&](StorageSlot* s) {
      auto [it, fresh] = index.try_emplace(s, static_cast<int>(g->slots.size()));
      if (fresh) g->slots.push_back(s);
      return it->second;
    };
    for (const Param& pr : p->params) {
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
        fixed_or_rng(pr, a);
      }
      g->args.push_back(std::move(a));
    }
    for (int k : outs) {
      StorageSlot* s = p->slots[k].slot;
      g->results.push_back(StaticGraph::Result{slot_index(s), s->elem, s->numel});
    }
    for (auto [j, k] : aliases) g->donated.push_back(j);
    g->prog = program_for(*p, outs, aliases, keep_text_ ? &g->text : nullptr);
    for (StorageSlot* s : g->slots) users_[s].push_back(g.get());
    set_slot_free_hook(&FusedDriver::on_free);
    set_slot_materialize_hook(&FusedDriver::on_materialize);
    return g;
  }

  // The end of a capture: every slot a part wrote leaves the pending state
  // with its pre-capture type (capturing ran nothing).
  void restore_captured_slots() {
    for (auto& [s, old] : seg_written_) {
      s->pending = false;
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
  void settle_segments() {
    if (segments_.empty()) return;
    std::vector<std::shared_ptr<StaticGraph>> segs = std::move(segments_);
    segments_.clear();
    for (auto& [s, old] : seg_written_) s->pending = false;
    seg_written_.clear();
    for (auto& seg : segs) replay_one(*seg);
    // The pending part read those storages at recording time: point its
    // parameters at their new buffers.
    if (p_)
      for (Param& pr : p_->params)
        if (pr.gslot >= 0 && p_->slots[pr.gslot].slot) pr.buffer = p_->slots[pr.gslot].slot->buffer;
  }

  static void on_free(StorageSlot* s) {
    FusedDriver& d = get();
    std::lock_guard<std::recursive_mutex> lock(d.mu_);
    StorageSlot* own = d.adopt(s);
    if (d.seg_written_.erase(s) && own) d.adopted_now_[s] = own;
    if (!d.p_) return;
    auto it = d.p_->ids.find(s);
    if (it == d.p_->ids.end()) return;
    d.p_->slots[it->second].slot = nullptr;  // dead: not an output
    d.p_->ids.erase(it);
  }
  static void on_materialize(StorageSlot*) { get().sync_point(SyncReason::kSlotAccess, "storage access"); }

  void flush_locked(SyncReason why, std::string_view op, CapturedGraph* cap = nullptr) {
    // Numbers recorded after a host read may come from device values: a
    // program per value. Only a graph's own numbers are baked in.
    bake_numbers_ = false;
    if (flushing_ || (!p_ && segments_.empty())) return;
    if (graph_capturing_ && capture_break_.empty())
      capture_break_ = std::string(to_string(why)) + (op.empty() ? "" : " (" + std::string(op) + ")");
    settle_segments();
    if (!p_) return;
    RECORD_FUNCTION("tpu::fused_flush", std::vector<c10::IValue>());
    ++flush_count_;
    flushing_ = true;
    std::unique_ptr<Pending> p = std::move(p_);
    struct Reset {
      bool& f;
      ~Reset() { f = false; }
    } reset{flushing_};
    auto& mt = metrics();
    bump(mt.flushes);
    bump(mt.fused_ops, p->ops);
    for (int64_t m = mt.fused_max_ops.load(); p->ops > m && !mt.fused_max_ops.compare_exchange_weak(m, p->ops);) {
    }
    {
      std::lock_guard<std::mutex> l(mt.mu);
      ++mt.flush_reasons[std::string(to_string(why)) + (op.empty() ? "" : ": ") + std::string(op)];
    }
    std::vector<int> outs = live_outputs(*p);
    if (outs.empty()) {
      clear_pending(*p);
      return;
    }
    std::vector<ShardedPtr> sharded;
    for (const Param& pr : p->params) sharded.push_back(pr.sharded);
    try {
      if (std::vector<int> mesh = spmd_mesh(sharded); !mesh.empty()) {
        if (cap && !describe(*p, outs, *cap)) cap = nullptr;
        flush_spmd(*p, outs, std::move(mesh), sharded, cap);
        clear_pending(*p);
        return;
      }
    } catch (...) {
      drop_results(*p, outs);  // two meshes in one graph, or a failed SPMD compile or run
      throw;
    }
    std::vector<std::pair<int, int>> aliases = donations(*p, outs);
    if (cap && !describe(*p, outs, *cap)) cap = nullptr;
    if (cap)
      for (auto [j, k] : aliases) cap->donated.push_back(j);
    try {
      CacheKey key = finish_key(*p, outs);
      auto emit = emitter(*p, outs, aliases);
      if (dumping()) set_program_origin(p->origin);
      ProgramPtr prog = cached(key);
      int64_t out_bytes = 0;
      if (!prog && !graph_capturing_ && queue_instead(*p, outs, out_bytes)) {
        queue_graph(*p, outs, aliases, key, emit, out_bytes, cap);
        return;
      }
      if (!prog) prog = compile_now(*p, key, emit);
      if (cap) cap->prog = prog;
      resolve_queued(*p);
      std::vector<PJRT_Buffer*> argv;
      for (auto& a : p->params) argv.push_back(a.buffer->get());
      std::vector<int64_t> keep;
      std::vector<runtime::BufferPtr> donated = split_donations(*p, aliases, keep);
      auto results = execute_on(*prog->exe, argv, p->device, "a fused graph", keep);
      DonatedHandles::get().add(std::move(donated), results);
      bump(mt.donated, static_cast<int64_t>(aliases.size() - keep.size()));
      bump(mt.executions);
      for (size_t k = 0; k < outs.size(); ++k) {
        StorageSlot* s = p->slots[outs[k]].slot;
        s->set_buffer(results[k]);
        s->pending = false;
        OpCall::track_result(s->buffer, "fused graph");
      }
    } catch (...) {
      drop_results(*p, outs);
      throw;
    }
    clear_pending(*p);
  }

  // A flush failed: the values the graph would have produced are lost. The
  // storages read as empty again rather than as stale data, and the error
  // propagates to whoever needed them.
  static void drop_results(Pending& p, const std::vector<int>& outs) {
    for (int i : outs) {
      StorageSlot* s = p.slots[i].slot;
      if (s && s->pending) {
        s->set_buffer(nullptr);
        s->pending = false;
      }
    }
    clear_pending(p);
  }

  // A graph that reads a sharded storage: one SPMD program over the mesh.
  // Nothing is donated (the shards stay valid until the results replace them).
  void flush_spmd(Pending& p, const std::vector<int>& outs, std::vector<int> mesh,
                  const std::vector<ShardedPtr>& sharded, CapturedGraph* cap) {
    resolve_queued(p);
    auto plan = std::make_shared<SpmdPlan>();
    plan->devices = std::move(mesh);
    std::unordered_map<int, int> param_of;  // graph slot -> the parameter that read it
    for (size_t j = 0; j < p.params.size(); ++j)
      if (p.params[j].gslot >= 0) param_of.emplace(p.params[j].gslot, static_cast<int>(j));
    std::vector<int> pinned(outs.size(), -1);
    std::vector<ir::Value> vals;
    for (size_t k = 0; k < outs.size(); ++k) {
      vals.push_back(p.slots[outs[k]].value);
      auto it = param_of.find(outs[k]);
      if (it == param_of.end()) continue;
      const Param& pr = p.params[it->second];
      if (p.g.type(vals.back()) == ir::TensorType{pr.elem, {pr.numel}}) pinned[k] = it->second;
    }
    p.g.set_outputs(vals);
    std::vector<std::vector<int64_t>> shapes;
    if (cap) shapes = result_shapes(*cap);
    spmd_layout(*plan, p.g, sharded, pinned, cap ? &shapes : nullptr);
    // Results leave the graph in their layout's shape, so that the reshape
    // from the flat storage folds into the computation that made them.
    ir::Builder b(p.g);
    for (size_t k = 0; k < vals.size(); ++k) vals[k] = b.reshape(vals[k], plan->results[k].dims);
    p.g.set_outputs(vals);
    spmd_compile(*plan, p.g, finish_key(p, outs), p.ops);
    std::vector<runtime::BufferPtr> whole;
    for (const Param& pr : p.params) whole.push_back(pr.sharded ? nullptr : pr.buffer);
    auto results = spmd_run(*plan, whole, sharded, p.device);
    for (size_t k = 0; k < outs.size(); ++k) {
      StorageSlot* s = p.slots[outs[k]].slot;
      spmd_store(s, results[k]);
      s->pending = false;
    }
    if (cap) {
      cap->spmd = plan;
      cap->prog = plan->prog;
      cap->donated.clear();
    }
  }

  // Per result of a capture, the shape of the input or output tensor that
  // holds its storage whole (empty when none does): an optimizer state's
  // (rows, cols) lets the partitioner split it as its parameter is split.
  static std::vector<std::vector<int64_t>> result_shapes(const CapturedGraph& c) {
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
  std::optional<std::vector<at::Tensor>> replay_spmd(CapturedGraph& c, const std::vector<at::Tensor>& in,
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
    auto results = spmd_run(plan, whole, sharded, c.device, &numbers);
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
  static std::vector<at::Tensor> make_outputs(const CapturedGraph& c, const std::vector<at::Tensor>& in,
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
      auto impl = c10::make_intrusive<c10::TensorImpl>(
          std::move(st), c10::DispatchKeySet(c10::DispatchKey::PrivateUse1), c10::scalarTypeToTypeMeta(o.dtype));
      impl->set_sizes_and_strides(o.sizes, o.strides, o.offset);
      outs.emplace_back(std::move(impl));
    }
    return outs;
  }

  // The graph's outputs: the storages it wrote that are still alive.
  static std::vector<int> live_outputs(const Pending& p) {
    std::vector<int> outs;
    for (size_t i = 0; i < p.slots.size(); ++i)
      if (p.slots[i].written && p.slots[i].slot) outs.push_back(static_cast<int>(i));
    return outs;
  }

  // A storage the graph reads and then overwrites donates its old buffer
  // to the new value (same type), so a step updates weights in place.
  // Pairs of (parameter, output).
  static std::vector<std::pair<int, int>> donations(const Pending& p, const std::vector<int>& outs) {
    std::vector<std::pair<int, int>> aliases;
    std::unordered_map<int, int> param_of;
    for (size_t j = 0; j < p.params.size(); ++j)
      if (p.params[j].gslot >= 0) param_of.emplace(p.params[j].gslot, static_cast<int>(j));
    for (size_t k = 0; k < outs.size(); ++k) {
      auto it = param_of.find(outs[k]);
      if (it == param_of.end()) continue;
      const Param& pr = p.params[it->second];
      if (p.g.type(p.slots[outs[k]].value) == ir::TensorType{pr.elem, {pr.numel}})
        aliases.emplace_back(it->second, static_cast<int>(k));
    }
    return aliases;
  }

  // The pending graph's program: memory cache, persistent tiers, or a
  // compile. `text`, when given, receives the StableHLO (emitted even on a hit).
  ProgramPtr program_for(Pending& p, const std::vector<int>& outs, const std::vector<std::pair<int, int>>& aliases,
                         std::string* text) {
    CacheKey key = finish_key(p, outs);
    auto emit = emitter(p, outs, aliases);
    if (text) *text = emit();
    if (dumping()) set_program_origin(p.origin);
    if (ProgramPtr prog = cached(key)) return prog;
    if (text) emit = [text]() { return *text; };
    return compile_now(p, key, emit);
  }

  static CacheKey finish_key(Pending& p, const std::vector<int>& outs) {
    for (int i : outs) p.key.add(static_cast<uint64_t>(i) | (1ull << 40));
    p.key.add(0xd0a7ed);  // programs with donation; older cache entries had none
    return p.key.finish();
  }

  static std::function<std::string()> emitter(Pending& p, const std::vector<int>& outs,
                                              const std::vector<std::pair<int, int>>& aliases) {
    return [&p, &outs, &aliases]() {
      std::vector<ir::Value> vals;
      for (int i : outs) vals.push_back(p.slots[i].value);
      p.g.set_outputs(vals);
      for (auto [j, k] : aliases) p.g.alias(j, k);
      return p.g.to_mlir();
    };
  }

  static ProgramPtr cached(const CacheKey& key) {
    ProgramPtr prog = ExecutableCache::get().lookup(key);
    if (prog) {
      bump(metrics().cache_hits);
      bump(metrics().fused_cache_hits);
    }
    return prog;
  }

  ProgramPtr compile_now(Pending& p, const CacheKey& key, const std::function<std::string()>& emit) {
    bump(metrics().cache_misses);
    std::string name = "fused[" + std::to_string(p.ops) + " ops]";
    if (has_queued(p)) {
      // Strict eager's queue must run before this graph can: compile it on
      // the pool meanwhile, ahead of the queue's remaining compiles (it is
      // the longest).
      auto fut = compile_on_pool(key, name, emit(), /*tiered=*/false, /*urgent=*/true);
      drain_compile_ahead();
      return fut.get();
    }
    return ExecutableCache::get().compile_and_insert(client(), key, name, emit);
  }

  // The donatable parameters whose buffer the program may consume (returned)
  // and those it must copy (`keep`): the slot and its parameter hold a
  // donated buffer; a third holder (another storage sharing it) keeps it.
  static std::vector<runtime::BufferPtr> split_donations(const Pending& p,
                                                         const std::vector<std::pair<int, int>>& aliases,
                                                         std::vector<int64_t>& keep) {
    std::vector<runtime::BufferPtr> donated;
    for (auto [j, k] : aliases) {
      if (p.params[j].buffer.use_count() != 2)
        keep.push_back(j);
      else
        donated.push_back(p.params[j].buffer);
    }
    return donated;
  }

  // A flush whose program must be compiled: queued (enqueue_graph) rather
  // than compiled here, unless its results need a large share of the
  // device's memory (running out raises at the flush, as in strict eager).
  static bool queue_instead(const Pending& p, const std::vector<int>& outs, int64_t& out_bytes) {
    if (!compile_ahead_enabled()) return false;
    out_bytes = 0;
    for (int k : outs) out_bytes += static_cast<int64_t>(p.slots[k].slot->nbytes);
    return out_bytes < (int64_t{64} << 20) || static_cast<size_t>(out_bytes) <= device_memory_info(p.device).first / 4;
  }

  // Queues the flushed graph behind strict eager's compile-ahead queue;
  // its written storages stay pending there until it has run.
  void queue_graph(Pending& p, const std::vector<int>& outs, const std::vector<std::pair<int, int>>& aliases,
                   const CacheKey& key, const std::function<std::string()>& emit, int64_t out_bytes,
                   CapturedGraph* cap) {
    bump(metrics().cache_misses);
    QueuedGraph g;
    g.name = cap ? "a compiled graph" : "a fused graph";
    g.program = "fused[" + std::to_string(p.ops) + " ops]";
    g.device = p.device;
    g.out_bytes = out_bytes;
    // A parameter still in the queue (no buffer yet) is copied, not consumed.
    std::vector<runtime::BufferPtr> donated = split_donations(p, aliases, g.keep);
    for (Param& pr : p.params) {
      g.bufs.push_back(pr.buffer);
      g.from_queue.push_back(std::move(pr.queued));
    }
    for (int k : outs) {
      const GraphSlot& gs = p.slots[k];
      g.outs.push_back(QueuedGraph::Out{gs.slot, gs.slot->elem, gs.slot->numel, gs.elem0, gs.numel0});
    }
    const auto n_donated = static_cast<int64_t>(donated.size());
    g.launched = [donated = std::move(donated), n_donated](const std::vector<runtime::BufferPtr>& results) mutable {
      DonatedHandles::get().add(std::move(donated), results);
      bump(metrics().donated, n_donated);
    };
    clear_pending(p);  // the outputs become the queue's pending storages
    // Compiled in queue order, not first: the optimizer step's graph put
    // ahead of the backward's compiles delayed a first loss by 0.3-0.5 s and
    // ended the step no sooner (GPT, 2 cores).
    auto fut = enqueue_graph(key, emit, std::move(g));
    if (cap) cap->pending_prog = std::move(fut);
  }

  static bool has_queued(const Pending& p) {
    for (const Param& pr : p.params)
      if (pr.queued) return true;
    return false;
  }

  // The parameters read from the compile-ahead queue: run it, take their values.
  static void resolve_queued(Pending& p) {
    if (!has_queued(p)) return;
    drain_compile_ahead();
    for (Param& pr : p.params)
      if (pr.queued) {
        pr.buffer = pr.queued();
        pr.queued = nullptr;
      }
  }

  // Whether a runtime scalar recorded now becomes a constant of the program:
  // in a graph capture, every number and CPU scalar but the generator's
  // state (the capture keeps their values); in a torch.compile graph that
  // takes only tensors (set_bake_numbers), numbers only: dynamo made them
  // constants of the graph, and a CPU tensor among the graph's inputs (a
  // non-capturable optimizer's step count) is read anew on each replay.
  bool bakes(const OpCall::ScalarSource& src, ir::ElemType elem) const {
    if (ir::is_complex(elem)) return false;
    using K = OpCall::ScalarSource;
    if (graph_capturing_) return src.kind == K::kConstant || src.kind == K::kCpuTensor;
    return bake_numbers_ && (src.kind == K::kConstant || (src.kind == K::kCpuTensor && src.wrapped));
  }

  // A non-storage parameter of a capture: the generator's counters for a
  // random op (reserved again on every replay), else the value it had when
  // recorded.
  static void fixed_or_rng(const Param& pr, CapturedGraph::Arg& a) {
    const auto k = pr.scalar.kind;
    if (k == OpCall::ScalarSource::kRngSeed || k == OpCall::ScalarSource::kRngOffset) {
      a.kind = k == OpCall::ScalarSource::kRngSeed ? CapturedGraph::Arg::kRngSeed : CapturedGraph::Arg::kRngOffset;
      a.gen = pr.scalar.gen;
      a.advance = pr.scalar.advance;
    } else {
      a.kind = CapturedGraph::Arg::kConstant;
      a.constant = pr.buffer;
    }
  }

  // Fills `c` from the graph about to run: the source of every parameter
  // and the destination of every result, in terms of the capture's inputs
  // and outputs. False (with the reason) when one is neither.
  bool describe(Pending& p, const std::vector<int>& outs, CapturedGraph& c) {
    const auto& in = *cap_in_;
    const auto& out = *cap_out_;
    std::string& why = *cap_why_;
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
      const Param& pr = p.params[k];
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
          fixed_or_rng(pr, a);
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

  // The graph's own pending marks. A storage it only read may still be
  // pending in strict eager's queue (a graph queued before this one): that
  // mark is the queue's, which must hear when the storage is freed.
  static void clear_pending(Pending& p) {
    for (auto& gs : p.slots)
      if (gs.slot && gs.written) gs.slot->pending = false;
  }

  std::recursive_mutex mu_;
  std::unique_ptr<Pending> p_;
  bool active_ = false;
  bool optimizer_step_ = false;  // recording an optimizer.step() (set_optimizer_step)

  // Whether `call` only writes whole storages that this graph has not touched.
  bool reads_no_storage(const OpCall& call) const {
    for (size_t i = 0; i < call.num_slots(); ++i)
      if (call.needs_value(i) || (p_ && p_->ids.count(call.slot(i)))) return false;
    return call.num_slots() > 0;
  }
  std::atomic<bool> graph_capturing_{false};
  std::string capture_break_;                           // the first flush during a graph capture
  bool keep_text_ = false;                              // the capture keeps its StableHLO
  std::vector<std::shared_ptr<StaticGraph>> segments_;  // closed parts of the capture underway
  // Slots those parts wrote (pending until the capture ends) and their
  // pre-capture type; slots freed meanwhile, to the parts' own copies.
  std::unordered_map<StorageSlot*, std::pair<ir::ElemType, int64_t>> seg_written_;
  std::unordered_map<StorageSlot*, StorageSlot*> adopted_now_;
  std::unordered_map<StorageSlot*, std::vector<StaticGraph*>> users_;  // slots named by captured graphs
  bool flushing_ = false;
  int64_t flush_count_ = 0;
  int64_t capture_start_ = -1;
  bool compiled_capture_ = false;                              // between begin_capture() and end_capture()
  bool capture_read_host_ = false;                             // a host read happened in that window
  bool bake_numbers_ = false;                                  // set_bake_numbers; cleared by any flush
  static constexpr uint64_t kBakedNumber = 0x5ca1a4f01dedULL;  // key tag before a baked-in number
  const std::vector<at::Tensor>* cap_in_ = nullptr;
  const std::vector<at::Tensor>* cap_out_ = nullptr;
  std::string* cap_why_ = nullptr;
  const int64_t max_ops_ = max_ops_from_env();
};

}  // namespace

Driver& fused_driver() { return FusedDriver::get(); }

void begin_capture() {
  set_current_driver(&fused_driver());
  FusedDriver::get().begin_capture();
}
std::shared_ptr<CapturedGraph> end_capture(const std::vector<at::Tensor>& inputs,
                                           const std::vector<at::Tensor>& outputs, std::string& why_not) {
  return FusedDriver::get().end_capture(inputs, outputs, why_not);
}
std::optional<std::vector<at::Tensor>> replay(CapturedGraph& c, const std::vector<at::Tensor>& inputs) {
  return FusedDriver::get().replay(c, inputs);
}

namespace {
Driver* g_before_capture = nullptr;  // the driver to restore when a graph capture ends
}

void begin_graph_capture(bool keep_text) {
  FusedDriver& d = FusedDriver::get();
  Driver* prev = set_current_driver(&fused_driver());
  try {
    d.begin_graph_capture(keep_text);
  } catch (...) {
    set_current_driver(prev);
    throw;
  }
  g_before_capture = prev;
}
std::shared_ptr<StaticGraph> end_graph_capture(bool keep_text) {
  FusedDriver& d = FusedDriver::get();
  TORCH_CHECK(d.graph_capturing(), "tpu graph capture_end() called without capture_begin()");
  struct Restore {
    ~Restore() { set_current_driver(g_before_capture); }
  } restore;
  return d.end_graph_capture(keep_text);
}
void abort_graph_capture() {
  if (!FusedDriver::get().graph_capturing()) return;
  FusedDriver::get().abort_graph_capture();
  set_current_driver(g_before_capture);
}
void set_optimizer_step(bool on) { FusedDriver::get().set_optimizer_step(on); }
void set_bake_numbers(bool on) { FusedDriver::get().set_bake_numbers(on); }
bool graph_capturing() { return FusedDriver::get().graph_capturing(); }
void cut_graph_capture() { FusedDriver::get().cut_graph_capture(); }
void replay_graph(StaticGraph& g) { FusedDriver::get().replay_graph(g); }
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

}  // namespace torch_tpu::record
