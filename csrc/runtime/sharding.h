// How an array is laid out over the partitions of an SPMD program: XLA's
// HloSharding, in the tiled form (a grid of tiles, each held by one or more
// partitions). Read from the OpSharding protos of a compiled module, written
// as the `mhlo.sharding` text its StableHLO input carries.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace torch_tpu::runtime {

struct Sharding {
  // Tiles per array dimension; empty: every partition holds the whole array.
  std::vector<int64_t> tiles;
  // Partitions holding each tile (last_tile_dim_replicate); 1: one each.
  int64_t replicas = 1;
  // Partition ids in row-major order over tiles x replicas.
  std::vector<int64_t> devices;

  bool replicated() const { return tiles.empty(); }
  // "{replicated}" or "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}".
  std::string hlo() const;
  // The tile partition `p` holds: its index along each array dimension
  // (all zeros when replicated).
  std::vector<int64_t> tile_of(int64_t partition, size_t rank) const;
  bool operator==(const Sharding& o) const {
    return tiles == o.tiles && replicas == o.replicas && devices == o.devices;
  }

  // From a serialised xla.OpSharding. `num_partitions` expands the iota
  // device lists XLA writes. Shardings that are not plain tiles (manual,
  // maximal) are reported as replicated=false with empty tiles via `ok`.
  static Sharding from_proto(const std::string& bytes, int64_t num_partitions, bool* ok = nullptr);
};

// The result shardings of a partitioned module, from its serialised
// HloModuleProto (spmd_output_sharding), or HloModuleProtoWithConfig when
// `with_config`: one per result. Empty when the module carries none.
std::vector<Sharding> module_output_shardings(const std::string& hlo_module_proto, int64_t num_partitions,
                                              bool with_config = false);

}  // namespace torch_tpu::runtime
