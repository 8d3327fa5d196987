// Strict eager, the default driver: every recorded call runs at once as its
// own program (asynchronously: the Python thread waits only when a value is
// needed). Nothing is ever pending, so a sync point needs no work.
#include "record/driver.h"

namespace torch_tpu::record {
namespace {

class StrictDriver final : public Driver {
 public:
  const char* name() const override { return "strict"; }
  void dispatch(OpCall& call, const Lowering& lower) override {
    ProgramPtr prog = call.lookup_or_compile(lower);
    call.execute_and_swap(*prog);
  }
  void sync_point(SyncReason, std::string_view) override {}
};

}  // namespace

Driver& strict_driver() {
  static StrictDriver d;
  return d;
}

}  // namespace torch_tpu::record
