// The tpu random generator: a (seed, offset) counter pair. Each random op
// consumes a fresh offset: the seed is its PHILOX key, the offset its counter, so
// results are reproducible under torch.manual_seed and independent across
// calls. The state never leaves the host, so no sync is needed to advance.
#pragma once
#include <ATen/core/Generator.h>
#include <c10/core/GeneratorImpl.h>

namespace torch_tpu {

class TpuGeneratorImpl : public c10::GeneratorImpl {
 public:
  explicit TpuGeneratorImpl(c10::DeviceIndex index = 0);
  void set_current_seed(uint64_t seed) override;
  void set_offset(uint64_t offset) override { offset_ = offset; }
  uint64_t get_offset() const override { return offset_; }
  uint64_t current_seed() const override { return seed_; }
  uint64_t seed() override;
  void set_state(const c10::TensorImpl& new_state) override;
  c10::intrusive_ptr<c10::TensorImpl> get_state() const override;
  // Reserves `n` counter values; returns the offset to use.
  uint64_t advance(uint64_t n = 1) {
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }
  static c10::DeviceType device_type() { return c10::DeviceType::PrivateUse1; }

 private:
  TpuGeneratorImpl* clone_impl() const override;
  uint64_t seed_ = 67280421310721ull;
  uint64_t offset_ = 0;
};

const at::Generator& default_generator(c10::DeviceIndex index);
// The generator to use for an op: `gen` if given, else the default.
TpuGeneratorImpl* get_generator(const std::optional<at::Generator>& gen, c10::DeviceIndex index = 0);

}  // namespace torch_tpu
