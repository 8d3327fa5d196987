// SPMD execution for the fused driver and its captures (torch_tpu.spmd):
// a graph that reads a sharded storage compiles as one program over the
// mesh, partitioned by XLA, and runs on every device of the mesh at once.
// Sharded inputs pass their shards; other inputs are copied to every device
// (replicated). Results come back sharded as the partitioner laid them out,
// except storages the graph updates in place, which keep their sharding.
#pragma once
#include <c10/core/Scalar.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "aten/storage.h"
#include "compile/executable_cache.h"
#include "ir/graph.h"
#include "ir/spmd.h"

namespace torch_tpu::record {}  // namespace torch_tpu::record

namespace torch_tpu::eager {

// The recorder's names (OpCall, Driver, StorageSlot, ...) as eager's own.
using namespace torch_tpu::record;

struct SpmdPlan {
  struct Arg {
    ShardedPtr sharded;         // the layout read at capture (no shards); null: replicated copies
    std::vector<int64_t> dims;  // what the program's @main takes
    std::string sharding;       // its HLO text
  };
  std::vector<int> devices;               // the mesh: tpu device index of each partition
  std::vector<Arg> args;                  // per program parameter
  std::vector<ir::ElemType> params_elem;  // and its element type
  // Per parameter, the last buffer copied to the mesh and its copies: a
  // graph constant is copied once, not on every replay.
  struct Copies {
    runtime::BufferPtr source;
    std::vector<runtime::BufferPtr> per_device;
  };
  mutable std::vector<Copies> copies;
  std::vector<ir::SpmdValue> results;  // per result: dims and any pinned sharding
  // (parameter, result) pairs the program may update in place: a storage
  // overwritten by a result pinned to its layout. The graph must carry the
  // same pairs (Graph::alias) when compiled.
  std::vector<std::pair<int, int>> aliases;
  ProgramPtr prog;
  std::vector<runtime::Sharding> out_shardings;  // per result, from the compiled module

  // Whether `v` (a storage's sharded value, or null) matches parameter j.
  bool matches(size_t j, const ShardedPtr& v) const;
  std::vector<ir::SpmdValue> params() const;
};

// The mesh of the first sharded parameter, checked against the others
// (all must share it). `sharded[j]` is parameter j's value, or null.
std::vector<int> spmd_mesh(const std::vector<ShardedPtr>& sharded);

// Fills plan.args from the parameters' values and types (scalars and
// unsharded storages are replicated), and plan.results: a result written
// into parameter `pinned_param[k]` (>= 0) keeps that parameter's layout.
// `shapes[k]`, when given and not empty, is the shape of the tensor result
// k holds whole (XLA then lays out that shape, not the flat storage).
void spmd_layout(SpmdPlan& plan, const ir::Graph& g, const std::vector<ShardedPtr>& sharded,
                 const std::vector<int>& pinned_param, const std::vector<std::vector<int64_t>>* shapes = nullptr);

// The program for `g` (outputs set) under `plan`, from the cache or compiled;
// sets plan.prog and plan.out_shardings. `key` is the graph's own key.
void spmd_compile(SpmdPlan& plan, const ir::Graph& g, const CacheKey& key, int64_t ops);

// One launch over the mesh. `whole[j]` is parameter j's buffer where it is
// not sharded, on device `home`, copied to the others; where `numbers[j]`
// is set the parameter is that number instead, made on each device (no
// copy: an optimizer's step counts and hyperparameters, every step).
// `owners[j]`, when given, is the storage parameter j was read from: an
// aliased parameter's value is consumed (donated) when nothing holds it but
// that storage, the caller's `extra` references to it (in `whole` or
// `sharded`, and any of its own) and the launch. Returns per result the
// sharded value it produced.
std::vector<ShardedPtr> spmd_run(const SpmdPlan& plan, const std::vector<runtime::BufferPtr>& whole,
                                 const std::vector<ShardedPtr>& sharded, int home,
                                 const std::vector<std::optional<c10::Scalar>>* numbers = nullptr,
                                 const std::vector<const StorageSlot*>* owners = nullptr, long extra = 0);

// The (parameter, result) pairs of `pinned_param` (per result, the parameter
// whose storage it overwrites in the same layout, or -1): what a program may
// donate.
std::vector<std::pair<int, int>> spmd_aliases(const std::vector<int>& pinned_param);

// Stores a result: the slot holds the value on the mesh, and (replicated)
// also whole on its own device.
void spmd_store(StorageSlot* s, const ShardedPtr& v);

// The optimized module (serialised HloModuleProto, possibly with its
// config) of the SPMD program compiled or loaded last: what the partitioner
// made, for counting its collectives.
std::string last_spmd_program();

}  // namespace torch_tpu::eager
