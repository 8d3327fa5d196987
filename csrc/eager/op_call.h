// The strict-eager driver. An ATen kernel describes one op call - its
// inputs, runtime scalars, attributes and output tensors - and hands over a
// lowering. OpCall builds the cache key from that metadata alone; only on a
// miss does it build the IR (view reads, the lowering, view writes), emit
// StableHLO and compile. Then it executes asynchronously and swaps the
// result buffers into the output storages.
//
// Contract for kernels: everything the lowering depends on must be in the
// key - inputs, scalars and outputs are added automatically; any other
// value the lambda captures must be passed to attr() first.
#pragma once
#include <ATen/core/Tensor.h>
#include <c10/core/Scalar.h>

#include <functional>
#include <string_view>
#include <vector>

#include "compile/cache_key.h"
#include "eager/strided.h"
#include "ir/builder.h"

namespace torch_tpu {
struct StorageSlot;
}

namespace torch_tpu::eager {

using Lowering = std::function<std::vector<ir::Value>(ir::Builder&, const std::vector<ir::Value>&)>;

class OpCall {
 public:
  explicit OpCall(std::string_view name);

  // A tpu tensor (any view), or a 0-dim CPU tensor, which is passed as a
  // runtime scalar. Returns its index in the lowering's argument list.
  int input(const at::Tensor& t);
  // A Python number as a 0-d runtime input of `dtype`: `x + 0.5` and
  // `x + 0.7` share one executable.
  int scalar(const c10::Scalar& s, c10::ScalarType dtype);
  // Compile-time attributes (baked into the program, so part of the key).
  OpCall& attr(int64_t v);
  OpCall& attr(double v);
  OpCall& attr(bool v) { return attr(static_cast<int64_t>(v)); }
  OpCall& attr(c10::IntArrayRef v);
  OpCall& attr(std::string_view v);
  // A tensor the op writes (functional result, in-place self or out=).
  // Lowering result i is converted to output i's dtype and stored into it.
  void output(const at::Tensor& t);

  void run(const Lowering& lower);

 private:
  struct Arg {
    enum Kind { kView, kScalarTensor, kScalar } kind;
    int slot = -1;      // index into slots_ for kView
    ViewMeta view;      // kView
    at::Tensor cpu;     // kScalarTensor
    c10::Scalar value;  // kScalar
    ir::ElemType elem;
  };
  struct SlotUse {
    StorageSlot* slot;
    bool read = false;  // needed as a program parameter
    bool written = false;
    bool full_write = false;
  };
  int slot_index(StorageSlot* s);
  void key_view(const ViewMeta& v, int slot);

  std::string_view name_;
  KeyBuilder key_;
  std::vector<Arg> args_;
  std::vector<SlotUse> slots_;
  std::vector<std::pair<int, ViewMeta>> outs_;  // (slot index, view)
  int device_ = -1;
};

ViewMeta view_of(const at::Tensor& t);
// Bytes from a tpu tensor to host memory (contiguous, the tensor's dtype).
void copy_to_host(const at::Tensor& src, void* dst, size_t nbytes);
// Makes `dst` (a tpu tensor) hold the values of the contiguous host array.
void copy_from_host(const at::Tensor& dst, const void* src, size_t nbytes);
// Whether TORCH_TPU_LAUNCH_BLOCKING is set.
bool launch_blocking();
// Waits for all work enqueued so far.
void synchronize();

}  // namespace torch_tpu::eager
