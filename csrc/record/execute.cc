// Launching programs, and torch.OutOfMemoryError for results the device
// cannot hold.
#include "record/op_call.h"

#include <ATen/record_function.h>

#include <algorithm>
#include <cstdio>

#include "aten/device.h"
#include "runtime/device_spans.h"
#include "runtime/error.h"

#include "record/op_call_internal.h"

namespace torch_tpu::record {

using ir::ElemType;
using ir::Value;

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
}  // namespace

void check_fits_device(int device, std::string_view what, int64_t out_bytes) {
  if (out_bytes < (int64_t{64} << 20)) return;
  const size_t total = device_memory_info(device).second;
  if (total > 0 && static_cast<size_t>(out_bytes) > total)
    raise_oom(device, what, "the device has " + gib(static_cast<int64_t>(total)) + " in all", out_bytes);
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

}  // namespace torch_tpu::record
