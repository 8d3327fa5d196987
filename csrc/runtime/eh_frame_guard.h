#pragma once
// Keeps libgcc's unwinder away from unwind tables whose code is gone.
//
// XLA:CPU registers the unwind tables (.eh_frame) of the code it JIT-compiles
// with libgcc's __register_frame. On some paths (seen in long test runs, e.g.
// while HF generate() compiled and dropped programs) it unmaps that code
// without deregistering the tables first. The next C++ exception thrown
// anywhere in the process then makes libgcc read the unmapped table and the
// process dies with SIGSEGV inside _Unwind_Find_FDE.
//
// guard_eh_frames() redirects the plugin's own imports of __register_frame,
// __deregister_frame and munmap (its GOT entries) so that an unmap first
// deregisters every table that starts inside the range, and a later
// deregistration of such a table is skipped.
#include <cstdint>

namespace torch_tpu::runtime {

// Patches the library opened as `dl_handle`. Returns how many imports were
// redirected (0 where the library imports none of the three, or on a
// platform without ELF/glibc).
int guard_eh_frames(void* dl_handle);

struct EhFrameGuardStats {
  int64_t redirected = 0;  // GOT entries patched, over every guarded library
  int64_t registered = 0;
  int64_t deregistered = 0;
  int64_t dropped_at_unmap = 0;  // tables deregistered because their memory was unmapped
};
EhFrameGuardStats eh_frame_guard_stats();

// Test only: registers a minimal unwind table on a page of its own and unmaps
// that page, both through the guard's hooks. A C++ exception thrown after it
// crashes if the guard left the table registered (with libgcc 12's unwinder).
void eh_frame_guard_self_test();

}  // namespace torch_tpu::runtime
