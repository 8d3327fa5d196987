// Unimplemented ops: NotImplementedError by default; with the opt-in
// (TORCH_TPU_CPU_FALLBACK=1 or torch_tpu.set_cpu_fallback(True)) they run on
// the CPU, each counted and logged once.
#pragma once

namespace torch_tpu {
void set_cpu_fallback(bool enabled);
bool cpu_fallback_enabled();
}  // namespace torch_tpu
