// The op recorder. An ATen kernel describes one op call - its inputs (views
// of storage slots), runtime scalars, attributes and output tensors - and
// hands over the lowering. The call's cache key is built from that metadata
// alone. What happens next is the current driver's choice (record/driver.h):
// strict eager compiles or looks up the call's own program and runs it; a
// deferred driver can append the same call to a larger graph instead.
//
// A driver composes the three steps below:
//   assemble()          view reads, the lowering, view writes (IR only);
//   lookup()/compile()  the call's own program from the executable cache;
//   execute_and_swap()  run it and put the results into the output storages.
//
// Contract for kernels: everything the lowering depends on must be in the
// key - inputs, scalars and outputs are added automatically; any other
// value the lambda captures must be passed to attr() first. Under
// TORCH_TPU_CHECK_KEYS=1 every cache hit rebuilds the program and checks it.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/GeneratorImpl.h>
#include <c10/core/Scalar.h>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "compile/cache_key.h"
#include "compile/executable_cache.h"
#include "ir/builder.h"
#include "record/strided.h"

namespace torch_tpu {
struct StorageSlot;
}

namespace torch_tpu::record {

using Lowering = std::function<std::vector<ir::Value>(ir::Builder&, const std::vector<ir::Value>&)>;

class OpCall {
 public:
  explicit OpCall(std::string_view name);
  ~OpCall();  // out of line: StorageSlot is incomplete here

  // --- recording (kernels) ---
  // A tpu tensor (any view), or a 0-dim CPU tensor, which is passed as a
  // runtime scalar. Returns its index in the lowering's argument list.
  int input(const at::Tensor& t);
  // A Python number as a 0-d runtime input of `dtype`: `x + 0.5` and
  // `x + 0.7` share one executable.
  int scalar(const c10::Scalar& s, c10::ScalarType dtype);
  // The generator's (seed, offset) as the next two runtime scalars, after
  // reserving `advance` counters. A replayed capture (eager/capture.h)
  // reserves them again on every replay, as eager would.
  void rng_state(c10::GeneratorImpl* gen, uint64_t seed, uint64_t offset, uint64_t advance);
  // Compile-time attributes (baked into the program, so part of the key).
  OpCall& attr(int64_t v);
  OpCall& attr(double v);
  OpCall& attr(bool v) { return attr(static_cast<int64_t>(v)); }
  OpCall& attr(c10::IntArrayRef v);
  OpCall& attr(std::string_view v);
  template <class E>
    requires std::is_enum_v<E>
  OpCall& attr(E v) {
    return attr(static_cast<int64_t>(v));
  }
  // A tensor the op writes (functional result, in-place self or out=).
  // Lowering result i is converted to output i's dtype and stored into it.
  void output(const at::Tensor& t);
  // From here on, tensor inputs and outputs are keyed and read as 1-D views
  // of their element count. For elementwise calls whose tensors are all
  // contiguous and of one shape: one program then serves every shape of
  // that size. The caller checks that condition.
  OpCall& flat_views() {
    flat_ = true;
    return *this;
  }
  // Finishes the key and hands the call to the current driver.
  void run(const Lowering& lower);

  // --- driver steps ---
  std::string_view name() const { return name_; }
  const CacheKey& key() const { return key_done_; }
  int device() const { return device_; }
  // Appends the call to `b`: `storage[i]` is slot i's current flat value
  // (invalid: a parameter is not needed, and a never-written storage reads
  // as zeros), `scalars` the runtime scalars in order. Returns, for each
  // written slot in slot order, its new flat value.
  std::vector<ir::Value> assemble(ir::Builder& b, std::vector<ir::Value>& storage,
                                  const std::vector<ir::Value>& scalars, const Lowering& lower) const;
  // The call as a program of its own: parameters for the storages it reads and
  // the scalars, outputs for the written slots.
  void build_program(ir::Graph& g, const Lowering& lower) const;
  // The call's own executable: the memory cache alone (null on a miss);
  // after a miss, the persistent tiers, then a compile, here and now; or the
  // program as StableHLO, for a driver that compiles elsewhere.
  ProgramPtr lookup(const Lowering& lower) const;
  ProgramPtr compile(const Lowering& lower) const;
  std::string program_text(const Lowering& lower) const;
  // A call whose program would only broadcast constants or scalars into
  // the whole storages it writes (zeros_like, zero_, fill_, full): fills
  // them on the host and transfers them, with no program. False (nothing
  // done) for any other call. For a miss: never compiled, never cached.
  bool try_host_fill(const Lowering& lower) const;
  // Whether a single-op miss may compile quick first (executable_cache.h).
  static bool tiered_allowed();
  // Bytes of the storages the call writes (for out-of-memory messages).
  int64_t output_bytes() const;
  // Runs `prog` on the call's arguments and swaps the results into the
  // written storages (asynchronously unless TORCH_TPU_LAUNCH_BLOCKING).
  void execute_and_swap(const CompiledProgram& prog) const;

  // --- for deferred drivers: the storages the call touches, in slot order ---
  size_t num_slots() const { return slots_.size(); }
  StorageSlot* slot(size_t i) const { return slots_[i].slot; }
  // Whether the call needs slot i's value from before it (read, or written in part).
  bool needs_value(size_t i) const { return needs_param(slots_[i]); }
  bool writes(size_t i) const { return slots_[i].written; }
  // The element type and count slot i holds once the call has run.
  std::pair<ir::ElemType, int64_t> result_elem(size_t i) const { return written_elem(i); }
  // The runtime scalars' device buffers, in argument order.
  std::vector<runtime::BufferPtr> scalar_buffers() const;
  std::vector<ir::ElemType> scalar_elems() const;
  // Where each runtime scalar comes from, for replaying a captured graph.
  struct ScalarSource {
    enum Kind { kConstant, kCpuTensor, kRngSeed, kRngOffset } kind = kConstant;
    const at::TensorImpl* cpu = nullptr;         // kCpuTensor
    c10::intrusive_ptr<c10::GeneratorImpl> gen;  // kRng*
    uint64_t advance = 0;                        // kRng*: counters reserved per call
    bool wrapped = false;                        // kCpuTensor: a wrapped Python number, as constant as kConstant
  };
  std::vector<ScalarSource> scalar_sources() const;
  // Runtime scalar k alone: its device buffer, or its value's bits (not
  // for complex), for a driver that bakes it into the program instead.
  runtime::BufferPtr scalar_buffer_at(size_t k) const;
  uint64_t scalar_bits_at(size_t k) const;
  // Waits for a produced buffer under TORCH_TPU_LAUNCH_BLOCKING, else
  // remembers it for synchronize().
  static void track_result(const runtime::BufferPtr& b, std::string_view what);

 private:
  struct Arg {
    enum Kind { kView, kScalarTensor, kScalar } kind;
    int slot = -1;      // index into slots_ for kView
    ViewMeta view;      // kView
    at::Tensor cpu;     // kScalarTensor
    c10::Scalar value;  // kScalar
    ir::ElemType elem;
    // kView read through a window (record/window.h): the storage and view
    // it stands for, should the call turn out to write that storage.
    StorageSlot* windowed = nullptr;
    ViewMeta whole_view;
    // kView read at a runtime offset and strides (record/window.h): the
    // rank + 1 hidden scalars after it hold them.
    bool at_runtime = false;
    // kScalar that only feeds a runtime view read, not the lowering.
    bool hidden = false;
    int rng_part = -1;  // kScalar from rng_state(): 0 seed, 1 offset
    c10::intrusive_ptr<c10::GeneratorImpl> gen;
    uint64_t rng_advance = 0;
  };
  struct SlotUse {
    StorageSlot* slot;
    bool read = false;  // needed as a program parameter
    bool written = false;
    bool full_write = false;
  };
  int slot_index(StorageSlot* s);
  const Arg& scalar_arg(size_t k) const;
  c10::Scalar scalar_value(const Arg& a) const { return a.kind == Arg::kScalar ? a.value : a.cpu.item(); }
  void key_view(const ViewMeta& v, int slot);
  void unwindow(StorageSlot* target);
  void add_view_position(const ViewMeta& v);
  bool needs_param(const SlotUse& u) const;
  // The element type and count a written slot holds afterwards.
  std::pair<ir::ElemType, int64_t> written_elem(size_t si) const;

  std::string_view name_;
  KeyBuilder key_;
  CacheKey key_done_{};
  std::vector<Arg> args_;
  std::vector<SlotUse> slots_;
  std::vector<std::pair<int, ViewMeta>> outs_;  // (slot index, view)
  std::vector<std::unique_ptr<StorageSlot>> windows_;
  int device_ = -1;
  int visible_ = 0;  // arguments the lowering sees
  bool flat_ = false;
};

ViewMeta view_of(const at::Tensor& t);
// Bytes from a tpu tensor to host memory (contiguous, the tensor's dtype).
void copy_to_host(const at::Tensor& src, void* dst, size_t nbytes);
// Makes `dst` (a tpu tensor) hold the values of the contiguous host array.
void copy_from_host(const at::Tensor& dst, const void* src, size_t nbytes);
// A 0-d device buffer holding `s` as `elem` (small values are cached).
runtime::BufferPtr scalar_buffer(const c10::Scalar& s, ir::ElemType elem, int device);
// Whether TORCH_TPU_CHECK_KEYS is set: every cache hit rebuilds its program.
bool check_keys();
// Whether TORCH_TPU_LAUNCH_BLOCKING is set.
bool launch_blocking();
// EagerMode.DEFER_NEVER_AND_LAUNCH_BLOCKING switches it at run time.
void set_launch_blocking(bool on);
// Waits for all work enqueued so far.
void synchronize();
// The buffers of all work enqueued so far and not yet synchronized (a
// deferred graph is run first, `why` naming the reason).
std::vector<runtime::BufferPtr> enqueued_work(std::string_view why);
// Completion events of enqueued work whose results were all destroyed
// before it finished (not yet synchronized, still running).
std::vector<std::shared_ptr<runtime::Event>> unfinished_orphans();
// How many enqueued results are not ready yet, for tests and reports.
int64_t work_in_flight();

// Runs `exe` on tpu:`device` (see runtime::Executable::execute). A device
// out of memory raises torch.OutOfMemoryError, as CUDA does; `what` names
// the op or graph in the message.
// `out_bytes` (when known) is what the results need, for the message.
std::vector<runtime::BufferPtr> execute_on(const runtime::Executable& exe, const std::vector<PJRT_Buffer*>& args,
                                           int device, std::string_view what, const std::vector<int64_t>& keep = {},
                                           int64_t out_bytes = -1);

}  // namespace torch_tpu::record
