// Cache keys: deterministic, sensitive to every word, stable text form.
#include <gtest/gtest.h>

#include <set>

#include "compile/cache_key.h"

namespace torch_tpu {
namespace {

CacheKey key_of(std::initializer_list<uint64_t> words, std::string_view s = "") {
  KeyBuilder k;
  for (uint64_t w : words) k.add(w);
  if (!s.empty()) k.add(s);
  return k.finish();
}

TEST(CacheKey, DeterministicAndSensitive) {
  EXPECT_EQ(key_of({1, 2, 3}), key_of({1, 2, 3}));
  EXPECT_FALSE(key_of({1, 2, 3}) == key_of({1, 2, 4}));
  EXPECT_FALSE(key_of({1, 2, 3}) == key_of({3, 2, 1}));
  EXPECT_FALSE(key_of({1}, "add") == key_of({1}, "sub"));
  // Strings are length-prefixed: "ab"+"c" differs from "a"+"bc".
  KeyBuilder a, b;
  a.add(std::string_view("ab"));
  a.add(std::string_view("c"));
  b.add(std::string_view("a"));
  b.add(std::string_view("bc"));
  EXPECT_FALSE(a.finish() == b.finish());
}

TEST(CacheKey, HexIs32Chars) {
  EXPECT_EQ(key_of({7}).hex().size(), 32u);
  EXPECT_EQ(key_of({7}).hex(), key_of({7}).hex());
}

TEST(CacheKey, NoCollisionsOnNearbyShapes) {
  // Shapes differing in one dimension are the common case in eager mode.
  std::set<std::string> seen;
  for (uint64_t a = 0; a < 64; ++a)
    for (uint64_t b = 0; b < 64; ++b) seen.insert(key_of({a, b}, "mul").hex());
  EXPECT_EQ(seen.size(), 64u * 64u);
}

}  // namespace
}  // namespace torch_tpu
