// The persistent tier on its own: round trip, damaged files, environment
// changes, LRU pruning, unusable directories.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "compile/disk_tier.h"

namespace fs = std::filesystem;

namespace torch_tpu {
namespace {

class DiskTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tt_disk_tier_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::unique_ptr<DiskTier> make(const std::string& env = "plugin=a\n", int64_t cap = 0) {
    auto t = std::make_unique<DiskTier>("disk", dir_.string(), cap);
    KeyBuilder k;
    k.add(std::string_view(env));
    t->set_environment(k.finish(), env);
    return t;
  }
  std::vector<fs::path> files() {
    std::vector<fs::path> out;
    for (auto& e : fs::directory_iterator(dir_)) out.push_back(e.path());
    return out;
  }
  fs::path dir_;
};

TEST_F(DiskTierTest, RoundTripCountsHits) {
  auto t = make();
  CacheKey k{42, 43};
  EXPECT_FALSE(t->lookup(k, "add").has_value());
  t->store(k, "add", "payload-bytes", 1234);
  t->flush();
  auto e = t->lookup(k, "add");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->payload, "payload-bytes");
  EXPECT_EQ(e->compile_ns, 1234);
  t->lookup(k, "add");
  auto listed = t->list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].name, "add");
  EXPECT_EQ(listed[0].hits, 2);
  EXPECT_TRUE(listed[0].current);
  EXPECT_EQ(t->hits.load(), 2);
  EXPECT_EQ(t->misses.load(), 1);
}

TEST_F(DiskTierTest, DamagedFilesAreMissesAndRemoved) {
  auto t = make();
  CacheKey k{1, 2};
  t->store(k, "mul", std::string(1000, 'x'), 1);
  t->flush();
  auto path = files().at(0);
  auto size = fs::file_size(path);
  fs::resize_file(path, size / 2);
  EXPECT_FALSE(t->lookup(k, "mul").has_value());
  EXPECT_TRUE(files().empty());
  std::ofstream(dir_ / (k.hex() + "-garbage.xex")) << "garbage";
  EXPECT_EQ(t->corrupt.load(), 1);
}

TEST_F(DiskTierTest, OtherEnvironmentNeverLoads) {
  CacheKey k{5, 6};
  {
    auto t = make("plugin=a\n");
    t->store(k, "exp", "old-plugin-code", 1);
    t->flush();
  }
  auto t = make("plugin=b\n");
  EXPECT_FALSE(t->lookup(k, "exp").has_value());
  auto listed = t->list();
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_FALSE(listed[0].current);
}

TEST_F(DiskTierTest, PruneRemovesLeastRecentlyUsed) {
  auto t = make();
  for (uint64_t i = 0; i < 4; ++i) t->store(CacheKey{i, i}, "op", std::string(100, 'a'), 1);
  t->flush();
  int64_t one = t->list()[0].bytes;
  EXPECT_EQ(t->prune(2 * one), 2);
  EXPECT_EQ(t->list().size(), 2u);
  EXPECT_EQ(t->clear(), 2);
}

TEST_F(DiskTierTest, WritesKeepTheTierUnderItsCap) {
  int64_t one;
  {
    auto probe = make();
    probe->store(CacheKey{99, 99}, "op", std::string(1000, 'a'), 1);
    probe->flush();
    one = probe->list()[0].bytes;
    probe->clear();
  }
  auto t = make("plugin=a\n", 3 * one);
  for (uint64_t i = 0; i < 10; ++i) {
    t->store(CacheKey{i, i}, "op", std::string(1000, 'a'), 1);
    t->flush();
    int64_t total = 0;
    for (auto& e : t->list()) total += e.bytes;
    EXPECT_LE(total, 3 * one) << "after write " << i;
  }
  EXPECT_EQ(t->list().size(), 3u);
}

TEST_F(DiskTierTest, UnusableDirectoryDisablesTier) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "file") << "x";
  DiskTier t("disk", (dir_ / "file" / "sub").string(), 0);
  EXPECT_FALSE(t.enabled());
  t.store(CacheKey{1, 1}, "op", "p", 1);  // a no-op, not a crash
  t.flush();
  EXPECT_FALSE(t.lookup(CacheKey{1, 1}, "op").has_value());
}

}  // namespace
}  // namespace torch_tpu
