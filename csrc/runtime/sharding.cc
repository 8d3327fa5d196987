#include "runtime/sharding.h"

#include <numeric>
#include <stdexcept>
#include <string_view>

namespace torch_tpu::runtime {
namespace {

// A minimal protobuf wire-format reader: the runtime has no libprotobuf.
struct Reader {
  std::string_view in;
  size_t pos = 0;
  bool done() const { return pos >= in.size(); }
  uint64_t varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= in.size()) throw std::runtime_error("truncated protobuf");
      auto b = static_cast<uint8_t>(in[pos++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (b < 0x80) return v;
    }
    throw std::runtime_error("bad protobuf varint");
  }
  // Next field: number and wire type; `bytes` is set for length-delimited ones.
  bool next(int& field, int& wire, uint64_t& value, std::string_view& bytes) {
    if (done()) return false;
    uint64_t tag = varint();
    field = static_cast<int>(tag >> 3);
    wire = static_cast<int>(tag & 7);
    switch (wire) {
      case 0:
        value = varint();
        break;
      case 1:
        pos += 8;
        break;
      case 5:
        pos += 4;
        break;
      case 2: {
        uint64_t n = varint();
        if (pos + n > in.size()) throw std::runtime_error("truncated protobuf");
        bytes = in.substr(pos, n);
        pos += n;
        break;
      }
      default:
        throw std::runtime_error("unsupported protobuf wire type");
    }
    return true;
  }
};

// A repeated int64 field: packed (wire 2) or one value per tag.
void append_ints(std::vector<int64_t>& out, int wire, uint64_t value, std::string_view bytes) {
  if (wire == 0) {
    out.push_back(static_cast<int64_t>(value));
    return;
  }
  Reader r{bytes};
  while (!r.done()) out.push_back(static_cast<int64_t>(r.varint()));
}

}  // namespace

std::string Sharding::hlo() const {
  if (replicated()) return "{replicated}";
  std::string s = "{devices=[";
  for (size_t i = 0; i < tiles.size(); ++i) s += (i ? "," : "") + std::to_string(tiles[i]);
  if (replicas > 1) s += "," + std::to_string(replicas);
  s += "]";
  for (size_t i = 0; i < devices.size(); ++i) s += (i ? "," : "") + std::to_string(devices[i]);
  if (replicas > 1) s += " last_tile_dim_replicate";
  return s + "}";
}

std::vector<int64_t> Sharding::tile_of(int64_t partition, size_t rank) const {
  std::vector<int64_t> idx(rank, 0);
  if (replicated()) return idx;
  int64_t pos = -1;
  for (size_t i = 0; i < devices.size(); ++i)
    if (devices[i] == partition) pos = static_cast<int64_t>(i);
  if (pos < 0) throw std::out_of_range("partition " + std::to_string(partition) + " holds no tile");
  pos /= replicas;  // drop the replica position
  for (size_t d = tiles.size(); d-- > 0;) {
    if (d < rank) idx[d] = pos % tiles[d];
    pos /= tiles[d];
  }
  return idx;
}

Sharding Sharding::from_proto(const std::string& bytes, int64_t num_partitions, bool* ok) {
  // xla.OpSharding: type = 1 (REPLICATED 0, MAXIMAL 1, TUPLE 2, OTHER 3,
  // MANUAL 4), tile_assignment_dimensions = 3, tile_assignment_devices = 4,
  // replicate_on_last_tile_dim = 6, last_tile_dims = 8, iota_reshape_dims =
  // 9, iota_transpose_perm = 10.
  Reader r{bytes};
  int field = 0, wire = 0;
  uint64_t value = 0;
  std::string_view b;
  int64_t type = 0;
  bool last_replicate = false;
  std::vector<int64_t> dims, devices, last_tile_dims, iota_dims, iota_perm;
  while (r.next(field, wire, value, b)) {
    if (field == 1) type = static_cast<int64_t>(value);
    if (field == 3) append_ints(dims, wire, value, b);
    if (field == 4) append_ints(devices, wire, value, b);
    if (field == 6) last_replicate = value != 0;
    if (field == 8) append_ints(last_tile_dims, wire, value, b);
    if (field == 9) append_ints(iota_dims, wire, value, b);
    if (field == 10) append_ints(iota_perm, wire, value, b);
  }
  Sharding s;
  if (ok) *ok = true;
  if (type == 0) return s;
  if (type != 3 || dims.empty()) {
    if (ok) *ok = false;
    return s;
  }
  int64_t n = std::accumulate(dims.begin(), dims.end(), int64_t{1}, std::multiplies<>());
  if (devices.empty()) {
    // Iota form: iota(n) reshaped to iota_dims, transposed by iota_perm.
    if (iota_dims.empty()) iota_dims = {n};
    if (iota_perm.empty()) {
      iota_perm.resize(iota_dims.size());
      std::iota(iota_perm.begin(), iota_perm.end(), 0);
    }
    std::vector<int64_t> strides(iota_dims.size(), 1);
    for (size_t i = iota_dims.size(); i-- > 1;) strides[i - 1] = strides[i] * iota_dims[i];
    std::vector<int64_t> tdims(iota_perm.size());
    for (size_t i = 0; i < iota_perm.size(); ++i) tdims[i] = iota_dims[iota_perm[i]];
    std::vector<int64_t> idx(tdims.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t v = 0;
      for (size_t i = 0; i < idx.size(); ++i) v += idx[i] * strides[iota_perm[i]];
      devices.push_back(v);
      for (size_t i = idx.size(); i-- > 0;) {
        if (++idx[i] < tdims[i]) break;
        idx[i] = 0;
      }
    }
  }
  // Trailing subgroup dimensions: one replication dimension is a tile
  // dimension of replicas; any other kind (manual) is not a plain tiling.
  size_t data_rank = dims.size();
  if (last_replicate) {
    s.replicas = dims.back();
    --data_rank;
  } else if (!last_tile_dims.empty()) {
    if (last_tile_dims.size() != 1 || last_tile_dims[0] != 0) {
      if (ok) *ok = false;
      return Sharding{};
    }
    s.replicas = dims.back();
    --data_rank;
  }
  s.tiles.assign(dims.begin(), dims.begin() + static_cast<std::ptrdiff_t>(data_rank));
  s.devices = std::move(devices);
  (void)num_partitions;
  // A grid of one tile held by every partition is plain replication.
  bool one_tile = true;
  for (int64_t t : s.tiles) one_tile = one_tile && t == 1;
  if (one_tile) return Sharding{};
  return s;
}

std::vector<Sharding> module_output_shardings(const std::string& proto, int64_t num_partitions, bool with_config) {
  if (with_config) {
    // HloModuleProtoWithConfig: hlo_module = 1.
    Reader r{proto};
    int field = 0, wire = 0;
    uint64_t value = 0;
    std::string_view b;
    while (r.next(field, wire, value, b))
      if (field == 1 && wire == 2) return module_output_shardings(std::string(b), num_partitions, false);
    return {};
  }
  // HloModuleProto.spmd_output_sharding = 12: a TUPLE OpSharding (type 2)
  // with tuple_shardings = 5, or one sharding for a single result.
  Reader r{proto};
  int field = 0, wire = 0;
  uint64_t value = 0;
  std::string_view b;
  while (r.next(field, wire, value, b)) {
    if (field != 12 || wire != 2) continue;
    Reader t{b};
    int64_t type = 0;
    std::vector<Sharding> out;
    int f2 = 0, w2 = 0;
    uint64_t v2 = 0;
    std::string_view b2;
    while (t.next(f2, w2, v2, b2)) {
      if (f2 == 1) type = static_cast<int64_t>(v2);
      if (f2 == 5) out.push_back(Sharding::from_proto(std::string(b2), num_partitions));
    }
    if (type == 2) return out;
    return {Sharding::from_proto(std::string(b), num_partitions)};
  }
  return {};
}

}  // namespace torch_tpu::runtime
