#include "aten/generator.h"

#include <ATen/ops/empty.h>
#include <c10/core/TensorImpl.h>
#include <c10/util/Exception.h>

#include <cstring>
#include <mutex>
#include <random>
#include <vector>

#include "aten/device.h"

namespace torch_tpu {

TpuGeneratorImpl::TpuGeneratorImpl(c10::DeviceIndex index)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, index),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)) {}

void TpuGeneratorImpl::set_current_seed(uint64_t seed) {
  seed_ = seed;
  offset_ = 0;
}

uint64_t TpuGeneratorImpl::seed() {
  std::random_device rd;
  uint64_t s = (static_cast<uint64_t>(rd()) << 32) | rd();
  set_current_seed(s);
  return s;
}

// State is a CPU uint8 tensor of 16 bytes: seed then offset (little endian).
c10::intrusive_ptr<c10::TensorImpl> TpuGeneratorImpl::get_state() const {
  at::Tensor t = at::empty({16}, at::TensorOptions().dtype(at::kByte).device(at::kCPU));
  std::memcpy(t.data_ptr(), &seed_, 8);
  std::memcpy(static_cast<char*>(t.data_ptr()) + 8, &offset_, 8);
  return t.getIntrusivePtr();
}

void TpuGeneratorImpl::set_state(const c10::TensorImpl& s) {
  TORCH_CHECK(s.numel() == 16 && s.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
              "RNG state must be a torch.ByteTensor of 16 bytes");
  const char* p = static_cast<const char*>(s.data());
  std::memcpy(&seed_, p, 8);
  std::memcpy(&offset_, p + 8, 8);
}

TpuGeneratorImpl* TpuGeneratorImpl::clone_impl() const {
  auto* g = new TpuGeneratorImpl(device().index());
  g->seed_ = seed_;
  g->offset_ = offset_;
  return g;
}

const at::Generator& default_generator(c10::DeviceIndex index) {
  static std::mutex mu;
  static std::vector<at::Generator>* gens = new std::vector<at::Generator>();
  std::lock_guard<std::mutex> lock(mu);
  if (gens->empty()) {
    int n = std::max(1, device_count());
    for (int i = 0; i < n; ++i) gens->push_back(at::make_generator<TpuGeneratorImpl>(i));
  }
  int i = index < 0 ? 0 : index;
  TORCH_CHECK(i < static_cast<int>(gens->size()), "tpu device index ", i, " is out of range");
  return (*gens)[i];
}

TpuGeneratorImpl* get_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex index) {
  if (gen.has_value() && gen->defined()) {
    TORCH_CHECK(gen->device().type() == c10::DeviceType::PrivateUse1,
                "Expected a 'tpu' device type for generator but found '", gen->device().type(), "'");
    return at::check_generator<TpuGeneratorImpl>(gen);
  }
  return at::check_generator<TpuGeneratorImpl>(default_generator(index));
}

}  // namespace torch_tpu
