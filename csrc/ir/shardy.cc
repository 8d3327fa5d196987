#include "ir/shardy.h"

#include <algorithm>
#include <functional>

namespace torch_tpu::ir {
namespace {

std::string axis_name(size_t a) { return "a" + std::to_string(a); }

// Per partition, the index of the tile it holds along each dimension; empty
// when the layout does not cover partitions 0..n-1 once each.
std::vector<std::vector<int64_t>> tile_index(const TileLayout& l, size_t rank, int64_t n) {
  std::vector<std::vector<int64_t>> out(static_cast<size_t>(n));
  if (l.tiles.empty()) {
    for (auto& v : out) v.assign(rank, 0);
    return out;
  }
  if (l.tiles.size() != rank || l.replicas < 1 || static_cast<int64_t>(l.devices.size()) != n) return {};
  for (size_t i = 0; i < l.devices.size(); ++i) {
    const int64_t p = l.devices[i];
    if (p < 0 || p >= n || !out[p].empty()) return {};
    std::vector<int64_t> idx(rank, 0);
    int64_t t = static_cast<int64_t>(i) / l.replicas;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = t % l.tiles[d];
      t /= l.tiles[d];
    }
    out[p] = std::move(idx);
  }
  return out;
}

// Whether splitting dimension d over `per_dim[d]` (major to minor) gives
// each partition (row-major mesh coordinates) the tile `want` says.
bool gives(const std::vector<int64_t>& axes, const std::vector<std::vector<size_t>>& per_dim,
           const std::vector<std::vector<int64_t>>& want) {
  std::vector<int64_t> coord(axes.size(), 0);
  for (size_t p = 0; p < want.size(); ++p) {
    int64_t rest = static_cast<int64_t>(p);
    for (size_t a = axes.size(); a-- > 0;) {
      coord[a] = rest % axes[a];
      rest /= axes[a];
    }
    for (size_t d = 0; d < per_dim.size(); ++d) {
      int64_t idx = 0;
      for (size_t a : per_dim[d]) idx = idx * axes[a] + coord[a];
      if (idx != want[p][d]) return false;
    }
  }
  return true;
}

std::string sharding_text(const std::vector<std::vector<size_t>>& per_dim) {
  std::string s = "#sdy.sharding<@mesh, [";
  for (size_t d = 0; d < per_dim.size(); ++d) {
    s += d ? ", {" : "{";
    for (size_t i = 0; i < per_dim[d].size(); ++i) s += (i ? ", \"" : "\"") + axis_name(per_dim[d][i]) + "\"";
    s += "}";
  }
  return s + "]>";
}

}  // namespace

std::vector<std::vector<int64_t>> shardy_meshes(int64_t n) {
  std::vector<int64_t> f;
  for (int64_t q = 2; q * q <= n; ++q)
    for (; n % q == 0; n /= q) f.push_back(q);
  if (n > 1) f.push_back(n);
  std::vector<std::vector<int64_t>> out;
  std::sort(f.begin(), f.end());
  do {
    out.push_back(f);
  } while (std::next_permutation(f.begin(), f.end()));
  return out;
}

std::string shardy_mesh_text(const std::vector<int64_t>& axes) {
  std::string s = "sdy.mesh @mesh = <[";
  for (size_t a = 0; a < axes.size(); ++a) s += (a ? ", \"" : "\"") + axis_name(a) + "\"=" + std::to_string(axes[a]);
  return s + "]>";
}

std::optional<std::string> shardy_sharding(const std::vector<int64_t>& axes, const TileLayout& layout, size_t rank) {
  int64_t n = 1;
  for (int64_t a : axes) n *= a;
  const auto want = tile_index(layout, rank, n);
  if (want.empty()) return std::nullopt;
  if (layout.tiles.empty()) return sharding_text(std::vector<std::vector<size_t>>(rank));
  // Each axis goes to a dimension or to the replicas (target `rank`); the
  // sizes must multiply to the tile counts, then every order of each
  // dimension's axes is tried.
  std::vector<size_t> target(axes.size(), 0);
  std::vector<std::vector<size_t>> per_dim(rank);
  std::function<bool(size_t)> order = [&](size_t d) {
    if (d == rank) return gives(axes, per_dim, want);
    std::sort(per_dim[d].begin(), per_dim[d].end());
    do {
      if (order(d + 1)) return true;
    } while (std::next_permutation(per_dim[d].begin(), per_dim[d].end()));
    return false;
  };
  std::function<bool(size_t)> assign = [&](size_t a) {
    if (a == axes.size()) {
      for (auto& v : per_dim) v.clear();
      std::vector<int64_t> size(rank + 1, 1);
      for (size_t i = 0; i < axes.size(); ++i) {
        size[target[i]] *= axes[i];
        if (target[i] < rank) per_dim[target[i]].push_back(i);
      }
      for (size_t d = 0; d < rank; ++d)
        if (size[d] != layout.tiles[d]) return false;
      return size[rank] == layout.replicas && order(0);
    }
    for (size_t t = 0; t <= rank; ++t) {
      target[a] = t;
      if (assign(a + 1)) return true;
    }
    return false;
  };
  if (!assign(0)) return std::nullopt;
  return sharding_text(per_dim);
}

}  // namespace torch_tpu::ir
