// Shardy's form of a tiled layout. XLA's partitioner propagates
// shardings with Shardy, and takes GSPMD's `mhlo.sharding` text only through
// a fallback it warns about. Shardy names each split by mesh axes, so a
// program over n partitions gets a mesh of axes whose sizes are n's prime
// factors (n = 8: three axes of 2), over the partitions in order. A layout
// a user's mesh produced (`{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}`:
// rows split over the second axis of a 2 x 2 mesh) is then a list of those
// axes per dimension (`[{"a1"}, {}]`), found by trying every assignment of
// axes to dimensions, which is few at host mesh sizes.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace torch_tpu::ir {

// A tiled layout over partitions 0..n-1 (runtime::Sharding's fields).
struct TileLayout {
  std::vector<int64_t> tiles;    // per dimension; empty: replicated
  int64_t replicas = 1;          // partitions holding each tile
  std::vector<int64_t> devices;  // partition ids, row-major over tiles x replicas
};

// The orders of n's prime factors to try as mesh axis sizes, major to minor
// (one order when n is a prime power).
std::vector<std::vector<int64_t>> shardy_meshes(int64_t n);

// `sdy.mesh @mesh = <["a0"=2, "a1"=2]>` for axis sizes `axes`.
std::string shardy_mesh_text(const std::vector<int64_t>& axes);

// `#sdy.sharding<@mesh, [{"a0"}, {}]>` for `layout` of an array of `rank`
// dimensions over a mesh with axis sizes `axes`, or nothing when no
// assignment of the axes gives that layout.
std::optional<std::string> shardy_sharding(const std::vector<int64_t>& axes, const TileLayout& layout, size_t rank);

}  // namespace torch_tpu::ir
