// torch.accelerator.Graph on tpu: PyTorch's backend-neutral graph API,
// implemented over the recorder's graph capture (record/capture.h). The
// memory-pool arguments are accepted for compatibility: captured graphs own
// no memory pool, only the storages they name.
#include <ATen/core/GraphImplInterface.h>
#include <c10/core/DeviceType.h>

#include <atomic>
#include <fstream>

#include "eager/capture.h"

namespace torch_tpu {
namespace {

std::atomic<uint64_t> g_next_pool{1};

class TpuGraphImpl final : public at::GraphImplInterface {
 public:
  explicit TpuGraphImpl(const at::GraphImplArgs&) {}

  void capture_begin(at::MempoolId_t pool, at::GraphCaptureMode) override {
    TORCH_CHECK(!graph_ && !capturing_, "this tpu graph was already captured; call reset() before capturing again");
    pool_ = (pool.first || pool.second) ? pool : at::MempoolId_t{g_next_pool++, 0};
    eager::begin_graph_capture(debug_);
    capturing_ = true;
  }
  void capture_end() override {
    TORCH_CHECK(capturing_, "tpu graph capture_end() called without capture_begin()");
    capturing_ = false;
    graph_ = eager::end_graph_capture(debug_);
  }
  void instantiate() override {}  // compiled by capture_end()
  void replay() override {
    TORCH_CHECK(graph_, "tpu graph replay() called before a successful capture");
    eager::replay_graph(*graph_);
  }
  void reset() override {
    if (capturing_) eager::abort_graph_capture();
    capturing_ = false;
    graph_.reset();
  }
  at::MempoolId_t pool() const override { return pool_; }
  void enable_debug_mode() override { debug_ = true; }
  void debug_dump(const std::string& path) override {
    TORCH_CHECK(debug_, "tpu graph debug_dump() needs enable_debug_mode() before the capture");
    TORCH_CHECK(graph_, "tpu graph debug_dump() called before a successful capture");
    std::ofstream f(path);
    TORCH_CHECK(f, "tpu graph debug_dump(): cannot open ", path);
    f << "// tpu graph: " << eager::graph_ops(*graph_) << " recorded ops\n" << eager::graph_text(*graph_);
  }
  ~TpuGraphImpl() override {
    try {
      if (capturing_) eager::abort_graph_capture();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw
    }
  }

 private:
  std::shared_ptr<eager::StaticGraph> graph_;
  at::MempoolId_t pool_{0, 0};
  bool capturing_ = false;
  bool debug_ = false;
};

}  // namespace

// Called once the PrivateUse1 backend is named "tpu": the registry's key is
// the device type's name.
void register_graph_impl() {
  auto key = c10::DeviceTypeName(c10::DeviceType::PrivateUse1, /*lower_case=*/false);
  if (at::GraphImplRegistry()->Has(key)) return;
  at::GraphImplRegistry()->Register(key, [](at::GraphImplArgs args) -> std::unique_ptr<at::GraphImplInterface> {
    return std::make_unique<TpuGraphImpl>(args);
  });
}

}  // namespace torch_tpu
