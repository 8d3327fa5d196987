// Capture and replay, for torch.compile's graphs. The first run of a graph
// is recorded by the fused driver and flushed as one program; the capture
// keeps that program and where each of its arguments and results belongs
// (an input's storage, a runtime constant, the generator, a new output).
// A later run with inputs of the same metadata executes the program
// directly, without dispatching the graph's ops again: guards, then one
// execute.
#pragma once
#include <ATen/core/Tensor.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace torch_tpu::record {}  // namespace torch_tpu::record

namespace torch_tpu::eager {

// The recorder's names (OpCall, Driver, StorageSlot, ...) as eager's own.
using namespace torch_tpu::record;

struct CapturedGraph;
// What Python holds (CapturedGraph's layout stays private to the driver).
struct CaptureHandle {
  std::shared_ptr<CapturedGraph> graph;
};

// Flushes anything pending, then records with the fused driver until end_capture.
void begin_capture();
// Runs the recorded graph as one program. Returns a replayable capture, or
// null with the reason in `why_not` (the graph read or wrote a tensor that
// is not among `inputs`/`outputs`, or something flushed mid-way). A CPU
// scalar tensor read by a kernel that is not among `inputs` is taken as a
// constant: the caller must only capture graphs where no CPU value other
// than the inputs can reach a kernel (torch_tpu/_compile.py checks this).
std::shared_ptr<CapturedGraph> end_capture(const std::vector<at::Tensor>& inputs,
                                           const std::vector<at::Tensor>& outputs, std::string& why_not);
// Executes a capture on new inputs and returns its new output tensors (in-
// place results go into the inputs' storages). nullopt when an input's
// dtype, device, sizes, strides, offset, storage or aliasing differ from
// the capture's: the caller then runs the graph's ops instead.
std::optional<std::vector<at::Tensor>> replay(CapturedGraph& c, const std::vector<at::Tensor>& inputs);

// --- Graph capture (torch.accelerator.Graph, torch.tpu.graph) ---
// Everything recorded between begin and end, on any thread, becomes one
// program bound to the storages it touched. Capturing runs nothing; each
// replay runs the program on those storages' current values and writes the
// results back into them, dispatching no op. A host read or transfer during
// the capture makes end_graph_capture() raise (the work runs eagerly).
struct StaticGraph;
// `keep_text`: keep the programs' StableHLO (graph_text) for debug_dump().
void begin_graph_capture(bool keep_text);
std::shared_ptr<StaticGraph> end_graph_capture(bool keep_text);
void abort_graph_capture();  // after an exception inside the captured region
bool graph_capturing();
// Ends one program of the region and starts the next (before an optimizer
// step); a replay runs them in order. No-op outside a capture.
void cut_graph_capture();
void replay_graph(StaticGraph& g);
std::string graph_text(const StaticGraph& g);  // StableHLO, when kept
int64_t graph_ops(const StaticGraph& g);

}  // namespace torch_tpu::eager
