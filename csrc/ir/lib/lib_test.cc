// The IR helper library (ir/lib) and the typed op API: each helper is run on
// XLA:CPU and checked against values known independently (std::numeric_limits,
// hand-computed sums), not against other lowerings.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "ir/lib/constants.h"
#include "ir/lib/conv.h"
#include "ir/lib/indexing.h"
#include "ir/lib/math.h"
#include "runtime/client.h"

namespace torch_tpu::ir {
namespace {

runtime::Client& client() {
  static auto* c = new runtime::Client(runtime::Plugin::load(TORCH_TPU_TEST_CPU_PLUGIN), 1);
  return *c;
}

// Runs a graph without parameters and copies output `i` (n elements of T) to the host.
template <typename T>
std::vector<T> run(const Graph& g, size_t i, size_t n) {
  auto exe = client().compile(g.to_mlir(), runtime::CompileOptions{});
  auto outs = exe->execute({}, client().devices()[0].device);
  std::vector<T> out(n);
  outs[i]->to_host(out.data(), n * sizeof(T));
  return out;
}

Value f32(Builder& b, std::vector<float> v) {
  std::vector<Value> parts;
  for (float x : v) parts.push_back(b.constant(x, ElemType::kF32, {1}));
  return b.concatenate(parts, 0);
}

TEST(IrOps, NamesAndTypedMethodsAgree) {
  EXPECT_STREQ(mlir_name(UnaryOp::kExp), "stablehlo.exponential");
  EXPECT_STREQ(mlir_name(UnaryOp::kLgamma), "chlo.lgamma");
  EXPECT_STREQ(mlir_name(BinaryOp::kMax), "stablehlo.maximum");
  EXPECT_STREQ(mlir_name(Direction::kGe), "GE");
  // b.add(x, y) is b.binary(BinaryOp::kAdd, x, y): the same program.
  Graph g1, g2;
  Builder b1(g1), b2(g2);
  Value x1 = g1.param({ElemType::kF32, {2}}), x2 = g2.param({ElemType::kF32, {2}});
  g1.set_outputs({b1.exp(b1.add(x1, x1))});
  g2.set_outputs({b2.unary(UnaryOp::kExp, b2.binary(BinaryOp::kAdd, x2, x2))});
  EXPECT_EQ(g1.fingerprint(), g2.fingerprint());
  EXPECT_NE(g1.to_mlir().find("stablehlo.exponential"), std::string::npos);
}

TEST(IrLib, LowestAndHighestAreTheTypeLimits) {
  Graph g;
  Builder b(g);
  g.set_outputs({lowest(b, ElemType::kS64), highest(b, ElemType::kS64), lowest(b, ElemType::kS8),
                 highest(b, ElemType::kU8), lowest(b, ElemType::kF32), highest(b, ElemType::kU32)});
  EXPECT_EQ(run<int64_t>(g, 0, 1)[0], std::numeric_limits<int64_t>::min());
  EXPECT_EQ(run<int64_t>(g, 1, 1)[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ(run<int8_t>(g, 2, 1)[0], std::numeric_limits<int8_t>::min());
  EXPECT_EQ(run<uint8_t>(g, 3, 1)[0], std::numeric_limits<uint8_t>::max());
  EXPECT_EQ(run<float>(g, 4, 1)[0], -std::numeric_limits<float>::infinity());
  EXPECT_EQ(run<uint32_t>(g, 5, 1)[0], std::numeric_limits<uint32_t>::max());
}

TEST(IrLib, FullLikeZeroOne) {
  Graph g;
  Builder b(g);
  Value x = b.constant(0, ElemType::kS32, {3});
  Value f = full_like(b, 7, x);
  EXPECT_EQ(b.type(f), b.type(x));
  g.set_outputs({b.add(f, b.add(one(b, ElemType::kS32, {3}), zero(b, ElemType::kS32, {3})))});
  EXPECT_EQ(run<int32_t>(g, 0, 3), (std::vector<int32_t>{8, 8, 8}));
}

TEST(IrLib, ComputeTypeUpcastIsNan) {
  EXPECT_EQ(compute_type(ElemType::kBF16), ElemType::kF32);
  EXPECT_EQ(compute_type(ElemType::kF16), ElemType::kF32);
  EXPECT_EQ(compute_type(ElemType::kF64), ElemType::kF64);
  EXPECT_EQ(compute_type(ElemType::kS32), ElemType::kS32);
  Graph g;
  Builder b(g);
  Value x = f32(b, {1.0f, std::nanf(""), INFINITY});
  EXPECT_EQ(upcast(b, x).node, x.node);  // already f32: no conversion node
  EXPECT_EQ(b.elem(upcast(b, b.convert(x, ElemType::kBF16))), ElemType::kF32);
  g.set_outputs({b.convert(is_nan(b, x), ElemType::kS32)});
  EXPECT_EQ(run<int32_t>(g, 0, 3), (std::vector<int32_t>{0, 1, 0}));
}

TEST(IrLib, GatherAndScatterRows) {
  Graph g;
  Builder b(g);
  Value m = b.reshape(f32(b, {1, 2, 3, 4, 5, 6}), {3, 2});                     // rows [1,2] [3,4] [5,6]
  Value idx = b.iota({2}, 0, ElemType::kS32);                                  // [0, 1]
  Value rev = b.reverse(b.add(idx, b.constant(1, ElemType::kS32, {2})), {0});  // [2, 1]
  g.set_outputs({gather_rows(b, m, rev), scatter_rows(b, m, rev, gather_rows(b, m, rev), BinaryOp::kAdd),
                 scatter_rows(b, m, idx, zero(b, ElemType::kF32, {2, 2}), std::nullopt),
                 gather_along(b, m, 1, b.constant(1, ElemType::kS32, {1}))});
  EXPECT_EQ(run<float>(g, 0, 4), (std::vector<float>{5, 6, 3, 4}));
  EXPECT_EQ(run<float>(g, 1, 6), (std::vector<float>{1, 2, 6, 8, 10, 12}));
  EXPECT_EQ(run<float>(g, 2, 6), (std::vector<float>{0, 0, 0, 0, 5, 6}));
  EXPECT_EQ(run<float>(g, 3, 3), (std::vector<float>{2, 4, 6}));
}

TEST(IrLib, InclusiveScan) {
  Graph g;
  Builder b(g);
  Value x = b.reshape(f32(b, {1, 3, 2, 4, -1, 5}), {2, 3});
  g.set_outputs({inclusive_scan(b, x, 1, zero(b, ElemType::kF32), BinaryOp::kAdd),
                 inclusive_scan(b, x, 0, lowest(b, ElemType::kF32), BinaryOp::kMax)});
  EXPECT_EQ(run<float>(g, 0, 6), (std::vector<float>{1, 4, 6, 4, 3, 8}));
  EXPECT_EQ(run<float>(g, 1, 6), (std::vector<float>{1, 3, 2, 4, 3, 5}));
}

TEST(IrLib, ConvPrefersDotOnlyWhenTheKernelIsWiderThanTheInput) {
  EXPECT_TRUE(conv_prefers_dot({2, 2}, {3, 3}, 1, 1));
  EXPECT_TRUE(conv_prefers_dot({1}, {3}, 1, 1));
  EXPECT_FALSE(conv_prefers_dot({8, 8}, {3, 3}, 1, 1));
  EXPECT_FALSE(conv_prefers_dot({3, 3}, {3, 3}, 1, 1));
  EXPECT_FALSE(conv_prefers_dot({2, 2}, {3, 3}, 2, 1));  // grouped: XLA keeps those canonical
  EXPECT_FALSE(conv_prefers_dot({2, 2}, {3, 3}, 1, 2));
  EXPECT_FALSE(conv_prefers_dot({0, 2}, {3, 3}, 1, 1));
}

TEST(IrLib, ConvGeneralSmallInputMatchesHandComputed) {
  // x = [[1, 2], [3, 4]], k = [[1, 2, 3], [4, 5, 6], [7, 8, 9]], padding 1:
  // out[i][j] = sum over the 3x3 window of the zero-padded x at (i, j).
  Graph g;
  Builder b(g);
  Value x = b.reshape(f32(b, {1, 2, 3, 4}), {1, 1, 2, 2});
  Value k = b.reshape(f32(b, {1, 2, 3, 4, 5, 6, 7, 8, 9}), {1, 1, 3, 3});
  Value one = b.reshape(f32(b, {2}), {1, 1, 1, 1});
  const ConvPadding pad{{1, 1}, {1, 1}};
  g.set_outputs({conv_general(b, x, k, "bf01", "oi01", "bf01", {1, 1}, pad, {1, 1}, {1, 1}, 1, 1, ElemType::kF32),
                 conv_general(b, x, k, "bf01", "oi01", "bf01", {2, 2}, pad, {1, 1}, {1, 1}, 1, 1, ElemType::kF32),
                 // 1x1 input: only the centre tap reads it.
                 conv_general(b, one, k, "bf01", "oi01", "bf01", {1, 1}, pad, {1, 1}, {1, 1}, 1, 1, ElemType::kF32),
                 // Same as the first, with the operands given as [spatial..., f, b] and [i, o, spatial...].
                 conv_general(b, b.transpose(x, {2, 3, 1, 0}), b.transpose(k, {1, 0, 2, 3}), "01fb", "io01", "fb01",
                              {1, 1}, pad, {1, 1}, {1, 1}, 1, 1, ElemType::kF32)});
  EXPECT_EQ(run<float>(g, 0, 4), (std::vector<float>{77, 67, 47, 37}));
  EXPECT_EQ(run<float>(g, 1, 1), (std::vector<float>{77}));
  EXPECT_EQ(run<float>(g, 2, 1), (std::vector<float>{10}));
  EXPECT_EQ(run<float>(g, 3, 4), (std::vector<float>{77, 67, 47, 37}));
  // The dot form leaves no convolution in the program.
  EXPECT_EQ(g.to_mlir().find("stablehlo.convolution"), std::string::npos);
}

}  // namespace
}  // namespace torch_tpu::ir
