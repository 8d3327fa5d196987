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
#include "eager/compile_ahead.h"
#include "eager/drivers.h"
#include "eager/fused_driver.h"

#include <utility>

namespace torch_tpu::eager {

int64_t max_ops_from_env() {
  const char* v = std::getenv("TORCH_TPU_FUSE_MAX_OPS");
  if (!v || !*v) return 4096;
  int64_t n = std::atoll(v);
  return n > 0 ? n : 4096;
}

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

std::vector<runtime::BufferPtr> execute_replay(const CompiledProgram& prog, const std::vector<PJRT_Buffer*>& argv,
                                               int device, std::string_view what, size_t donatable,
                                               const std::vector<int64_t>& keep) {
  auto results = execute_on(*prog.exe, argv, device, what, keep);
  bump(metrics().donated, static_cast<int64_t>(donatable - keep.size()));
  bump(metrics().executions);
  bump(metrics().replays);
  return results;
}

void FusedDriver::activate() {
  active_ = true;
  install_hooks();
}

void FusedDriver::install_hooks() {
  set_slot_free_hook(&FusedDriver::on_free);
  set_pending_hooks(PendingWrite::kGraph, nullptr, &FusedDriver::on_materialize);
}

// Captured graphs must still hear of freed slots they name.
void FusedDriver::remove_hooks_if_idle() {
  if (active_ || graphs_.names_slots()) return;
  set_slot_free_hook(nullptr);
  set_pending_hooks(PendingWrite::kGraph, nullptr, nullptr);
}

void FusedDriver::dispatch(OpCall& call, const Lowering& lower) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // An optimizer creates its state (zeros_like for Adam's moments) inside
  // its first step only. Recorded into the step's graph, those fills made
  // step 1 a program of its own, compiled once and never run again (GPT
  // AdamW: 530 ops, then 424 from step 2 on, 340-370 ms each). Run in
  // strict eager (a fill there needs no program: OpCall::try_host_fill),
  // the state enters the graph as parameters, as it does from step 2 on.
  if (optimizer_step_ && !graphs_.capturing() && reads_no_storage(call)) {
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
      if (s->pending && !graphs_.wrote(s)) queued = queued_value(s);
      if (!queued && !s->pending) reshard_slot(s);
      TORCH_INTERNAL_ASSERT(((s->buffer || s->sharded) && !s->pending) || graphs_.wrote(s) || queued,
                            "fused eager: storage state out of sync");
      ShardedPtr sharded =
          queued || graphs_.wrote(s) || !s->sharded || s->sharded->shards.empty() ? nullptr : s->sharded;
      if (sharded) {
        // The value in the shape its sharding applies to, viewed flat as
        // every storage is (views of it fold that reshape away).
        ir::Builder vb(p.g);
        gs.value = vb.reshape(p.g.param(ir::TensorType{s->elem, sharded->dims}), {s->numel});
      } else {
        gs.value = p.g.param(ir::TensorType{s->elem, {s->numel}});
      }
      p.params.push_back(
          Param{queued ? nullptr : s->buffer, s, s->elem, s->numel, {}, ids[i], std::move(queued), std::move(sharded)});
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
    s->pending.take(PendingWrite::kGraph);
    s->elem = after[i].first;
    s->numel = after[i].second;
  }
  ++p.ops;
  if (dumping()) p.origin += take_program_origin() + "\n";
  // A graph capture holds the whole region, however long.
  if (p.ops >= max_ops_ && !graphs_.capturing()) flush_locked(SyncReason::kSizeLimit, "size limit");
}

void FusedDriver::sync_point(SyncReason why, std::string_view op) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  // A host read of a value that is already there flushes nothing, yet the
  // program being captured would bake what was read (the branch a
  // torch.cond predicate chose, an .item()): the capture must fail.
  if (why == SyncReason::kHostRead) {
    compiled_.note_host_read();
    graphs_.note_sync(why, op);
  }
  flush_locked(why, op);
  // Values strict eager queued before this mode began, and graphs queued
  // while their programs compile. A step boundary reads nothing on the
  // host: what it flushed may stay queued (Python records the next step).
  if (why != SyncReason::kMarkStep) drain_compile_ahead();
}

void FusedDriver::deactivate() {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  flush_locked(SyncReason::kModeChange, "mode change");
  active_ = false;
  remove_hooks_if_idle();
}

void FusedDriver::set_bake_numbers(bool on) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  bake_numbers_ = on;
}

bool FusedDriver::set_compiled_graph_run(bool on) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  return std::exchange(graph_run_, on);
}

void FusedDriver::set_optimizer_step(bool on) {
  std::lock_guard<std::recursive_mutex> lock(mu_);
  optimizer_step_ = on;
}

FusedDriver& FusedDriver::get() {
  static FusedDriver* d = new FusedDriver();  // never destroyed: slots may be freed at exit
  return *d;
}

void FusedDriver::on_free(StorageSlot* s) {
  FusedDriver& d = get();
  std::lock_guard<std::recursive_mutex> lock(d.mu_);
  d.graphs_.on_free(s);
  if (!d.p_) return;
  auto it = d.p_->ids.find(s);
  if (it == d.p_->ids.end()) return;
  d.p_->slots[it->second].slot = nullptr;  // dead: not an output
  d.p_->ids.erase(it);
}

void FusedDriver::flush_locked(SyncReason why, std::string_view op, CapturedGraph* cap) {
  // Numbers recorded after a host read may come from device values: a
  // program per value. Only a graph's own numbers are baked in.
  bake_numbers_ = false;
  if (flushing_ || (!p_ && !graphs_.has_parts())) return;
  graphs_.note_sync(why, op);
  graphs_.settle();
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
      if (cap && !compiled_.describe(*p, outs, *cap)) cap = nullptr;
      flush_spmd(*p, outs, std::move(mesh), sharded, cap);
      clear_pending(*p);
      return;
    }
  } catch (...) {
    drop_results(*p, outs);  // two meshes in one graph, or a failed SPMD compile or run
    throw;
  }
  std::vector<std::pair<int, int>> aliases = donations(*p, outs);
  if (cap && !compiled_.describe(*p, outs, *cap)) cap = nullptr;
  if (cap)
    for (auto [j, k] : aliases) cap->donated.push_back(j);
  try {
    CacheKey key = finish_key(*p, outs);
    auto emit = emitter(*p, outs, aliases);
    if (dumping()) set_program_origin(p->origin);
    ProgramPtr prog = cached(key);
    int64_t out_bytes = 0;
    if (!prog && !graphs_.capturing() && queue_instead(*p, outs, out_bytes)) {
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
      s->pending.release(PendingWrite::kGraph);
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
void FusedDriver::drop_results(Pending& p, const std::vector<int>& outs) {
  for (int i : outs) {
    StorageSlot* s = p.slots[i].slot;
    if (s && s->pending) {
      s->set_buffer(nullptr);
      s->pending.release(PendingWrite::kGraph);
    }
  }
  clear_pending(p);
}

// A graph that reads a sharded storage: one SPMD program over the mesh. A
// sharded storage it overwrites in the same layout (a weight, an optimizer
// state) is updated in place: its shards are donated to the result.
void FusedDriver::flush_spmd(Pending& p, const std::vector<int>& outs, std::vector<int> mesh,
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
  if (cap) shapes = CompiledCapture::result_shapes(*cap);
  spmd_layout(*plan, p.g, sharded, pinned, cap ? &shapes : nullptr);
  plan->aliases = spmd_aliases(pinned);
  for (auto [j, k] : plan->aliases) p.g.alias(j, k);
  // Results leave the graph in their layout's shape, so that the reshape
  // from the flat storage folds into the computation that made them.
  ir::Builder b(p.g);
  for (size_t k = 0; k < vals.size(); ++k) vals[k] = b.reshape(vals[k], plan->results[k].dims);
  p.g.set_outputs(vals);
  spmd_compile(*plan, p.g, finish_key(p, outs), p.ops);
  // The launch's references replace the parameters' records, so that a
  // value held by nothing else can be donated.
  std::vector<runtime::BufferPtr> whole;
  std::vector<const StorageSlot*> owners;
  for (Param& pr : p.params) {
    whole.push_back(pr.sharded ? nullptr : pr.buffer);
    owners.push_back(pr.slot);
    pr.buffer = nullptr;
    pr.sharded = nullptr;
  }
  // A value's other holder: `whole`, or flush_locked's `sharded`.
  auto results = spmd_run(*plan, whole, sharded, p.device, nullptr, &owners, 1);
  for (size_t k = 0; k < outs.size(); ++k) {
    StorageSlot* s = p.slots[outs[k]].slot;
    spmd_store(s, results[k]);
    s->pending.release(PendingWrite::kGraph);
  }
  if (cap) {
    cap->spmd = plan;
    cap->prog = plan->prog;
    cap->donated.clear();
  }
}

// The graph's outputs: the storages it wrote that are still alive.
std::vector<int> FusedDriver::live_outputs(const Pending& p) {
  std::vector<int> outs;
  for (size_t i = 0; i < p.slots.size(); ++i)
    if (p.slots[i].written && p.slots[i].slot) outs.push_back(static_cast<int>(i));
  return outs;
}

// A storage the graph reads and then overwrites donates its old buffer
// to the new value (same type), so a step updates weights in place.
// Pairs of (parameter, output).
std::vector<std::pair<int, int>> FusedDriver::donations(const Pending& p, const std::vector<int>& outs) {
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
ProgramPtr FusedDriver::program_for(Pending& p, const std::vector<int>& outs,
                                    const std::vector<std::pair<int, int>>& aliases, std::string* text) {
  CacheKey key = finish_key(p, outs);
  auto emit = emitter(p, outs, aliases);
  if (text) *text = emit();
  if (dumping()) set_program_origin(p.origin);
  if (ProgramPtr prog = cached(key)) return prog;
  if (text) emit = [text]() { return *text; };
  return compile_now(p, key, emit);
}

CacheKey FusedDriver::finish_key(Pending& p, const std::vector<int>& outs) {
  for (int i : outs) p.key.add(static_cast<uint64_t>(i) | (1ull << 40));
  p.key.add(0xd0a7ed);  // programs with donation; older cache entries had none
  return p.key.finish();
}

std::function<std::string()> FusedDriver::emitter(Pending& p, const std::vector<int>& outs,
                                                  const std::vector<std::pair<int, int>>& aliases) {
  return [&p, &outs, &aliases]() {
    std::vector<ir::Value> vals;
    for (int i : outs) vals.push_back(p.slots[i].value);
    p.g.set_outputs(vals);
    for (auto [j, k] : aliases) p.g.alias(j, k);
    return p.g.to_mlir();
  };
}

ProgramPtr FusedDriver::cached(const CacheKey& key) {
  ProgramPtr prog = ExecutableCache::get().lookup(key);
  if (prog) {
    bump(metrics().cache_hits);
    bump(metrics().fused_cache_hits);
  }
  return prog;
}

ProgramPtr FusedDriver::compile_now(Pending& p, const CacheKey& key, const std::function<std::string()>& emit) {
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
std::vector<runtime::BufferPtr> FusedDriver::split_donations(const Pending& p,
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
bool FusedDriver::queue_instead(const Pending& p, const std::vector<int>& outs, int64_t& out_bytes) {
  if (!compile_ahead_enabled()) return false;
  out_bytes = 0;
  for (int k : outs) out_bytes += static_cast<int64_t>(p.slots[k].slot->nbytes);
  return out_bytes < (int64_t{64} << 20) || static_cast<size_t>(out_bytes) <= device_memory_info(p.device).first / 4;
}

// Queues the flushed graph behind strict eager's compile-ahead queue;
// its written storages stay pending there until it has run.
void FusedDriver::queue_graph(Pending& p, const std::vector<int>& outs, const std::vector<std::pair<int, int>>& aliases,
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

bool FusedDriver::has_queued(const Pending& p) {
  for (const Param& pr : p.params)
    if (pr.queued) return true;
  return false;
}

// The parameters read from the compile-ahead queue: run it, take their values.
void FusedDriver::resolve_queued(Pending& p) {
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
bool FusedDriver::bakes(const OpCall::ScalarSource& src, ir::ElemType elem) const {
  if (ir::is_complex(elem)) return false;
  using K = OpCall::ScalarSource;
  if (graphs_.capturing()) return src.kind == K::kConstant || src.kind == K::kCpuTensor;
  return bake_numbers_ && (src.kind == K::kConstant || (src.kind == K::kCpuTensor && src.wrapped));
}

// A non-storage parameter of a capture: the generator's counters for a
// random op (reserved again on every replay), else the value it had when
// recorded.
void FusedDriver::fixed_or_rng(const Param& pr, CapturedGraph::Arg& a) {
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

// The graph's own pending marks. A storage it only read may still be
// pending in strict eager's queue (a graph queued before this one): that
// mark is the queue's, which must hear when the storage is freed.
void FusedDriver::clear_pending(Pending& p) {
  for (auto& gs : p.slots)
    if (gs.slot && gs.written) gs.slot->pending.release(PendingWrite::kGraph);
}

// Whether `call` only writes whole storages that this graph has not touched.
bool FusedDriver::reads_no_storage(const OpCall& call) const {
  for (size_t i = 0; i < call.num_slots(); ++i)
    if (call.needs_value(i) || (p_ && p_->ids.count(call.slot(i)))) return false;
  return call.num_slots() > 0;
}

Driver& fused_driver() { return FusedDriver::get(); }

void set_optimizer_step(bool on) { FusedDriver::get().set_optimizer_step(on); }
void set_bake_numbers(bool on) { FusedDriver::get().set_bake_numbers(on); }
bool set_compiled_graph_run(bool on) { return FusedDriver::get().set_compiled_graph_run(on); }

}  // namespace torch_tpu::eager
