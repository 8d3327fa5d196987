// Cross-replica collectives on XLA:CPU: one program, num_replicas = 4, run
// on four logical CPU devices of one client. Expected values are computed
// here from the inputs by hand, not by another lowering.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <stdexcept>

#include "ir/lib/collectives.h"
#include "runtime/client.h"

namespace torch_tpu::ir {
namespace {

constexpr int kReplicas = 4;

runtime::Client& client() {
  static auto* c = new runtime::Client(runtime::Plugin::load(TORCH_TPU_TEST_CPU_PLUGIN), kReplicas);
  return *c;
}

// Runs `g` (one f32 parameter of `n` elements) replicated: replica r gets
// in[r] and runs on device assignment[r]. Returns each replica's output.
std::vector<std::vector<float>> run(const Graph& g, const std::vector<std::vector<float>>& in, size_t out_n,
                                    std::vector<int64_t> assignment = {}) {
  runtime::CompileOptions o;
  o.num_replicas = static_cast<int64_t>(in.size());
  o.portable = false;
  o.device_assignment = assignment;
  if (assignment.empty())
    for (size_t r = 0; r < in.size(); ++r) assignment.push_back(static_cast<int64_t>(r));
  auto exe = client().compile(g.to_mlir(), o);
  std::vector<runtime::BufferPtr> keep;
  std::vector<std::vector<PJRT_Buffer*>> args;
  for (size_t r = 0; r < in.size(); ++r) {
    keep.push_back(client().buffer_from_host(in[r].data(), PJRT_Buffer_Type_F32, {static_cast<int64_t>(in[r].size())},
                                             static_cast<int>(assignment[r])));
    args.push_back({keep.back()->get()});
  }
  auto outs = exe->execute_replicated(args);
  std::vector<std::vector<float>> result;
  for (auto& o_r : outs) {
    std::vector<float> v(out_n);
    o_r[0]->to_host(v.data(), out_n * sizeof(float));
    result.push_back(v);
  }
  return result;
}

std::vector<std::vector<float>> inputs(size_t n) {
  std::vector<std::vector<float>> in(kReplicas, std::vector<float>(n));
  for (int r = 0; r < kReplicas; ++r)
    for (size_t i = 0; i < n; ++i) in[r][i] = static_cast<float>(10 * r + i) + 0.5f;
  return in;
}

Graph one_op(size_t n, const std::function<Value(Builder&, Value)>& f) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {static_cast<int64_t>(n)}});
  g.set_outputs({f(b, x)});
  return g;
}

TEST(Collectives, AllReduceSumAndMaxOverAllAndOverPairs) {
  auto in = inputs(3);
  auto sum =
      run(one_op(3, [](Builder& b, Value x) { return all_reduce(b, x, BinaryOp::kAdd, {{0, 1, 2, 3}}); }), in, 3);
  for (int r = 0; r < kReplicas; ++r)
    for (int i = 0; i < 3; ++i) EXPECT_FLOAT_EQ(sum[r][i], in[0][i] + in[1][i] + in[2][i] + in[3][i]);
  auto pairs =
      run(one_op(3, [](Builder& b, Value x) { return all_reduce(b, x, BinaryOp::kMax, {{0, 2}, {1, 3}}); }), in, 3);
  for (int i = 0; i < 3; ++i) {
    EXPECT_FLOAT_EQ(pairs[0][i], in[2][i]);
    EXPECT_FLOAT_EQ(pairs[2][i], in[2][i]);
    EXPECT_FLOAT_EQ(pairs[1][i], in[3][i]);
  }
}

TEST(Collectives, AllGatherConcatenatesInGroupOrder) {
  auto in = inputs(2);
  auto out = run(one_op(2, [](Builder& b, Value x) { return all_gather(b, x, 0, {{3, 2, 1, 0}}); }), in, 8);
  for (int r = 0; r < kReplicas; ++r)
    for (int k = 0; k < kReplicas; ++k)
      for (int i = 0; i < 2; ++i) EXPECT_FLOAT_EQ(out[r][2 * k + i], in[3 - k][i]);
}

TEST(Collectives, ReduceScatterKeepsEachReplicasPiece) {
  auto in = inputs(8);
  auto out = run(one_op(8, [](Builder& b, Value x) { return reduce_scatter(b, x, 0, BinaryOp::kAdd, {{0, 1, 2, 3}}); }),
                 in, 2);
  for (int r = 0; r < kReplicas; ++r)
    for (int i = 0; i < 2; ++i) {
      float want = 0;
      for (int s = 0; s < kReplicas; ++s) want += in[s][2 * r + i];
      EXPECT_FLOAT_EQ(out[r][i], want);
    }
}

TEST(Collectives, AllToAllTransposesPieces) {
  auto in = inputs(4);
  auto out = run(one_op(4, [](Builder& b, Value x) { return all_to_all(b, x, 0, 0, {{0, 1, 2, 3}}); }), in, 4);
  // Replica r receives piece r of every replica s, at position s.
  for (int r = 0; r < kReplicas; ++r)
    for (int s = 0; s < kReplicas; ++s) EXPECT_FLOAT_EQ(out[r][s], in[s][r]);
}

TEST(Collectives, PermuteSendsAlongPairsAndZeroesTheRest) {
  auto in = inputs(2);
  auto out =
      run(one_op(2, [](Builder& b, Value x) { return collective_permute(b, x, {{0, 1}, {1, 2}, {2, 0}}); }), in, 2);
  for (int i = 0; i < 2; ++i) {
    EXPECT_FLOAT_EQ(out[1][i], in[0][i]);
    EXPECT_FLOAT_EQ(out[2][i], in[1][i]);
    EXPECT_FLOAT_EQ(out[0][i], in[2][i]);
    EXPECT_FLOAT_EQ(out[3][i], 0.0f);
  }
}

TEST(Collectives, BroadcastIsBitExact) {
  auto in = inputs(3);
  in[2] = {-0.0f, std::nanf("7"), -3.25f};
  auto out = run(one_op(3, [](Builder& b, Value x) { return broadcast_from(b, x, 2, {{0, 1, 2, 3}}); }), in, 3);
  for (int r = 0; r < kReplicas; ++r) EXPECT_EQ(std::memcmp(out[r].data(), in[2].data(), 3 * sizeof(float)), 0);
}

TEST(Collectives, DeviceAssignmentMapsReplicasToDevices) {
  // Replica r runs on device 3 - r; its replica id, not the device, decides
  // its piece of the gather.
  auto in = inputs(1);
  auto out =
      run(one_op(1, [](Builder& b, Value x) { return all_gather(b, x, 0, {{0, 1, 2, 3}}); }), in, 4, {3, 2, 1, 0});
  for (int r = 0; r < kReplicas; ++r)
    for (int k = 0; k < kReplicas; ++k) EXPECT_FLOAT_EQ(out[r][k], in[k][0]);
}

TEST(Collectives, BadGroupsAndShapesAreErrorsBeforeXla) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {6}});
  EXPECT_THROW(all_reduce(b, x, BinaryOp::kAdd, {{0, 1}, {2}}), std::invalid_argument);
  EXPECT_THROW(all_reduce(b, x, BinaryOp::kAdd, {{0, 0}}), std::invalid_argument);
  EXPECT_THROW(reduce_scatter(b, x, 0, BinaryOp::kAdd, {{0, 1, 2, 3}}), std::invalid_argument);
  EXPECT_THROW(all_gather(b, x, 1, {{0, 1}}), std::invalid_argument);
  EXPECT_THROW(collective_permute(b, x, {{0, 1}, {2, 1}}), std::invalid_argument);
  EXPECT_THROW(broadcast_from(b, x, 2, {{0, 1}}), std::invalid_argument);
  EXPECT_EQ(render_groups({{0, 2}, {1, 3}}), "dense<[[0, 2], [1, 3]]> : tensor<2x2xi64>");
}

}  // namespace
}  // namespace torch_tpu::ir
