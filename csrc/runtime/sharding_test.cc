#include "runtime/sharding.h"

#include <gtest/gtest.h>

#include <string>

namespace torch_tpu::runtime {
namespace {

std::string bytes(std::initializer_list<int> b) {
  std::string s;
  for (int x : b) s.push_back(static_cast<char>(x));
  return s;
}

TEST(Sharding, ReplicatedIsTheDefault) {
  Sharding s = Sharding::from_proto("", 4);
  EXPECT_TRUE(s.replicated());
  EXPECT_EQ(s.hlo(), "{replicated}");
  EXPECT_EQ(s.tile_of(3, 2), (std::vector<int64_t>{0, 0}));
}

TEST(Sharding, ReadsExplicitDevicesWithAReplicaDimension) {
  // OTHER, tile dims [2,1,2], devices [0,2,1,3], replicate_on_last_tile_dim:
  // as XLA serialises {devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}.
  bool ok = false;
  Sharding s = Sharding::from_proto(
      bytes({0x08, 0x03, 0x1a, 0x03, 0x02, 0x01, 0x02, 0x22, 0x04, 0x00, 0x02, 0x01, 0x03, 0x30, 0x01}), 4, &ok);
  ASSERT_TRUE(ok);
  EXPECT_EQ(s.tiles, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(s.replicas, 2);
  EXPECT_EQ(s.hlo(), "{devices=[2,1,2]0,2,1,3 last_tile_dim_replicate}");
  // Partitions 0 and 2 hold tile row 0; 1 and 3 hold row 1.
  EXPECT_EQ(s.tile_of(2, 2), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(s.tile_of(1, 2), (std::vector<int64_t>{1, 0}));
}

TEST(Sharding, ExpandsTheIotaForm) {
  // OTHER, tile dims [2,2], iota_reshape_dims [2,2], iota_transpose_perm
  // [1,0]: devices 0,2,1,3.
  Sharding s = Sharding::from_proto(
      bytes({0x08, 0x03, 0x1a, 0x02, 0x02, 0x02, 0x4a, 0x02, 0x02, 0x02, 0x52, 0x02, 0x01, 0x00}), 4);
  EXPECT_EQ(s.devices, (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(s.tile_of(2, 2), (std::vector<int64_t>{0, 1}));
}

TEST(Sharding, ReadsAModulesResultShardings) {
  // HloModuleProto{spmd_output_sharding = 12: TUPLE{replicated, tiles [4]}}.
  std::string tiled = bytes({0x08, 0x03, 0x1a, 0x01, 0x04, 0x22, 0x04, 0x00, 0x01, 0x02, 0x03});
  std::string tuple = bytes({0x08, 0x02, 0x2a, 0x00, 0x2a, static_cast<int>(tiled.size())}) + tiled;
  std::string module = bytes({0x62, static_cast<int>(tuple.size())}) + tuple;
  auto out = module_output_shardings(module, 4);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_TRUE(out[0].replicated());
  EXPECT_EQ(out[1].hlo(), "{devices=[4]0,1,2,3}");
  std::string wrapped = bytes({0x0a, static_cast<int>(module.size())}) + module;
  EXPECT_EQ(module_output_shardings(wrapped, 4, /*with_config=*/true).size(), 2u);
}

}  // namespace
}  // namespace torch_tpu::runtime
