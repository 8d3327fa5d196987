// Random ops driven by the tpu generator (aten/generator.h), multinomial
// included. Each call reserves a counter range from the generator on the
// host and passes (seed, offset) as runtime scalars: the program builds the
// PHILOX state [seed, offset] itself, so one executable serves every
// call and seed. Results are reproducible under torch.manual_seed but are
// not CPU's stream.
//
// multinomial: inverse-CDF sampling with replacement, Gumbel top-k without.
// Its CPU data checks (negative, non-finite or all-zero rows) would need a
// sync per call and are not done. poisson: Knuth below rate 10, PTRS
// rejection above (see there). The gamma-family samplers (gamma, Dirichlet,
// binomial) are in gamma.cc; rng.h declares the helpers both files use.
#include <ATen/ExpandUtils.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/result_type.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <mutex>

#include "aten/generator.h"
#include "ops/common.h"
#include "ops/random/rng.h"
#include "ops/variants.h"

namespace torch_tpu::ops {

namespace rng {

// Reserves counters for `words` 32-bit random words and adds (seed, offset)
// as the call's first two runtime scalars. XLA's PHILOX uses state[1] as
// the starting counter and draws 128 bits per counter, so advancing by the
// element count keeps calls disjoint.
void add_rng_state(record::OpCall& call, const std::optional<at::Generator>& gen, const at::Tensor& self,
                   uint64_t words) {
  TpuGeneratorImpl* g = get_generator(gen, self.device().index());
  uint64_t seed, offset;
  {
    std::lock_guard<std::mutex> lock(g->mutex_);
    seed = g->current_seed();
    offset = g->advance((words + 3) / 4 * 4);  // rng_state below records the same count
  }
  call.rng_state(g, seed, offset, (words + 3) / 4 * 4);
}

Value random_bits(Builder& b, Value seed, Value offset, const Dims& dims, ElemType bits_type) {
  Value s = b.reshape(b.bitcast_convert(seed, ElemType::kU64), {1});
  Value o = b.reshape(b.bitcast_convert(offset, ElemType::kU64), {1});
  Value state = b.concatenate({s, o}, 0);
  return b.rng_bit_generator(state, dims, bits_type)[1];
}

// The top mantissa-many bits scaled by 2^-mantissa, so every value is exact.
Value uniform01(Builder& b, Value seed, Value offset, const Dims& dims, ElemType ft) {
  if (ft == ElemType::kF64) {
    Value bits = random_bits(b, seed, offset, dims, ElemType::kU64);
    Value top = b.shr_logical(bits, b.constant(11, ElemType::kU64, dims));
    return b.mul(b.convert(top, ft), b.constant(std::ldexp(1.0, -53), ft, dims));
  }
  Value bits = random_bits(b, seed, offset, dims, ElemType::kU32);
  Value top = b.shr_logical(bits, b.constant(9, ElemType::kU32, dims));
  return b.mul(b.convert(top, ft), b.constant(std::ldexp(1.0, -23), ft, dims));
}

Value std_normal(Builder& b, Value seed, Value offset, const Dims& dims, ElemType ft) {
  Dims d2 = dims;
  d2.insert(d2.begin(), 2);
  Value u = uniform01(b, seed, offset, d2, ft);
  Dims start(d2.size(), 0), limit = d2, strides(d2.size(), 1);
  limit[0] = 1;
  Value u1 = b.reshape(b.slice(u, start, limit, strides), dims);
  start[0] = 1;
  limit[0] = 2;
  Value u2 = b.reshape(b.slice(u, start, limit, strides), dims);
  // 1 - u1 lies in (0, 1], so the log is finite.
  Value r = b.sqrt(b.mul(b.constant(-2.0, ft, dims), b.log(b.sub(b.constant(1.0, ft, dims), u1))));
  Value theta = b.mul(b.constant(2 * kPi, ft, dims), u2);
  return b.mul(r, b.cos(theta));
}

}  // namespace rng

namespace {

using ir::Dims;
using rng::add_rng_state;
using rng::compute_type;
using rng::kPi;
using rng::random_bits;
using rng::std_normal;
using rng::uniform01;
using rng::words_per;

Dims dims_of(const at::Tensor& t) { return Dims(t.sizes().begin(), t.sizes().end()); }

// --- fills: uniform_, normal_, log_normal_, exponential_, cauchy_, geometric_, random_, bernoulli_ ---
//
// Each sampler is one declaration with three forms: `uniform_` fills self,
// `uniform` a new tensor laid out like self, and `uniform.out` out, which
// must have self's dtype, as on CPU. meta checks the arguments against
// self's dtype.

OutMeta fill_meta(const at::Tensor& self) {
  return OutMeta{self.sizes().vec(), self.scalar_type(), self.device(), OutDtype::kExact};
}

void uniform_into(const at::Tensor& self, double from, double to, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return;
  auto ct = compute_type(self.scalar_type());
  record::OpCall call("uniform_");
  call.attr(static_cast<int64_t>(ct));
  add_rng_state(call, gen, self, self.numel() * words_per(ct));
  call.scalar(from, ct);
  call.scalar(to, ct);
  call.output(self);
  ElemType ft = to_elem(ct);
  Dims d = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    Value u = uniform01(b, in[0], in[1], d, ft);
    Value lo = b.broadcast_to(in[2], d);
    Value r = b.add(lo, b.mul(u, b.sub(b.broadcast_to(in[3], d), lo)));
    return Values{r};
  });
}

struct Uniform {
  static constexpr const char* kName = "uniform";
  static OutMeta meta(const at::Tensor& self, double from, double to, std::optional<at::Generator>) {
    check_float(self, "check_uniform_bounds");
    TORCH_CHECK(from <= to, "uniform_ expects to return a [from, to) range, but found from=", from, " > to=", to);
    return fill_meta(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor&, double from, double to,
                   std::optional<at::Generator> gen) {
    uniform_into(out, from, to, gen);
  }
};

// --- normal ------------------------------------------------------------------------

void check_std(double std) { TORCH_CHECK(std >= 0.0, "normal expects std >= 0.0, but found std ", std); }

// out = mean + std * N(0, 1); mean/std are tensors or numbers, broadcast to out.
void normal_into(const at::Tensor& out, const Operand& mean, const Operand& std, std::optional<at::Generator> gen,
                 int64_t variant) {
  if (out.numel() == 0) return;
  auto ct = compute_type(out.scalar_type());
  record::OpCall call("normal");
  call.attr(static_cast<int64_t>(ct)).attr(variant);
  add_rng_state(call, gen, out, 2 * out.numel() * words_per(ct));
  for (const Operand* o : {&mean, &std}) {
    if (o->t.defined())
      call.input(o->t);
    else
      call.scalar(*o->s, ct);
  }
  call.output(out);
  ElemType ft = to_elem(ct);
  Dims d = dims_of(out);
  call.run([&](Builder& b, const Values& in) {
    Value z = std_normal(b, in[0], in[1], d, ft);
    Value m = b.broadcast_to(b.convert(in[2], ft), d);
    Value s = b.broadcast_to(b.convert(in[3], ft), d);
    return Values{b.add(m, b.mul(s, z))};
  });
}

struct NormalFill {
  static constexpr const char* kName = "normal";
  static OutMeta meta(const at::Tensor& self, double, double std, std::optional<at::Generator>) {
    check_float(self, "normal_kernel_cpu");
    check_std(std);
    return fill_meta(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor&, double mean, double std,
                   std::optional<at::Generator> gen) {
    normal_into(out, c10::Scalar(mean), c10::Scalar(std), gen, 0);
  }
};

void check_normal_tensor(const at::Tensor& t, const char* what) {
  TORCH_CHECK(at::isFloatingType(t.scalar_type()), "normal expects floating-point ", what, " but got dtype ",
              t.scalar_type());
}

// normal(Tensor mean, float std): one sample per element of mean.
struct NormalTensorFloat {
  static constexpr const char* kName = "normal";
  static OutMeta meta(const at::Tensor& mean, double std, std::optional<at::Generator>) {
    check_normal_tensor(mean, "mean");
    check_std(std);
    return OutMeta{mean.sizes().vec(), mean.scalar_type(), mean.device()};
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& mean, double std,
                   std::optional<at::Generator> gen) {
    normal_into(out, mean, c10::Scalar(std), gen, 1);
  }
};

// normal(float mean, Tensor std): the number comes first.
struct NormalFloatTensor {
  static constexpr const char* kName = "normal";
  static OutMeta meta(double, const at::Tensor& std, std::optional<at::Generator>) {
    check_normal_tensor(std, "std");
    return OutMeta{std.sizes().vec(), std.scalar_type(), std.device(), OutDtype::kCastable, false};
  }
  static void impl(const at::Tensor& out, const OutMeta&, double mean, const at::Tensor& std,
                   std::optional<at::Generator> gen) {
    normal_into(out, c10::Scalar(mean), std, gen, 2);
  }
};

// normal(Tensor mean, Tensor std): over their broadcast shape.
struct NormalTensorTensor {
  static constexpr const char* kName = "normal";
  static OutMeta meta(const at::Tensor& mean, const at::Tensor& std, std::optional<at::Generator>) {
    check_normal_tensor(mean, "mean");
    check_normal_tensor(std, "std");
    OutMeta m{broadcast_shape({mean, std}), at::result_type(mean, std), mean.is_cpu() ? std.device() : mean.device()};
    m.operand_layout = false;
    return m;
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& mean, const at::Tensor& std,
                   std::optional<at::Generator> gen) {
    normal_into(out, mean, std, gen, 3);
  }
};

void log_normal_into(const at::Tensor& self, double mean, double std, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return;
  auto ct = compute_type(self.scalar_type());
  record::OpCall call("log_normal_");
  call.attr(static_cast<int64_t>(ct));
  add_rng_state(call, gen, self, 2 * self.numel() * words_per(ct));
  call.scalar(mean, ct);
  call.scalar(std, ct);
  call.output(self);
  ElemType ft = to_elem(ct);
  Dims d = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    Value z = std_normal(b, in[0], in[1], d, ft);
    Value n = b.add(b.broadcast_to(in[2], d), b.mul(b.broadcast_to(in[3], d), z));
    return Values{b.exp(n)};
  });
}

struct LogNormal {
  static constexpr const char* kName = "log_normal";
  static OutMeta meta(const at::Tensor& self, double, double std, std::optional<at::Generator>) {
    check_float(self, "log_normal_cpu");
    TORCH_CHECK(std > 0.0, "log_normal_ expects std > 0.0, but found std=", std);
    return fill_meta(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor&, double mean, double std,
                   std::optional<at::Generator> gen) {
    log_normal_into(out, mean, std, gen);
  }
};

// --- samplers built on one uniform draw -----------------------------------------------

// self <- fn(u, params) with u uniform in [0, 1) from the generator; the
// distribution parameters are runtime scalars (broadcast to self's shape).
template <typename Fn>
void sample_from_uniform(const char* name, const at::Tensor& self, std::optional<at::Generator> gen,
                         std::initializer_list<double> params, Fn fn) {
  if (self.numel() == 0) return;
  auto ct = compute_type(self.scalar_type());
  record::OpCall call(name);
  call.attr(static_cast<int64_t>(ct));
  add_rng_state(call, gen, self, self.numel() * words_per(ct));
  for (double p : params) call.scalar(p, ct);
  call.output(self);
  ElemType ft = to_elem(ct);
  Dims d = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    Value u = uniform01(b, in[0], in[1], d, ft);
    std::vector<Value> ps;
    for (size_t k = 2; k < in.size(); ++k) ps.push_back(b.broadcast_to(in[k], d));
    return Values{fn(b, u, ps, b.constant(1.0, ft, d))};
  });
}

// CPU names the dtype as ScalarType for exponential_, as TypeMeta
// ("long int") for cauchy_.
template <class DtypeName>
void check_continuous(const at::Tensor& self, const char* dist, DtypeName dtype) {
  TORCH_CHECK(at::isFloatingType(self.scalar_type()), dist,
              " distribution is a continuous probability distribution. dtype must be a floating point but you "
              "specified ",
              dtype);
}

struct Exponential {
  static constexpr const char* kName = "exponential";
  static OutMeta meta(const at::Tensor& self, double lambd, std::optional<at::Generator>) {
    TORCH_CHECK(lambd > 0.0, "exponential_ expects lambda > 0.0, but found lambda=", lambd);
    check_continuous(self, "Exponential", self.scalar_type());
    return fill_meta(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor&, double lambd,
                   std::optional<at::Generator> gen) {
    sample_from_uniform("exponential_", out, gen, {lambd},
                        [](Builder& b, Value u, const std::vector<Value>& p, Value one) {
                          // -log(1 - u) / lambda with 1 - u in (0, 1]: finite and >= 0.
                          Value l = b.log(b.sub(one, u));
                          return b.div(b.neg(l), p[0]);
                        });
  }
};

struct Cauchy {
  static constexpr const char* kName = "cauchy";
  static OutMeta meta(const at::Tensor& self, double, double sigma, std::optional<at::Generator>) {
    TORCH_CHECK(sigma > 0.0, "cauchy_ expects sigma > 0.0, but found sigma=", sigma);
    check_continuous(self, "Cauchy", self.dtype());
    return fill_meta(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor&, double median, double sigma,
                   std::optional<at::Generator> gen) {
    sample_from_uniform("cauchy_", out, gen, {median, sigma},
                        [](Builder& b, Value u, const std::vector<Value>& p, Value) {
                          // median + sigma * tan(pi * (u - 1/2))
                          Value half = b.constant(0.5, b.elem(u), b.dims(u));
                          Value pi = b.constant(kPi, b.elem(u), b.dims(u));
                          Value tn = b.tan(b.mul(pi, b.sub(u, half)));
                          return b.add(p[0], b.mul(p[1], tn));
                        });
  }
};

struct Geometric {
  static constexpr const char* kName = "geometric";
  static OutMeta meta(const at::Tensor& self, double p, std::optional<at::Generator>) {
    TORCH_CHECK(0 < p && p < 1, "geometric_ expects p to be in (0, 1), but got p=", p);
    return fill_meta(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor&, double p,
                   std::optional<at::Generator> gen) {
    sample_from_uniform("geometric_", out, gen, {p}, [](Builder& b, Value u, const std::vector<Value>& ps, Value one) {
      // ceil(log(1 - u) / log1p(-p)), at least 1 (1 - u lies in (0, 1]).
      Value l = b.log(b.sub(one, u));
      Value q = b.log1p(b.neg(ps[0]));
      Value r = b.ceil(b.div(l, q));
      return b.max(r, one);
    });
  }
};

// --- random_ -----------------------------------------------------------------------

// Fills self with from + (bits mod range), range as an unsigned 64-bit
// count where 0 stands for 2^64 (the full int64 range).
void random_range(const at::Tensor& self, int64_t from, uint64_t range, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return;
  record::OpCall call("random_");
  add_rng_state(call, gen, self, 2 * self.numel());
  call.scalar(c10::Scalar(from), c10::kLong);
  call.scalar(c10::Scalar(static_cast<int64_t>(range)), c10::kLong);
  call.output(self);
  Dims d = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    Value bits = random_bits(b, in[0], in[1], d, ElemType::kU64);
    Value r = b.broadcast_to(b.bitcast_convert(in[3], ElemType::kU64), d);
    Value zero_u = b.constant(0, ElemType::kU64, d);
    Value full = b.compare(r, zero_u, Direction::kEq);
    Value safe = b.select(full, b.constant(1, ElemType::kU64, d), r);
    Value k = b.select(full, bits, b.rem(bits, safe));
    Value from_u = b.broadcast_to(b.bitcast_convert(in[2], ElemType::kU64), d);
    Value v = b.bitcast_convert(b.add(from_u, k), ElemType::kS64);
    return Values{v};
  });
}

// The largest value random_ may produce for self's dtype (ATen's rule:
// integers up to their max, floats up to 2^digits so every value is exact).
int64_t random_max(c10::ScalarType t) {
  switch (t) {
    case c10::kBool:
      return 1;
    case c10::kByte:
      return std::numeric_limits<uint8_t>::max();
    case c10::kChar:
      return std::numeric_limits<int8_t>::max();
    case c10::kShort:
      return std::numeric_limits<int16_t>::max();
    case c10::kInt:
      return std::numeric_limits<int32_t>::max();
    case c10::kLong:
      return std::numeric_limits<int64_t>::max();
    case c10::kHalf:
      return int64_t{1} << std::numeric_limits<c10::Half>::digits;
    case c10::kBFloat16:
      return int64_t{1} << std::numeric_limits<c10::BFloat16>::digits;
    case c10::kFloat:
      return int64_t{1} << std::numeric_limits<float>::digits;
    case c10::kDouble:
      return int64_t{1} << std::numeric_limits<double>::digits;
    default:
      break;
  }
  TORCH_CHECK(false, "random_ is not supported for dtype ", t);
  return 0;
}

int64_t random_min(c10::ScalarType t) {
  switch (t) {
    case c10::kBool:
    case c10::kByte:
      return 0;
    case c10::kChar:
      return std::numeric_limits<int8_t>::min();
    case c10::kShort:
      return std::numeric_limits<int16_t>::min();
    case c10::kInt:
      return std::numeric_limits<int32_t>::min();
    case c10::kLong:
      return std::numeric_limits<int64_t>::min();
    default:
      return -random_max(t);
  }
}

const char* dtype_cname(c10::ScalarType t) {
  switch (t) {
    case c10::kBool:
      return "bool";
    case c10::kByte:
      return "unsigned char";
    case c10::kChar:
      return "signed char";
    case c10::kShort:
      return "short";
    case c10::kInt:
      return "int";
    case c10::kLong:
      return "long";
    case c10::kHalf:
      return "c10::Half";
    case c10::kBFloat16:
      return "c10::BFloat16";
    case c10::kFloat:
      return "float";
    default:
      return "double";
  }
}

// What random_ draws: from + [0, range), range 0 standing for 2^64.
struct RandomMeta : OutMeta {
  int64_t from = 0;
  uint64_t range = 0;
};

RandomMeta random_meta(const at::Tensor& self, int64_t from, std::optional<int64_t> to) {
  auto t = self.scalar_type();
  RandomMeta m;
  static_cast<OutMeta&>(m) = fill_meta(self);
  m.from = from;
  if (to.has_value()) {
    TORCH_CHECK(from < *to, "random_ expects 'from' to be less than 'to', but got from=", from, " >= to=", *to);
    TORCH_CHECK(from >= random_min(t) && from <= random_max(t), "from is out of bounds for ", dtype_cname(t));
    TORCH_CHECK(*to - 1 >= random_min(t) && *to - 1 <= random_max(t), "to - 1 is out of bounds for ", dtype_cname(t));
    m.range = static_cast<uint64_t>(*to) - static_cast<uint64_t>(from);
  } else {
    int64_t hi = random_max(t);
    TORCH_CHECK(from <= hi,
                "random_ expects 'from' casted to dtype to be less than or equal to 'to_inc' casted to "
                "dtype, but got from=",
                from, " > to_inc=", hi);
    TORCH_CHECK(from >= random_min(t), "from is out of bounds for ", dtype_cname(t));
    m.range = static_cast<uint64_t>(hi) - static_cast<uint64_t>(from) + 1;  // wraps to 0 for the full int64 range
  }
  return m;
}

void random_impl(const at::Tensor& out, const RandomMeta& m, std::optional<at::Generator> gen) {
  random_range(out, m.from, m.range, gen);
}

// random_(): [0, 2^digits] for floats, the dtype's [0, max] for integers.
struct RandomFill {
  static constexpr const char* kName = "random";
  static RandomMeta meta(const at::Tensor& self, std::optional<at::Generator>) {
    return random_meta(self, 0, std::nullopt);
  }
  static void impl(const at::Tensor& out, const RandomMeta& m, const at::Tensor&, std::optional<at::Generator> gen) {
    random_impl(out, m, gen);
  }
};

struct RandomFrom {
  static constexpr const char* kName = "random";
  static RandomMeta meta(const at::Tensor& self, int64_t from, std::optional<int64_t> to,
                         std::optional<at::Generator>) {
    return random_meta(self, from, to);
  }
  static void impl(const at::Tensor& out, const RandomMeta& m, const at::Tensor&, int64_t, std::optional<int64_t>,
                   std::optional<at::Generator> gen) {
    random_impl(out, m, gen);
  }
};

struct RandomTo {
  static constexpr const char* kName = "random";
  static RandomMeta meta(const at::Tensor& self, int64_t to, std::optional<at::Generator>) {
    return random_meta(self, 0, to);
  }
  static void impl(const at::Tensor& out, const RandomMeta& m, const at::Tensor&, int64_t,
                   std::optional<at::Generator> gen) {
    random_impl(out, m, gen);
  }
};

// --- bernoulli ---------------------------------------------------------------------

// self = (u < p) with p a number or a tensor broadcastable to self.
void bernoulli_into(const at::Tensor& self, const Operand& p, std::optional<at::Generator> gen) {
  if (self.numel() == 0) return;
  // Compare in f32 (f64 only for double tensors): a float p is off by at
  // most 2^-24, and f64 is slow on real TPUs.
  auto ct = compute_type(p.t.defined() ? p.t.scalar_type() : self.scalar_type());
  record::OpCall call("bernoulli_");
  call.attr(static_cast<int64_t>(ct)).attr(static_cast<int64_t>(p.t.defined()));
  add_rng_state(call, gen, self, self.numel() * words_per(ct));
  if (p.t.defined())
    call.input(p.t);
  else
    call.scalar(*p.s, ct);
  call.output(self);
  ElemType ft = to_elem(ct);
  Dims d = dims_of(self);
  call.run([&](Builder& b, const Values& in) {
    Value u = uniform01(b, in[0], in[1], d, ft);
    return Values{b.compare(u, b.broadcast_to(b.convert(in[2], ft), d), Direction::kLt)};
  });
}

struct BernoulliFloat {
  static constexpr const char* kName = "bernoulli";
  static OutMeta meta(const at::Tensor& self, double p, std::optional<at::Generator>) {
    TORCH_CHECK(0 <= p && p <= 1, "bernoulli_ expects p to be in [0, 1], but got p=", p);
    return fill_meta(self);
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor&, double p,
                   std::optional<at::Generator> gen) {
    bernoulli_into(out, c10::Scalar(p), gen);
  }
};

// p broadcast to the filled tensor's shape: a CPU p (not a 0-dim scalar) is
// moved over, as CUDA does; expand gives ATen's shape check and message.
at::Tensor probabilities_for(const at::Tensor& p, c10::IntArrayRef sizes, c10::Device device) {
  check_float(p, "bernoulli_tensor_cpu_p_");
  at::Tensor pe = p.dim() > 0 && p.is_cpu() ? p.to(device) : p;
  return p.dim() > 0 ? pe.expand(sizes) : pe;
}

// meta prepares p once (a CPU p is moved over there); impl draws with it.
struct BernoulliTensorMeta : OutMeta {
  at::Tensor p;
};
struct BernoulliTensor {
  static constexpr const char* kName = "bernoulli";
  static BernoulliTensorMeta meta(const at::Tensor& self, const at::Tensor& p, std::optional<at::Generator>) {
    BernoulliTensorMeta m;
    static_cast<OutMeta&>(m) = fill_meta(self);
    m.p = probabilities_for(p, self.sizes(), self.device());
    return m;
  }
  static void impl(const at::Tensor& out, const BernoulliTensorMeta& m, const at::Tensor&, const at::Tensor&,
                   std::optional<at::Generator> gen) {
    bernoulli_into(out, m.p, gen);
  }
};

// bernoulli(p): one draw per element of p, in p's dtype; no in-place form.
struct BernoulliOf {
  static constexpr const char* kName = "bernoulli";
  static OutMeta meta(const at::Tensor& p, std::optional<at::Generator>) {
    probabilities_for(p, p.sizes(), p.device());
    OutMeta m = fill_meta(p);
    m.out_dtype = OutDtype::kOwn;  // out= of any dtype takes the 0/1 draws, as CPU's does
    return m;
  }
  static void impl(const at::Tensor& out, const OutMeta&, const at::Tensor& p, std::optional<at::Generator> gen) {
    bernoulli_into(out, p, gen);
  }
};

// --- randperm ----------------------------------------------------------------------

at::Tensor& randperm_out(int64_t n, std::optional<at::Generator> gen, at::Tensor& out) {
  TORCH_CHECK(n >= 0, "n must be non-negative, got", n);
  auto t = out.scalar_type();
  TORCH_CHECK(n == 0 || n - 1 <= random_max(t), "n is too large for result tensor type: '", out.toString(), "'");
  at::native::resize_output(out, {n});
  if (n == 0) return out;
  // Sort the indices by random 64-bit keys (ties, ~n^2/2^65, keep order).
  record::OpCall call("randperm");
  add_rng_state(call, gen, out, 2 * n);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Dims d{n};
    Value keys = random_bits(b, in[0], in[1], d, ElemType::kU64);
    return Values{b.sort({keys, b.iota(d, 0, ElemType::kS64)}, 0, false)[1]};
  });
  return out;
}

// --- multinomial -------------------------------------------------------------------------

// `rows` x `num_samples` category indices drawn from probs' rows, from the
// philox state (seed, offset).
Value multinomial_lower(Builder& b, Value seed, Value offset, Value probs, ElemType e, int64_t rows, int64_t cats,
                        int64_t num_samples, bool replacement, const Dims& oshape) {
  Value p = b.reshape(b.convert(probs, e), {rows, cats});
  Dims ud = replacement ? Dims{rows, num_samples} : Dims{rows, cats};
  Value st = b.concatenate({b.reshape(b.bitcast_convert(seed, ElemType::kU64), {1}),
                            b.reshape(b.bitcast_convert(offset, ElemType::kU64), {1})},
                           0);
  Value bits = b.rng_bit_generator(st, ud, ElemType::kU32)[1];
  Value top = b.shr_logical(bits, b.constant(9, ElemType::kU32, ud));
  // Uniform in (0, 1): (k + 0.5) / 2^23, exact in f32.
  Value u = b.mul(b.add(b.convert(top, e), b.constant(0.5, e, ud)), b.constant(std::ldexp(1.0, -23), e, ud));
  Value res;
  if (replacement) {
    // Category = number of CDF entries <= u * total; zero-probability
    // categories have an empty interval and are never picked.
    Value cdf = cumsum(b, p, 1);
    Value total = b.slice(cdf, {0, cats - 1}, {rows, cats}, {1, 1});
    Value ut = b.mul(u, b.broadcast_in_dim(b.reshape(total, {rows}), ud, {0}));
    Dims d3{rows, num_samples, cats};
    Value le = b.compare(b.broadcast_in_dim(cdf, d3, {0, 2}), b.broadcast_in_dim(ut, d3, {0, 1}), Direction::kLe);
    Value cnt = b.reduce(b.convert(le, kS64), zero(b, kS64), {2}, BinaryOp::kAdd);
    // Rounding can put u * total at the very top: take the last positive category.
    Value pos = b.compare(p, zero(b, e, {rows, cats}), Direction::kGt);
    Value last = b.reduce(b.select(pos, b.iota({rows, cats}, 1, kS64), b.constant(-1, kS64, {rows, cats})),
                          lowest(b, kS64), {1}, BinaryOp::kMax);
    res = b.min(cnt, b.broadcast_in_dim(last, ud, {0}));
  } else {
    // Gumbel top-k: log p - log(-log u); zero-probability keys are -inf.
    Value gumbel = b.neg(b.log(b.neg(b.log(u))));
    Value key = b.add(b.log(p), gumbel);
    Values s = b.sort({key, b.iota(ud, 1, kS64)}, 1, true);
    res = b.slice(s[1], {0, 0}, {rows, num_samples}, {1, 1});
  }
  return b.reshape(res, oshape);
}

struct Multinomial {
  static constexpr const char* kName = "multinomial";
  static OutMeta meta(const at::Tensor& self, int64_t num_samples, bool replacement, std::optional<at::Generator>) {
    TORCH_CHECK(self.dim() > 0 && self.dim() <= 2, "prob_dist must be 1 or 2 dim");
    TORCH_CHECK(at::isFloatingType(self.scalar_type()),
                "multinomial only supports floating-point dtypes for input, got: ", self.scalar_type());
    TORCH_CHECK(num_samples > 0, "cannot sample n_sample <= 0 samples");
    int64_t cats = self.size(-1);
    TORCH_CHECK(replacement || num_samples <= cats,
                "cannot sample n_sample > prob_dist.size(-1) samples without "
                "replacement");
    TORCH_CHECK(cats <= (int64_t(1) << 24), "number of categories cannot exceed 2^24");
    std::vector<int64_t> oshape =
        self.dim() == 1 ? std::vector<int64_t>{num_samples} : std::vector<int64_t>{self.size(0), num_samples};
    return OutMeta{oshape, c10::kLong, self.device(), OutDtype::kOwn, false};
  }
  static void check_out(const at::Tensor& out, const OutMeta&, const at::Tensor&, int64_t, bool,
                        std::optional<at::Generator>) {
    TORCH_CHECK(out.scalar_type() == c10::kLong, "multinomial expects Long tensor out, got: ", out.scalar_type());
  }
  static void impl(const at::Tensor& out, const OutMeta& m, const at::Tensor& self, int64_t num_samples,
                   bool replacement, std::optional<at::Generator> gen) {
    int64_t rows = self.dim() == 1 ? 1 : self.size(0), cats = self.size(-1);
    if (out.numel() == 0) return;
    Dims oshape(m.sizes.begin(), m.sizes.end());
    ElemType e = self.scalar_type() == c10::kDouble ? ElemType::kF64 : ElemType::kF32;
    int64_t words = replacement ? rows * num_samples : rows * cats;
    TpuGeneratorImpl* g = get_generator(gen, self.device().index());
    uint64_t seed, offset;
    {
      std::lock_guard<std::mutex> lock(g->mutex_);
      seed = g->current_seed();
      offset = g->advance((words + 3) / 4 * 4);  // rng_state below records the same count
    }
    record::OpCall call("multinomial");
    call.attr(num_samples).attr(replacement);
    call.rng_state(g, seed, offset, (words + 3) / 4 * 4);
    call.input(self);
    call.output(out);
    call.run([&](Builder& b, const Values& in) {
      return Values{multinomial_lower(b, in[0], in[1], in[2], e, rows, cats, num_samples, replacement, oshape)};
    });
  }
};

// --- poisson -------------------------------------------------------------------------------
// Knuth's product method below rate 10, on a fixed 48 uniforms per element
// (the count of partial sums of log u above -rate; P(X >= 48) < 1e-17
// there), and Hörmann's transformed rejection (PTRS) from 10 up, on 16
// candidates per element, the first accepted kept (each is accepted with
// probability above 0.9, so all 16 fail with probability below 1e-16, when
// the last stands). CPU's check of negative or NaN rates needs a host read
// and is not done.
constexpr int64_t kKnuthDraws = 48, kPtrsCandidates = 16;

Value poisson_knuth(Builder& b, Value lam, Value u, ElemType ft) {
  const int64_t n = b.dims(lam)[0], K = kKnuthDraws;
  // log u, floored at -100 (below any rate this path takes): u == 0 would
  // give -inf, and -inf * 0 in the partial sums' product is NaN.
  Value logs = b.max(b.log(u), b.constant(-100, ft, {n, K}));
  Value upper =
      b.convert(b.compare(b.iota({K, K}, 0, ElemType::kS32), b.iota({K, K}, 1, ElemType::kS32), Direction::kLe), ft);
  Value sums = b.dot_general(logs, upper, {}, {}, {1}, {0}, ft, "HIGHEST");  // [n, K]: sum of the first j + 1
  Value above = b.compare(sums, b.broadcast_in_dim(b.neg(lam), {n, K}, {0}), Direction::kGt);
  return b.reduce(b.convert(above, ft), b.constant(0, ft), {1}, BinaryOp::kAdd);
}

Value poisson_ptrs(Builder& b, Value lam, Value u, Value v, ElemType ft) {
  const int64_t n = b.dims(lam)[0], C = kPtrsCandidates;
  const Dims d{n, C};
  auto c = [&](double x) { return b.constant(x, ft, d); };
  Value rate = b.broadcast_in_dim(lam, d, {0});
  Value slam = b.sqrt(rate), loglam = b.log(rate);
  Value bb = b.add(c(0.931), b.mul(c(2.53), slam));
  Value a = b.add(c(-0.059), b.mul(c(0.02483), bb));
  Value inv_alpha = b.add(c(1.1239), b.div(c(1.1328), b.sub(bb, c(3.4))));
  Value vr = b.sub(c(0.9277), b.div(c(3.6224), b.sub(bb, c(2))));
  Value uc = b.sub(u, c(0.5));
  Value us = b.sub(c(0.5), b.abs(uc));
  Value k = b.floor(b.add(b.mul(b.add(b.div(b.mul(c(2), a), us), bb), uc), b.add(rate, c(0.43))));
  Value quick = b.and_(b.compare(us, c(0.07), Direction::kGe), b.compare(v, vr, Direction::kLe));
  Value reject = b.or_(b.compare(k, c(0), Direction::kLt),
                       b.and_(b.compare(us, c(0.013), Direction::kLt), b.compare(v, us, Direction::kGt)));
  Value lhs = b.sub(b.add(b.log(v), b.log(inv_alpha)), b.log(b.add(b.div(a, b.mul(us, us)), bb)));
  Value rhs = b.sub(b.sub(b.mul(k, loglam), rate), b.lgamma(b.add(k, c(1))));
  Value ok = b.or_(quick, b.and_(b.not_(reject), b.compare(lhs, rhs, Direction::kLe)));
  Value idx = b.iota(d, 1, ElemType::kS32);
  Value first = b.reduce(b.select(ok, idx, b.constant(C - 1, ElemType::kS32, d)), b.constant(C - 1, ElemType::kS32),
                         {1}, BinaryOp::kMin);
  Value pick = b.compare(idx, b.broadcast_in_dim(first, d, {0}), Direction::kEq);
  return b.reduce(b.select(pick, k, c(0)), b.constant(0, ft), {1}, BinaryOp::kAdd);
}

at::Tensor poisson(const at::Tensor& rate, std::optional<at::Generator> gen) {
  TORCH_CHECK_NOT_IMPLEMENTED(at::isFloatingType(rate.scalar_type()), "\"poisson_tpu\" not implemented for '",
                              rate.scalar_type(), "'");
  at::Tensor out = empty_tpu(rate.sizes(), rate.scalar_type(), rate.device());
  const int64_t n = out.numel();
  if (n == 0) return out;
  auto ct = compute_type(rate.scalar_type());
  const ElemType ft = to_elem(ct);
  const int64_t draws = kKnuthDraws + 2 * kPtrsCandidates;
  record::OpCall call("poisson");
  call.attr(static_cast<int64_t>(ct));
  add_rng_state(call, gen, out, static_cast<uint64_t>(n * draws) * words_per(ct));
  call.input(rate);
  call.output(out);
  call.run([&](Builder& b, const Values& in) {
    Value lam = b.reshape(b.convert(in[2], ft), {n});
    Value u = uniform01(b, in[0], in[1], {n, draws}, ft);
    const int64_t K = kKnuthDraws, C = kPtrsCandidates;
    Value knuth = poisson_knuth(b, lam, b.slice(u, {0, 0}, {n, K}, {1, 1}), ft);
    Value ptrs = poisson_ptrs(b, lam, b.slice(u, {0, K}, {n, K + C}, {1, 1}),
                              b.slice(u, {0, K + C}, {n, K + 2 * C}, {1, 1}), ft);
    Value small = b.compare(lam, b.constant(10, ft, {n}), Direction::kLt);
    Value x = b.select(small, knuth, ptrs);
    x = b.select(b.compare(lam, b.constant(0, ft, {n}), Direction::kEq), b.constant(0, ft, {n}), x);
    return Values{b.convert(b.reshape(x, dims_of(out)), to_elem(out.scalar_type()))};
  });
  return out;
}

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  register_variants<Uniform>(m, "uniform");
  register_variants<NormalFill>(m, {"normal_functional", "normal_", "normal.out"});
  register_variants<NormalTensorFloat>(m, {"normal.Tensor_float", "", "normal.Tensor_float_out"});
  register_variants<NormalFloatTensor>(m, {"normal.float_Tensor", "", "normal.float_Tensor_out"});
  register_variants<NormalTensorTensor>(m, {"normal.Tensor_Tensor", "", "normal.Tensor_Tensor_out"});
  register_variants<LogNormal>(m, "log_normal");
  register_variants<Exponential>(m, "exponential");
  register_variants<Cauchy>(m, "cauchy");
  register_variants<Geometric>(m, "geometric");
  register_variants<RandomFill>(m, "random");
  register_variants<RandomFrom>(m, {"random.from", "random_.from", "random.from_out"});
  register_variants<RandomTo>(m, {"random.to", "random_.to", "random.to_out"});
  register_variants<BernoulliFloat>(m, {"bernoulli.p", "bernoulli_.float", "bernoulli.float_out"});
  register_variants<BernoulliTensor>(m, {"bernoulli.Tensor", "bernoulli_.Tensor", "bernoulli.Tensor_out"});
  register_variants<BernoulliOf>(m, {"bernoulli", "", "bernoulli.out"});
  m.impl("randperm.generator_out", randperm_out);
  register_variants<Multinomial>(m, {"multinomial", "", "multinomial.out"});
  m.impl("poisson", poisson);
}

}  // namespace
}  // namespace torch_tpu::ops
