#include "aten/fallback.h"

#include <ATen/native/CPUFallback.h>
#include <torch/library.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "compile/metrics.h"

namespace torch_tpu {
namespace {

std::atomic<int> g_enabled{-1};  // -1: not yet read from the environment

void tpu_fallback(const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const auto& name = op.schema().operator_name();
  std::string full = name.name + (name.overload_name.empty() ? "" : "." + name.overload_name);
  TORCH_CHECK_NOT_IMPLEMENTED(
      cpu_fallback_enabled(), "The operator '", full,
      "' is not currently implemented for the tpu device. To run it on the CPU instead (slow: it "
      "copies the inputs to the host and back), set TORCH_TPU_CPU_FALLBACK=1 or call "
      "torch_tpu.set_cpu_fallback(True).");
  // The fallback redispatches to CPU, where a kernel may also come from a
  // composite registration; an op with neither (CUDA-only kernels such as
  // _masked_scale) cannot run there, and saying so beats "Could not run".
  using K = c10::DispatchKey;
  TORCH_CHECK_NOT_IMPLEMENTED(op.hasKernelForDispatchKey(K::CPU) ||
                                  op.hasKernelForDispatchKey(K::CompositeExplicitAutograd) ||
                                  op.hasKernelForDispatchKey(K::CompositeExplicitAutogradNonFunctional),
                              "The operator '", full,
                              "' is not implemented for the tpu device, and the CPU fallback cannot run it either: "
                              "PyTorch has no CPU kernel for it (it is specific to another backend).");
  bool first = false;
  {
    auto& m = metrics();
    std::lock_guard<std::mutex> lock(m.mu);
    first = m.fallbacks[full]++ == 0;
  }
  if (first) TORCH_WARN("torch_tpu: '", full, "' is not implemented for tpu; running it on the CPU (fallback).");
  at::native::cpu_fallback(op, stack);
}

}  // namespace

void set_cpu_fallback(bool enabled) { g_enabled = enabled ? 1 : 0; }

bool cpu_fallback_enabled() {
  int v = g_enabled.load();
  if (v < 0) {
    const char* e = std::getenv("TORCH_TPU_CPU_FALLBACK");
    v = (e && *e && std::strcmp(e, "0") != 0) ? 1 : 0;
    g_enabled = v;
  }
  return v == 1;
}

TORCH_LIBRARY_IMPL(_, PrivateUse1, m) { m.fallback(torch::CppFunction::makeFromBoxedFunction<&tpu_fallback>()); }

}  // namespace torch_tpu
