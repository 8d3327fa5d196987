// Cross-replica collectives as StableHLO: a program compiled with
// num_replicas = R runs once per device, and these ops exchange values
// between those runs. Groups name replica ids (not device ids; the compile
// options' device assignment maps one to the other). Shapes and groups are
// checked here (std::invalid_argument), since XLA aborts on bad ones.
#pragma once
#include <utility>
#include <vector>

#include "ir/builder.h"

namespace torch_tpu::ir {

// Replica groups: every inner list is one group, all of the same size, and
// no replica is in two groups.
using ReplicaGroups = std::vector<Dims>;

// stablehlo.all_reduce: every replica gets the combination of its group's values.
Value all_reduce(Builder& b, Value x, BinaryOp combiner, const ReplicaGroups& groups);
// stablehlo.all_gather: the group's values concatenated along `dim`, in group order.
Value all_gather(Builder& b, Value x, int64_t dim, const ReplicaGroups& groups);
// stablehlo.reduce_scatter: combine, then replica k of the group keeps the
// k-th of the group-size equal pieces along `dim`.
Value reduce_scatter(Builder& b, Value x, int64_t dim, BinaryOp combiner, const ReplicaGroups& groups);
// stablehlo.all_to_all: split along `split_dim` into group-size pieces, send
// piece k to the group's k-th replica, concatenate what arrives along `concat_dim`.
Value all_to_all(Builder& b, Value x, int64_t split_dim, int64_t concat_dim, const ReplicaGroups& groups);
// stablehlo.collective_permute: replica `first` sends to `second`; a replica
// that receives nothing gets zeros.
Value collective_permute(Builder& b, Value x, const std::vector<std::pair<int64_t, int64_t>>& pairs);
// This run's replica id (a u32 scalar).
Value replica_id(Builder& b);
// Every replica of each group gets the value of the group's replica at
// position `root`, bit for bit (-0.0 and NaN payloads included): the others
// contribute zeros to an integer sum of the bits. Not for complex types.
Value broadcast_from(Builder& b, Value x, int64_t root, const ReplicaGroups& groups);

// "dense<[[0, 1]]> : tensor<1x2xi64>"
std::string render_groups(const ReplicaGroups& groups);

}  // namespace torch_tpu::ir
