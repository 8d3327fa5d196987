// IR: emitted StableHLO compiles and computes the right values on XLA:CPU;
// fingerprints are structural; invalid shapes are rejected before XLA.
#include <gtest/gtest.h>

#include <cmath>

#include "ir/builder.h"
#include "ir/shardy.h"
#include "ir/spmd.h"
#include "runtime/client.h"

namespace torch_tpu::ir {
namespace {

runtime::Client& client() {
  static auto* c = new runtime::Client(runtime::Plugin::load(TORCH_TPU_TEST_CPU_PLUGIN), 1);
  return *c;
}

std::vector<float> run_f32(const Graph& g, const std::vector<std::vector<float>>& ins,
                           const std::vector<std::vector<int64_t>>& shapes, size_t out_n) {
  auto exe = client().compile(g.to_mlir(), runtime::CompileOptions{});
  std::vector<runtime::BufferPtr> bufs;
  std::vector<PJRT_Buffer*> args;
  for (size_t i = 0; i < ins.size(); ++i) {
    bufs.push_back(client().buffer_from_host(ins[i].data(), PJRT_Buffer_Type_F32, shapes[i], 0));
    args.push_back(bufs.back()->get());
  }
  auto outs = exe->execute(args, client().devices()[0].device);
  std::vector<float> out(out_n);
  outs[0]->to_host(out.data(), out_n * sizeof(float));
  return out;
}

TEST(Ir, CallsAnAddedFunctionDefinedOnce) {
  // A kernel written elsewhere (JAX) arrives as func.func text: calls name
  // it, and the module defines it once however often it was added.
  const std::string fn =
      "  func.func private @k_main(%a: tensor<3xf32>) -> tensor<3xf32> {\n"
      "    %0 = stablehlo.multiply %a, %a : tensor<3xf32>\n"
      "    return %0 : tensor<3xf32>\n"
      "  }";
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {3}});
  EXPECT_THROW(b.call("k_main", {x}, {{ElemType::kF32, {3}}}), std::invalid_argument);
  uint64_t before = g.fingerprint();
  g.add_function("k_main", fn);
  g.add_function("k_main", fn);  // once
  EXPECT_NE(g.fingerprint(), before);
  Value sq = b.call("k_main", {x}, {{ElemType::kF32, {3}}})[0];
  g.set_outputs({b.add(sq, x)});
  std::string text = g.to_mlir();
  EXPECT_EQ(text.find("@k_main("), text.rfind("@k_main("));
  EXPECT_EQ(run_f32(g, {{1, 2, 3}}, {{3}}, 3), (std::vector<float>{2, 6, 12}));
}

TEST(Ir, MatmulReduceBroadcast) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {2, 3}});
  Value w = g.param({ElemType::kF32, {3, 2}});
  Value y = b.dot_general(x, w, {}, {}, {1}, {0}, ElemType::kF32);
  Value s = b.reduce(y, b.constant(0, ElemType::kF32), {1}, BinaryOp::kAdd);  // [2]
  Value bs = b.broadcast_to(s, {2, 2});
  g.set_outputs({b.add(y, bs)});
  auto out = run_f32(g, {{1, 2, 3, 4, 5, 6}, {1, 0, 0, 1, 1, 1}}, {{2, 3}, {3, 2}}, 4);
  // y = [[4,5],[10,11]], row sums [9,21] broadcast numpy-style along the last dim
  EXPECT_EQ(out, (std::vector<float>{13, 26, 19, 32}));
}

// A donated parameter is marked on the SPMD entry point only, and an alias
// between values of different layouts is refused before XLA sees it.
TEST(Ir, SpmdModuleDonatesOnItsEntryPoint) {
  Graph g;
  Builder b(g);
  Value w = g.param({ElemType::kF32, {8}});
  Value x = g.param({ElemType::kF32, {8}});
  g.set_outputs({b.add(w, x)});
  g.alias(0, 0);
  const std::string split = "{devices=[2]<=[2]}";
  std::string text = spmd_module(g, {{{2, 4}, split}, {{8}, "{replicated}"}}, {{{2, 4}, split}}, 2);
  const size_t main_at = text.find("@main(");
  const size_t body_at = text.find("@spmd_body(");
  ASSERT_NE(main_at, std::string::npos);
  ASSERT_NE(body_at, std::string::npos);
  const std::string main_line = text.substr(main_at, text.find('\n', main_at) - main_at);
  const std::string body_line = text.substr(body_at, text.find('\n', body_at) - body_at);
  EXPECT_NE(main_line.find("%a0: tensor<2x4xf32> {mhlo.sharding = \"" + split + "\", tf.aliasing_output = 0 : i32}"),
            std::string::npos)
      << main_line;
  EXPECT_EQ(body_line.find("aliasing"), std::string::npos) << body_line;
  EXPECT_THROW(spmd_module(g, {{{2, 4}, split}, {{8}, "{replicated}"}}, {{{2, 4}, "{replicated}"}}, 2),
               std::invalid_argument);
}

// GSPMD tile layouts over a 2 x 2 and a 2 x 2 x 2 mesh of partitions, in
// Shardy's axis terms; a device order no axis assignment gives has none.
TEST(Ir, ShardyFormOfTileLayouts) {
  EXPECT_EQ(shardy_meshes(8), (std::vector<std::vector<int64_t>>{{2, 2, 2}}));
  EXPECT_EQ(shardy_meshes(6), (std::vector<std::vector<int64_t>>{{2, 3}, {3, 2}}));
  EXPECT_EQ(shardy_mesh_text({2, 2}), "sdy.mesh @mesh = <[\"a0\"=2, \"a1\"=2]>");
  const std::vector<int64_t> m4{2, 2};
  auto form = [](const std::vector<int64_t>& axes, TileLayout l, size_t rank) {
    return shardy_sharding(axes, l, rank).value_or("none");
  };
  EXPECT_EQ(form(m4, {}, 2), "#sdy.sharding<@mesh, [{}, {}]>");
  EXPECT_EQ(form(m4, {}, 0), "#sdy.sharding<@mesh, []>");
  EXPECT_EQ(form(m4, {{2, 1}, 2, {0, 1, 2, 3}}, 2), "#sdy.sharding<@mesh, [{\"a0\"}, {}]>");
  EXPECT_EQ(form(m4, {{2, 1}, 2, {0, 2, 1, 3}}, 2), "#sdy.sharding<@mesh, [{\"a1\"}, {}]>");
  EXPECT_EQ(form(m4, {{1, 2}, 2, {0, 2, 1, 3}}, 2), "#sdy.sharding<@mesh, [{}, {\"a1\"}]>");
  EXPECT_EQ(form(m4, {{2, 2}, 1, {0, 2, 1, 3}}, 2), "#sdy.sharding<@mesh, [{\"a1\"}, {\"a0\"}]>");
  EXPECT_EQ(form(m4, {{4}, 1, {0, 1, 2, 3}}, 1), "#sdy.sharding<@mesh, [{\"a0\", \"a1\"}]>");
  EXPECT_EQ(form(m4, {{4}, 1, {0, 2, 1, 3}}, 1), "#sdy.sharding<@mesh, [{\"a1\", \"a0\"}]>");
  EXPECT_EQ(form(m4, {{4}, 1, {0, 3, 1, 2}}, 1), "none");
  EXPECT_EQ(form(m4, {{4}, 1, {0, 1, 2}}, 1), "none");  // not every partition
  // (4, 2) data x model over 8: rows on data, columns on model.
  EXPECT_EQ(form({2, 2, 2}, {{4, 2}, 1, {0, 1, 2, 3, 4, 5, 6, 7}}, 2),
            "#sdy.sharding<@mesh, [{\"a0\", \"a1\"}, {\"a2\"}]>");
}

// A dot of transpose(w) reads w itself (its dimension numbers mapped), with
// the same values; a transpose that would reorder the result stays.
TEST(Ir, DotReadsThroughATranspose) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {1, 3}});  // one row: a dot of few rows is swapped (below)
  Value w = g.param({ElemType::kF32, {2, 3}});  // [out, in], as a Linear's weight
  Value y = b.dot_general(x, b.transpose(w, {1, 0}), {}, {}, {1}, {0}, ElemType::kF32);  // x @ w.T
  EXPECT_EQ(g.nodes()[y.node].operands[1].node, w.node);
  EXPECT_EQ(g.type(y).dims, (Dims{1, 2}));
  g.set_outputs({y});
  EXPECT_NE(g.to_mlir().find("rhs_contracting_dimensions = [1]"), std::string::npos) << g.to_mlir();
  auto out = run_f32(g, {{1, 2, 3}, {1, 0, 1, 0, 1, 0}}, {{1, 3}, {2, 3}}, 2);
  EXPECT_EQ(out, (std::vector<float>{4, 2}));  // [[1+3, 2]]

  Graph g2;
  Builder b2(g2);
  Value a = g2.param({ElemType::kF32, {2, 3, 4}});
  Value t = b2.transpose(a, {2, 1, 0});  // [4, 3, 2]: its two free dims come out in w's reverse order
  Value v = g2.param({ElemType::kF32, {3}});
  Value z = b2.dot_general(t, v, {}, {}, {1}, {0}, ElemType::kF32);
  EXPECT_EQ(g2.nodes()[z.node].operands[0].node, t.node);
  EXPECT_EQ(g2.type(z).dims, (Dims{4, 2}));
}

// x @ w.T over 2 to 256 rows runs as (w @ x.T).T, the transposes held by
// optimization barriers (XLA:CPU's fast form); the values are x @ w.T's.
TEST(Ir, DotOfFewRowsRunsSwapped) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {2, 3}});
  Value w = g.param({ElemType::kF32, {2, 3}});
  Value y = b.dot_general(x, w, {}, {}, {1}, {1}, ElemType::kF32);
  EXPECT_EQ(g.type(y).dims, (Dims{2, 2}));
  g.set_outputs({y});
  EXPECT_NE(g.to_mlir().find("stablehlo.optimization_barrier"), std::string::npos) << g.to_mlir();
  auto out = run_f32(g, {{1, 2, 3, 4, 5, 6}, {1, 0, 1, 0, 1, 0}}, {{2, 3}, {2, 3}}, 4);
  EXPECT_EQ(out, (std::vector<float>{4, 2, 10, 5}));  // [[1+3, 2], [4+6, 5]]
}

TEST(Ir, GatherScatterSortIotaCompareSelect) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {5}});
  Value idx = b.reshape(b.iota({3}, 0, ElemType::kS32), {3, 1});       // [0,1,2]
  Value gat = b.gather(x, idx, {}, {0}, {0}, 1, {1}, {3});             // x[0:3]
  Value sc = b.scatter(x, idx, gat, {}, {0}, {0}, 1, BinaryOp::kAdd);  // x[0:3] doubled
  Value sorted = b.sort({sc}, 0, /*descending=*/true)[0];
  Value zero = b.constant(0, ElemType::kF32, {5});
  Value pos = b.compare(sorted, zero, Direction::kGt);
  g.set_outputs({b.select(pos, sorted, zero)});
  auto out = run_f32(g, {{3, -1, 2, 5, -4}}, {{5}}, 5);
  // scatter: [6,-2,4,5,-4]; sorted desc: [6,5,4,-2,-4]; relu: [6,5,4,0,0]
  EXPECT_EQ(out, (std::vector<float>{6, 5, 4, 0, 0}));
}

TEST(Ir, SliceTransposePadConcatReduceWindow) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {2, 3}});
  Value t = b.transpose(x, {1, 0});                                           // [3,2]
  Value s = b.slice(t, {1, 0}, {3, 2}, {1, 1});                               // rows 1..2 -> [2,2]
  Value p = b.pad(s, b.constant(0, ElemType::kF32), {0, 0}, {0, 1}, {0, 0});  // [2,3]
  Value c = b.concatenate({p, x}, 0);                                         // [4,3]
  Value m = b.reduce_window(c, b.constant(-1e30, ElemType::kF32), {2, 1}, {2, 1}, {1, 1}, {1, 1}, {{0, 0}, {0, 0}},
                            BinaryOp::kMax);  // [2,3]
  g.set_outputs({m});
  auto out = run_f32(g, {{1, 2, 3, 4, 5, 6}}, {{2, 3}}, 6);
  // t=[[1,4],[2,5],[3,6]] s=[[2,5],[3,6]] p=[[2,5,0],[3,6,0]]
  // c rows: [2,5,0],[3,6,0],[1,2,3],[4,5,6] -> max pairs: [3,6,0],[4,5,6]
  EXPECT_EQ(out, (std::vector<float>{3, 6, 0, 4, 5, 6}));
}

TEST(Ir, ConstantsExactForSpecialValues) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {3}});
  Value c = b.concatenate({b.constant(INFINITY, ElemType::kF32, {1}), b.constant(-0.1, ElemType::kF32, {1}),
                           b.convert(b.constant(0.5, ElemType::kBF16, {1}), ElemType::kF32)},
                          0);
  g.set_outputs({b.add(x, c)});
  auto out = run_f32(g, {{0, 0, 0}}, {{3}}, 3);
  EXPECT_TRUE(std::isinf(out[0]));
  EXPECT_EQ(out[1], -0.1f);
  EXPECT_EQ(out[2], 0.5f);
}

TEST(Ir, RngBitGenerator) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {4}});
  Value state = b.constant(7, ElemType::kU64, {2});
  Value bits = b.rng_bit_generator(state, {4}, ElemType::kU32)[1];
  Value f = b.convert(b.shr_logical(bits, b.constant(8, ElemType::kU32, {4})), ElemType::kF32);
  g.set_outputs({b.add(x, f)});
  auto out = run_f32(g, {{0, 0, 0, 0}}, {{4}}, 4);
  EXPECT_NE(out[0], out[1]);
}

TEST(Ir, WhileLoopCarriesValues) {
  // x <- x * 2 for i in [0, 3): the loop count is carried, not captured.
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {3}});
  Value i0 = b.constant(0, ElemType::kS32);
  auto cond = b.loop_region({i0, x});
  {
    Builder c(*cond);
    Value i = Value{cond->params()[0], 0};
    cond->set_outputs({c.compare(i, c.constant(3, ElemType::kS32), Direction::kLt)});
  }
  auto body = b.loop_region({i0, x});
  {
    Builder c(*body);
    Value i = Value{body->params()[0], 0}, v = Value{body->params()[1], 0};
    body->set_outputs({c.add(i, c.constant(1, ElemType::kS32)), c.mul(v, c.constant(2, ElemType::kF32, {3}))});
  }
  auto outs = b.while_loop({i0, x}, cond, body);
  g.set_outputs({outs[1]});
  EXPECT_EQ(run_f32(g, {{1, 2, 3}}, {{3}}, 3), (std::vector<float>{8, 16, 24}));

  // A body returning the wrong types is rejected before XLA sees it.
  auto bad = b.loop_region({i0, x});
  bad->set_outputs({Value{bad->params()[1], 0}, Value{bad->params()[0], 0}});
  EXPECT_THROW(b.while_loop({i0, x}, cond, bad), std::invalid_argument);
}

TEST(Ir, FingerprintIsStructural) {
  auto build = [](int64_t n, UnaryOp op) {
    Graph g;
    Builder b(g);
    Value x = g.param({ElemType::kF32, {n}});
    g.set_outputs({b.unary(op, x)});
    return g.fingerprint();
  };
  EXPECT_EQ(build(4, UnaryOp::kExp), build(4, UnaryOp::kExp));
  EXPECT_NE(build(4, UnaryOp::kExp), build(5, UnaryOp::kExp));
  EXPECT_NE(build(4, UnaryOp::kExp), build(4, UnaryOp::kLog));
}

TEST(Ir, InvalidShapesThrowBeforeXla) {
  Graph g;
  Builder b(g);
  Value x = g.param({ElemType::kF32, {2, 3}});
  Value y = g.param({ElemType::kF32, {3, 3}});
  EXPECT_THROW(b.add(x, y), std::invalid_argument);
  EXPECT_THROW(b.reshape(x, {4}), std::invalid_argument);
  EXPECT_THROW(b.dot_general(x, x, {}, {}, {1}, {0}, ElemType::kF32), std::invalid_argument);
  EXPECT_THROW(b.slice(x, {0, 0}, {3, 3}, {1, 1}), std::invalid_argument);
}

}  // namespace
}  // namespace torch_tpu::ir
