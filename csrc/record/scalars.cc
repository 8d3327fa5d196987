// Runtime scalars of recorded calls: their host bits, the cached 0-d device
// buffers that carry them into programs, and what a deferred driver asks of them.
#include "record/op_call.h"

#include <map>
#include <mutex>
#include <tuple>

#include "aten/device.h"
#include "compile/metrics.h"

#include "record/op_call_internal.h"

namespace torch_tpu::record {

using ir::ElemType;
using ir::Value;

ScalarBits scalar_bits(const c10::Scalar& s, ElemType t) {
  ScalarBits bits{0, 0};
  auto put = [&](auto v) {
    static_assert(sizeof v <= sizeof bits);
    std::memcpy(bits.data(), &v, sizeof v);
  };
  switch (t) {
    case ElemType::kPred:
      put(static_cast<uint8_t>(s.toBool()));
      break;
    case ElemType::kS8:
      put(s.toChar());
      break;
    case ElemType::kU8:
      put(s.toByte());
      break;
    case ElemType::kS16:
      put(s.toShort());
      break;
    case ElemType::kS32:
      put(s.toInt());
      break;
    case ElemType::kS64:
      put(s.toLong());
      break;
    case ElemType::kU32:
      put(static_cast<uint32_t>(s.toLong()));
      break;
    case ElemType::kU64:
      put(static_cast<uint64_t>(s.toLong()));
      break;
    case ElemType::kF16:
      put(s.toHalf());
      break;
    case ElemType::kBF16:
      put(s.toBFloat16());
      break;
    case ElemType::kF32:
      put(s.toFloat());
      break;
    case ElemType::kF64:
      put(s.toDouble());
      break;
    case ElemType::kC64:
      put(s.toComplexFloat());
      break;
    case ElemType::kC128:
      put(s.toComplexDouble());
      break;
  }
  return bits;
}

namespace {

// Small cache of 0-d device scalars: a loop doing `x * 0.9` transfers the
// 0.9 once.
runtime::BufferPtr device_scalar(const ScalarBits& bits, ElemType t, int device) {
  static std::mutex mu;
  static std::map<std::tuple<uint64_t, uint64_t, int, int>, runtime::BufferPtr> cache;
  auto k = std::make_tuple(bits[0], bits[1], static_cast<int>(t), device);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(k); it != cache.end()) return it->second;
  }
  auto buf = client().buffer_from_host(bits.data(), to_pjrt(t), {}, device);
  bump(metrics().h2d_count);
  bump(metrics().h2d_bytes, ir::byte_size(t));
  std::lock_guard<std::mutex> lock(mu);
  if (cache.size() > 4096) cache.clear();
  cache.emplace(k, buf);
  return buf;
}

}  // namespace

std::vector<runtime::BufferPtr> OpCall::scalar_buffers() const {
  std::vector<runtime::BufferPtr> bufs;
  for (const Arg& a : args_)
    if (a.kind != Arg::kView) bufs.push_back(device_scalar(scalar_bits(scalar_value(a), a.elem), a.elem, device_));
  return bufs;
}

const OpCall::Arg& OpCall::scalar_arg(size_t k) const {
  for (const Arg& a : args_)
    if (a.kind != Arg::kView && k-- == 0) return a;
  TORCH_INTERNAL_ASSERT(false, "runtime scalar index out of range");
}

runtime::BufferPtr OpCall::scalar_buffer_at(size_t k) const {
  const Arg& a = scalar_arg(k);
  return device_scalar(scalar_bits(scalar_value(a), a.elem), a.elem, device_);
}

uint64_t OpCall::scalar_bits_at(size_t k) const {
  const Arg& a = scalar_arg(k);
  return scalar_bits(scalar_value(a), a.elem)[0];
}

std::vector<OpCall::ScalarSource> OpCall::scalar_sources() const {
  std::vector<ScalarSource> out;
  for (const Arg& a : args_) {
    if (a.kind == Arg::kView) continue;
    ScalarSource src;
    if (a.kind == Arg::kScalarTensor) {
      src.kind = ScalarSource::kCpuTensor;
      src.cpu = a.cpu.unsafeGetTensorImpl();
      src.wrapped = src.cpu->is_wrapped_number();
    } else if (a.rng_part >= 0) {
      src.kind = a.rng_part == 0 ? ScalarSource::kRngSeed : ScalarSource::kRngOffset;
      src.gen = a.gen;
      src.advance = a.rng_advance;
    }
    out.push_back(std::move(src));
  }
  return out;
}

runtime::BufferPtr scalar_buffer(const c10::Scalar& s, ElemType elem, int device) {
  return device_scalar(scalar_bits(s, elem), elem, device);
}

std::vector<ElemType> OpCall::scalar_elems() const {
  std::vector<ElemType> elems;
  for (const Arg& a : args_)
    if (a.kind != Arg::kView) elems.push_back(a.elem);
  return elems;
}

}  // namespace torch_tpu::record
