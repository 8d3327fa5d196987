// The threads a PJRT plugin starts for itself, and their scheduling priority.
#pragma once
#include <vector>

namespace torch_tpu::runtime {

// The calling process's thread ids (Linux: /proc/self/task; empty elsewhere).
std::vector<int> thread_ids();

// Threads in `after` but not in `before` (both sorted, as thread_ids() returns them).
std::vector<int> new_threads(const std::vector<int>& before, const std::vector<int>& after);

// Runs each thread `delta` nice levels below the calling thread (clamped to
// 19). Returns how many threads were changed; a thread that has exited is
// skipped.
int lower_priority(const std::vector<int>& tids, int delta);

// The niceness of thread `tid`, or 0 when it cannot be read.
int thread_nice(int tid);

// The threads the PJRT client started when it was created (set once, by
// whoever creates it).
void set_plugin_threads(std::vector<int> tids);
std::vector<int> plugin_threads();

}  // namespace torch_tpu::runtime
