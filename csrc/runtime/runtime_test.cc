// Runtime layer on XLA:CPU: plugin, client, transfers, compile, execute,
// serialise/deserialise, errors. TORCH_TPU_TEST_CPU_PLUGIN is set by CMake.
#include <gtest/gtest.h>

#include <cstdlib>

#include "runtime/client.h"
#include "runtime/device_spans.h"
#include "runtime/error.h"

namespace torch_tpu::runtime {
namespace {

const char kAdd[] = R"(module @m {
  func.func public @main(%a: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
    %0 = "stablehlo.add"(%a, %b) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
})";

Client& client() {
  static Client* c = [] {
    PluginCandidates cand;
    cand.cpu = TORCH_TPU_TEST_CPU_PLUGIN;
    return new Client(Plugin::load(choose_plugin(cand).path), 2);
  }();
  return *c;
}

TEST(Plugin, ChoosesCpuAndChecksVersion) {
  PluginCandidates cand;
  cand.cpu = TORCH_TPU_TEST_CPU_PLUGIN;
  auto choice = choose_plugin(cand);
  EXPECT_EQ(choice.kind, "cpu");
  Plugin& p = Plugin::load(choice.path);
  EXPECT_EQ(p.api_major(), 0);
  EXPECT_GE(p.api_minor(), 57);
  EXPECT_FALSE(p.identity().empty());
  // Loading twice returns the same plugin.
  EXPECT_EQ(&p, &Plugin::load(choice.path));
}

TEST(Plugin, MissingPluginSaysHowToFix) {
  PluginCandidates none;
  try {
    choose_plugin(none);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("pip install xla-cpu-pjrt"), std::string::npos);
  }
  EXPECT_THROW(Plugin::load("/nonexistent/plugin.so"), std::runtime_error);
  // A real .so without GetPjrtApi.
  EXPECT_THROW(Plugin::load("/lib/x86_64-linux-gnu/libm.so.6"), std::runtime_error);
}

TEST(Client, DevicesAndPlatform) {
  EXPECT_EQ(client().platform_name(), "cpu");
  ASSERT_EQ(client().devices().size(), 2u);
}

TEST(Client, CompileExecuteRoundTrip) {
  auto exe = client().compile(kAdd, CompileOptions{});
  ASSERT_EQ(exe->num_outputs(), 1u);
  float a[4] = {1, 2, 3, 4}, b[4] = {10, 20, 30, 40}, out[4] = {};
  auto ba = client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, 1);
  auto bb = client().buffer_from_host(b, PJRT_Buffer_Type_F32, {4}, 1);
  auto outs = exe->execute({ba->get(), bb->get()}, client().devices()[1].device);
  ASSERT_EQ(outs.size(), 1u);
  EXPECT_EQ(outs[0]->dims(), std::vector<int64_t>{4});
  EXPECT_EQ(outs[0]->element_type(), PJRT_Buffer_Type_F32);
  outs[0]->ready_event().await();
  outs[0]->to_host(out, sizeof(out));
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], a[i] + b[i]);
}

TEST(Client, SerializeDeserialize) {
  auto exe = client().compile(kAdd, CompileOptions{});
  std::string bytes = exe->serialize();
  ASSERT_FALSE(bytes.empty());
  auto exe2 = client().deserialize(bytes);
  float a[4] = {1, 1, 1, 1}, out[4] = {};
  auto ba = client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, 0);
  auto outs = exe2->execute({ba->get(), ba->get()}, client().devices()[0].device);
  outs[0]->to_host(out, sizeof(out));
  for (float v : out) EXPECT_EQ(v, 2.0f);
  EXPECT_THROW(client().deserialize("garbage"), PjrtError);
}

TEST(Client, BadProgramIsAnErrorNotAnAbort) {
  EXPECT_THROW(client().compile("module { this is not mlir", CompileOptions{}), PjrtError);
}

TEST(Event, OnReadyFires) {
  float a[4] = {1, 2, 3, 4};
  auto ba = client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, 0);
  std::atomic<int> fired{0};
  ba->ready_event().on_ready([&](const std::string& err) {
    EXPECT_TRUE(err.empty());
    fired = 1;
  });
  for (int i = 0; i < 1000 && !fired; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(fired.load(), 1);
}

TEST(DeviceSpans, RecordOnlyWhenOnAndOrderPerDevice) {
  auto exe = client().compile(kAdd, CompileOptions{});
  float a[4] = {1, 2, 3, 4};
  auto ba = client().buffer_from_host(a, PJRT_Buffer_Type_F32, {4}, 0);
  DeviceSpans& spans = DeviceSpans::get();
  auto launch = [&](const char* name) {
    const int64_t t = DeviceSpans::now_ns();
    auto outs = exe->execute({ba->get(), ba->get()}, client().devices()[0].device);
    if (spans.enabled()) spans.note_launch(name, 0, t, outs[0]->ready_event());
    return t;
  };
  launch("off");
  spans.set_enabled(true);
  const int64_t t1 = launch("first");
  const int64_t t2 = launch("second");
  spans.set_enabled(false);
  launch("off again");
  auto got = spans.take(5000);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].name, "first");
  EXPECT_EQ(got[1].name, "second");
  EXPECT_GE(got[0].start_ns, t1);
  EXPECT_GE(got[1].start_ns, t2);
  EXPECT_GE(got[1].start_ns, got[0].end_ns);  // one device runs them in order
  for (const auto& s : got) EXPECT_LE(s.start_ns, s.end_ns);
  EXPECT_TRUE(spans.take(0).empty());  // take() forgets
}

TEST(CompileOptions, MinimalBytesMatchTheKnownEncoding) {
  CompileOptions o;
  o.portable = false;
  EXPECT_EQ(o.serialize(), std::string("\x1a\x04\x20\x01\x28\x01", 6));
}

}  // namespace
}  // namespace torch_tpu::runtime
