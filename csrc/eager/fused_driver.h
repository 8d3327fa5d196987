// The fused driver: a core that records calls into one pending graph and
// flushes it as one program, and three users of it, each with its own state:
//   FusedDriver      (fused_driver.cc)      the core, and fused eager (the driver active);
//   CompiledCapture  (compiled_capture.cc)  capture and replay of torch.compile(backend="tpu") graphs;
//   GraphCapture     (static_graph.cc)      torch.tpu.graph (torch.accelerator.Graph) capture and replay.
// They share the pending graph and so one Driver and one lock; this header
// is private to csrc/eager.
#pragma once

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
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/device.h"
#include "aten/generator.h"
#include "aten/storage.h"
#include "compile/dump.h"
#include "compile/executable_cache.h"
#include "compile/metrics.h"
#include "eager/capture.h"
#include "eager/drivers.h"
#include "eager/spmd.h"
#include "record/driver.h"

namespace torch_tpu::eager {

// The recorder's names (OpCall, Driver, StorageSlot, ...) as eager's own.
using namespace torch_tpu::record;

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

// TORCH_TPU_FUSE_MAX_OPS: the op count at which a fused graph flushes.
int64_t max_ops_from_env();

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
                               int device, uint64_t& offset);

// Runs a replayed program; `keep` lists the donatable arguments whose buffer
// another holder still needs (XLA copies those instead of consuming them).
std::vector<runtime::BufferPtr> execute_replay(const CompiledProgram& prog, const std::vector<PJRT_Buffer*>& argv,
                                               int device, std::string_view what, size_t donatable,
                                               const std::vector<int64_t>& keep);

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

// --- the shared core's data: the pending graph ---

struct FusedParam {  // one per graph parameter, in order
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
// The calls recorded since the last flush, as one graph.
struct PendingGraph {
  explicit PendingGraph(int dev) : device(dev) {}
  int device;
  ir::Graph g;
  std::vector<FusedParam> params;
  std::unordered_map<StorageSlot*, int> ids;
  std::vector<GraphSlot> slots;
  KeyBuilder key;
  int64_t ops = 0;
  std::string origin;  // the recorded ops and their Python lines, while dumping
};

class FusedDriver;

// --- torch.compile graphs (compiled_capture.cc) ---
//
// Between begin() and end() the core records a dynamo graph's ops; the
// flush at end() asks describe() to turn the pending graph into a
// CapturedGraph (its arguments and results named by the graph's inputs and
// outputs). replay() runs a capture on new inputs without dispatching.
// Every method runs under the core's lock.
class CompiledCapture {
 public:
  explicit CompiledCapture(FusedDriver& core) : core_(core) {}
  void begin();
  std::shared_ptr<CapturedGraph> end(const std::vector<at::Tensor>& in, const std::vector<at::Tensor>& out,
                                     std::string& why_not);
  std::optional<std::vector<at::Tensor>> replay(CapturedGraph& c, const std::vector<at::Tensor>& in);

  // What the core asks and tells.
  bool active() const { return active_; }
  void note_host_read() {
    if (active_) read_host_ = true;
  }
  bool describe(PendingGraph& p, const std::vector<int>& outs, CapturedGraph& c);
  static std::vector<std::vector<int64_t>> result_shapes(const CapturedGraph& c);

 private:
  std::optional<std::vector<at::Tensor>> replay_spmd(CapturedGraph& c, const std::vector<at::Tensor>& in,
                                                     const std::vector<StorageSlot*>& slots);
  static std::vector<at::Tensor> make_outputs(const CapturedGraph& c, const std::vector<at::Tensor>& in,
                                              std::vector<c10::Storage>& fresh);

  FusedDriver& core_;
  bool active_ = false;     // between begin() and end()
  bool read_host_ = false;  // a host read happened in that window
  int64_t start_ = -1;      // the core's flush count at begin()
  const std::vector<at::Tensor>* in_ = nullptr;
  const std::vector<at::Tensor>* out_ = nullptr;
  std::string* why_ = nullptr;
};

// --- torch.tpu.graph (static_graph.cc) ---
//
// A capture turns the core's pending graph into StaticGraphs bound to the
// storages they touched, instead of running it, and owns what that needs:
// the parts closed so far, the slots they wrote (pending until the capture
// ends), and the slots captured graphs name (adopted when freed). Every
// method runs under the core's lock.
class GraphCapture {
 public:
  explicit GraphCapture(FusedDriver& core) : core_(core) {}
  void begin(bool keep_text);
  void cut();
  std::shared_ptr<StaticGraph> end(bool keep_text);
  void abort();
  void replay(StaticGraph& g);
  bool capturing() const { return capturing_; }

  // What the core asks and tells.
  bool wrote(StorageSlot* s) const { return seg_written_.count(s) > 0; }  // an earlier part wrote s
  bool has_parts() const { return !segments_.empty(); }
  bool names_slots() const { return !users_.empty(); }  // captured graphs must hear of freed slots
  void note_sync(SyncReason why, std::string_view op);  // the first one breaks the capture
  void settle();                                        // the capture broke: run the closed parts now
  void on_free(StorageSlot* s);
  void release(StaticGraph* g);

 private:
  void replay_one(StaticGraph& g);
  StorageSlot* adopt(StorageSlot* s);
  std::shared_ptr<StaticGraph> close_segment(std::unique_ptr<PendingGraph> p);
  void restore_captured_slots();

  FusedDriver& core_;
  std::atomic<bool> capturing_{false};
  std::string break_;                                   // the first flush during the capture
  bool keep_text_ = false;                              // the capture keeps its StableHLO
  std::vector<std::shared_ptr<StaticGraph>> segments_;  // closed parts of the capture underway
  // Slots those parts wrote (pending until the capture ends) and their
  // pre-capture type; slots freed meanwhile, to the parts' own copies.
  std::unordered_map<StorageSlot*, std::pair<ir::ElemType, int64_t>> seg_written_;
  std::unordered_map<StorageSlot*, StorageSlot*> adopted_now_;
  std::unordered_map<StorageSlot*, std::vector<StaticGraph*>> users_;  // slots named by captured graphs
};

// --- the core and fused eager (fused_driver.cc) ---
//
// Records calls into the pending graph and flushes it: one program, from
// the cache or compiled (now, or queued behind compile-ahead), run with
// donation. Fused eager is this driver active; the two captures above use
// the same recording and flush, and each owns its own state.
class FusedDriver final : public Driver {
 public:
  static FusedDriver& get();
  const char* name() const override { return "fused"; }
  // Fused eager passes numbers as parameters; a capture (torch.compile,
  // torch.tpu.graph) keeps the shapes it saw.
  bool runtime_lengths() const override {
    return !graphs_.capturing() && !compiled_.active() && !graph_run_ && !bake_numbers_;
  }

  void activate() override;
  void dispatch(OpCall& call, const Lowering& lower) override;
  void sync_point(SyncReason why, std::string_view op) override;
  void deactivate() override;
  void set_bake_numbers(bool on);
  bool set_compiled_graph_run(bool on);  // returns the previous value
  void set_optimizer_step(bool on);

  CompiledCapture& compiled() { return compiled_; }
  GraphCapture& graphs() { return graphs_; }

 private:
  friend class CompiledCapture;
  friend class GraphCapture;
  using Param = FusedParam;
  using Pending = PendingGraph;

  void flush_locked(SyncReason why, std::string_view op, CapturedGraph* cap = nullptr);
  static void drop_results(Pending& p, const std::vector<int>& outs);
  void flush_spmd(Pending& p, const std::vector<int>& outs, std::vector<int> mesh,
                  const std::vector<ShardedPtr>& sharded, CapturedGraph* cap);
  static std::vector<int> live_outputs(const Pending& p);
  static std::vector<std::pair<int, int>> donations(const Pending& p, const std::vector<int>& outs);
  ProgramPtr program_for(Pending& p, const std::vector<int>& outs, const std::vector<std::pair<int, int>>& aliases,
                         std::string* text);
  static CacheKey finish_key(Pending& p, const std::vector<int>& outs);
  static std::function<std::string()> emitter(Pending& p, const std::vector<int>& outs,
                                              const std::vector<std::pair<int, int>>& aliases);
  static ProgramPtr cached(const CacheKey& key);
  ProgramPtr compile_now(Pending& p, const CacheKey& key, const std::function<std::string()>& emit);
  static std::vector<runtime::BufferPtr> split_donations(const Pending& p,
                                                         const std::vector<std::pair<int, int>>& aliases,
                                                         std::vector<int64_t>& keep);
  static bool queue_instead(const Pending& p, const std::vector<int>& outs, int64_t& out_bytes);
  void queue_graph(Pending& p, const std::vector<int>& outs, const std::vector<std::pair<int, int>>& aliases,
                   const CacheKey& key, const std::function<std::string()>& emit, int64_t out_bytes,
                   CapturedGraph* cap);
  static bool has_queued(const Pending& p);
  static void resolve_queued(Pending& p);
  bool bakes(const OpCall::ScalarSource& src, ir::ElemType elem) const;
  static void fixed_or_rng(const Param& pr, CapturedGraph::Arg& a);
  static void clear_pending(Pending& p);
  bool reads_no_storage(const OpCall& call) const;
  // The slot hooks, installed while fused eager is active or a captured
  // graph names a slot.
  void install_hooks();
  void remove_hooks_if_idle();
  static void on_free(StorageSlot* s);
  static void on_materialize(StorageSlot*) { get().sync_point(SyncReason::kSlotAccess, "storage access"); }

  std::recursive_mutex mu_;
  std::unique_ptr<Pending> p_;
  bool active_ = false;
  bool optimizer_step_ = false;  // recording an optimizer.step() (set_optimizer_step)
  bool flushing_ = false;
  int64_t flush_count_ = 0;
  bool graph_run_ = false;                                     // set_compiled_graph_run: a torch.compile graph's ops
  bool bake_numbers_ = false;                                  // set_bake_numbers; cleared by any flush
  static constexpr uint64_t kBakedNumber = 0x5ca1a4f01dedULL;  // key tag before a baked-in number
  const int64_t max_ops_ = max_ops_from_env();
  CompiledCapture compiled_{*this};
  GraphCapture graphs_{*this};
};

}  // namespace torch_tpu::eager
