// The unwind-table guard (eh_frame_guard.h): after a table is registered and
// its memory unmapped through the guard's hooks, C++ exceptions still unwind.
#include "runtime/eh_frame_guard.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace torch_tpu::runtime {
namespace {

TEST(EhFrameGuard, UnmappedTableIsDroppedBeforeTheNextThrow) {
  const auto before = eh_frame_guard_stats();
  eh_frame_guard_self_test();
  const auto after = eh_frame_guard_stats();
  EXPECT_EQ(after.registered - before.registered, 1);
  EXPECT_EQ(after.dropped_at_unmap - before.dropped_at_unmap, 1);
  // libgcc 12 reads every registered table it has not classified yet on
  // the next throw: had the table stayed registered, this would SIGSEGV.
  bool caught = false;
  try {
    throw std::runtime_error("unwinds");
  } catch (const std::runtime_error&) {
    caught = true;
  }
  EXPECT_TRUE(caught);
}

}  // namespace
}  // namespace torch_tpu::runtime
