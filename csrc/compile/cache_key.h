// 128-bit cache keys built from metadata (op, attributes, input shapes,
// dtypes, layouts) - never from program text, so a hit costs no emission.
#pragma once
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>

namespace torch_tpu {

struct CacheKey {
  uint64_t hi = 0, lo = 0;
  bool operator==(const CacheKey& o) const { return hi == o.hi && lo == o.lo; }
  std::string hex() const;
};

struct CacheKeyHash {
  size_t operator()(const CacheKey& k) const { return k.lo ^ (k.hi * 0x9e3779b97f4a7c15ull); }
};

// Two independent 64-bit lanes (FNV-1a style word mixing with different
// seeds and a final avalanche) - cheap, and stable across processes.
class KeyBuilder {
 public:
  void add(uint64_t v) {
    a_ = (a_ ^ v) * 0x100000001b3ull;
    a_ ^= a_ >> 29;
    b_ = (b_ ^ (v + 0x9e3779b97f4a7c15ull)) * 0xff51afd7ed558ccdull;
    b_ ^= b_ >> 31;
  }
  void add_double(double d) {
    uint64_t v;
    std::memcpy(&v, &d, sizeof v);
    add(v);
  }
  void add(std::string_view s) {
    add(s.size());
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      add(w);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, s.data() + i, s.size() - i);
    add(tail);
  }
  CacheKey finish() const {
    auto mix = [](uint64_t x) {
      x ^= x >> 33;
      x *= 0xff51afd7ed558ccdull;
      x ^= x >> 33;
      x *= 0xc4ceb9fe1a85ec53ull;
      x ^= x >> 33;
      return x;
    };
    return {mix(a_), mix(b_ ^ a_)};
  }

 private:
  uint64_t a_ = 0xcbf29ce484222325ull;
  uint64_t b_ = 0x84222325cbf29ce4ull;
};

}  // namespace torch_tpu
