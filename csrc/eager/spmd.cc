#include "eager/spmd.h"

#include <c10/util/Exception.h>

#include <mutex>
#include <unordered_map>

#include "aten/device.h"
#include "compile/metrics.h"
#include "ir/shardy.h"
#include "eager/fused_driver.h"
#include "record/driver.h"
#include "record/op_call.h"
#include "runtime/launch_gate.h"

namespace torch_tpu::eager {
namespace {

std::string devices_text(const std::vector<int>& d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? ", " : "") + std::to_string(d[i]);
  return s + "]";
}

// Guards the two below.
std::mutex& programs_mu() {
  static auto* mu = new std::mutex();
  return *mu;
}
std::string& last_program() {
  static auto* p = new std::string();
  return *p;
}

// The partitioner's result shardings, once per executable. Entries are
// dropped with their executable (the memory tier may evict it, and a new
// one can take its address).
std::vector<runtime::Sharding> output_shardings(const std::shared_ptr<runtime::Executable>& exe, int64_t n) {
  struct Known {
    std::weak_ptr<runtime::Executable> exe;
    std::vector<runtime::Sharding> shardings;
  };
  static auto* known = new std::unordered_map<const runtime::Executable*, Known>();
  std::lock_guard<std::mutex> lock(programs_mu());
  auto it = known->find(exe.get());
  if (it != known->end() && it->second.exe.lock() == exe) return it->second.shardings;
  if (known->size() > 1024) std::erase_if(*known, [](const auto& kv) { return kv.second.exe.expired(); });
  std::string format;
  std::string proto = exe->optimized_program(&format);
  auto s = runtime::module_output_shardings(proto, n, format == "hlo_with_config");
  last_program() = std::move(proto);
  (*known)[exe.get()] = Known{exe, s};
  return s;
}

// The program a graph key was last resolved to through its text (the
// memory tier is keyed by text for SPMD programs); `prog` records one.
ProgramPtr same_text(const CacheKey& key, ProgramPtr prog = nullptr) {
  static auto* seen = new std::unordered_map<CacheKey, std::weak_ptr<CompiledProgram>, CacheKeyHash>();
  std::lock_guard<std::mutex> lock(programs_mu());
  if (prog) {
    if (seen->size() > 4096) seen->clear();
    (*seen)[key] = prog;
    return prog;
  }
  auto it = seen->find(key);
  return it == seen->end() ? nullptr : it->second.lock();
}

// TORCH_TPU_SPMD_SHARDY=0 writes GSPMD's shardings instead of Shardy's.
bool shardy_wanted() {
  static const bool on = [] {
    const char* v = std::getenv("TORCH_TPU_SPMD_SHARDY");
    return !(v && std::string_view(v) == "0");
  }();
  return on;
}

ir::TileLayout layout_of(const runtime::Sharding& s) { return ir::TileLayout{s.tiles, s.replicas, s.devices}; }

// The plan's values in Shardy's form, on the first mesh of the partitions
// that expresses every layout: sets `mesh` and returns the values, or
// returns false (the GSPMD text is used).
bool shardy_form(const SpmdPlan& plan, std::vector<ir::SpmdValue>& params, std::vector<ir::SpmdValue>& results,
                 std::string& mesh) {
  if (!shardy_wanted()) return false;
  // A pinned result carries its parameter's HLO text; its layout is that one.
  std::unordered_map<std::string, ir::TileLayout> by_text;
  by_text["{replicated}"] = ir::TileLayout{};
  for (const auto& a : plan.args)
    if (a.sharded) by_text[a.sharding] = layout_of(a.sharded->sharding);
  for (const auto& axes : ir::shardy_meshes(static_cast<int64_t>(plan.devices.size()))) {
    params = plan.params();
    results = plan.results;
    bool ok = true;
    for (size_t j = 0; j < params.size() && ok; ++j) {
      auto t = ir::shardy_sharding(axes, by_text.at(plan.args[j].sharding), params[j].dims.size());
      ok = t.has_value();
      if (ok) params[j].sharding = *t;
    }
    for (size_t k = 0; k < results.size() && ok; ++k) {
      if (results[k].sharding.empty()) continue;  // left to the partitioner
      auto it = by_text.find(results[k].sharding);
      auto t = it == by_text.end() ? std::nullopt : ir::shardy_sharding(axes, it->second, results[k].dims.size());
      ok = t.has_value();
      if (ok) results[k].sharding = *t;
    }
    if (ok) {
      mesh = ir::shardy_mesh_text(axes);
      return true;
    }
  }
  return false;
}

}  // namespace

std::string last_spmd_program() {
  std::lock_guard<std::mutex> lock(programs_mu());
  return last_program();
}

bool SpmdPlan::matches(size_t j, const ShardedPtr& v) const {
  const Arg& a = args[j];
  if (!a.sharded || !v) return !a.sharded && !v;
  return v->devices == devices && v->dims == a.sharded->dims && v->sharding == a.sharded->sharding;
}

std::vector<ir::SpmdValue> SpmdPlan::params() const {
  std::vector<ir::SpmdValue> out;
  for (const auto& a : args) out.push_back(ir::SpmdValue{a.dims, a.sharding});
  return out;
}

std::vector<int> spmd_mesh(const std::vector<ShardedPtr>& sharded) {
  std::vector<int> mesh;
  for (const auto& v : sharded) {
    if (!v) continue;
    if (mesh.empty()) {
      mesh = v->devices;
      continue;
    }
    TORCH_CHECK(v->devices == mesh, "tpu: an SPMD program reads tensors sharded over different meshes (devices ",
                devices_text(mesh), " and ", devices_text(v->devices),
                "); reshard one of them with torch_tpu.spmd.mark_sharding");
  }
  return mesh;
}

void spmd_layout(SpmdPlan& plan, const ir::Graph& g, const std::vector<ShardedPtr>& sharded,
                 const std::vector<int>& pinned_param, const std::vector<std::vector<int64_t>>* shapes) {
  const auto& ps = g.params();
  plan.args.clear();
  plan.params_elem.clear();
  for (int32_t p : ps) plan.params_elem.push_back(g.type(ir::Value{p, 0}).elem);
  for (size_t j = 0; j < ps.size(); ++j) {
    SpmdPlan::Arg a;
    // The layout alone: holding the value would keep its blocks alive (and
    // from being donated) for as long as the plan lives.
    a.sharded = sharded[j] ? StorageSlot::layout_only(sharded[j]) : nullptr;
    if (a.sharded) {
      a.dims = a.sharded->dims;
      a.sharding = a.sharded->sharding.hlo();
    } else {
      a.dims = g.type(ir::Value{ps[j], 0}).dims;
      a.sharding = "{replicated}";
    }
    plan.args.push_back(std::move(a));
  }
  plan.results.clear();
  for (size_t k = 0; k < g.outputs().size(); ++k) {
    ir::SpmdValue r;
    r.dims = g.type(g.outputs()[k]).dims;
    // A result written into a parameter's storage keeps that parameter's
    // layout (replicated ones too): updated weights and optimizer state stay
    // where they were, as JAX's out_shardings = in_shardings keeps them.
    int j = pinned_param[k];
    if (j >= 0) {
      r.dims = plan.args[j].dims;
      r.sharding = plan.args[j].sharding;
    } else if (shapes && !(*shapes)[k].empty()) {
      r.dims = (*shapes)[k];
    }
    plan.results.push_back(std::move(r));
  }
}

void spmd_compile(SpmdPlan& plan, const ir::Graph& g, const CacheKey& key, int64_t ops) {
  const auto n = static_cast<int64_t>(plan.devices.size());
  KeyBuilder kb;
  kb.add(key.hi);
  kb.add(key.lo);
  kb.add(std::string_view("spmd"));
  for (int d : plan.devices) kb.add(static_cast<uint64_t>(d));
  for (const auto& a : plan.args) {
    for (int64_t d : a.dims) kb.add(static_cast<uint64_t>(d));
    kb.add(std::string_view(a.sharding));
  }
  for (const auto& r : plan.results) {
    for (int64_t d : r.dims) kb.add(static_cast<uint64_t>(d));
    kb.add(std::string_view(r.sharding));
  }
  for (auto [j, r] : plan.aliases) kb.add((static_cast<uint64_t>(j) << 32) | static_cast<uint32_t>(r));
  const CacheKey k = kb.finish();
  ProgramPtr prog = ExecutableCache::get().lookup(k);
  if (prog) {
    bump(metrics().cache_hits);
  } else if ((prog = same_text(k)) != nullptr) {
    bump(metrics().cache_hits);
  } else {
    // The recorded calls' keys can differ where the program does not (an
    // optimizer's first step records its state's creation; the text is the
    // same as the later steps'): on a miss, the text decides.
    std::vector<ir::SpmdValue> params, results;
    std::string mesh;
    std::string text = shardy_form(plan, params, results, mesh) ? ir::spmd_module(g, params, results, n, mesh)
                                                                : ir::spmd_module(g, plan.params(), plan.results, n);
    KeyBuilder tb;
    tb.add(std::string_view("spmd text"));
    tb.add(std::string_view(text));
    for (int d : plan.devices) tb.add(static_cast<uint64_t>(d));
    const CacheKey tk = tb.finish();
    prog = ExecutableCache::get().lookup(tk);
    if (prog) {
      bump(metrics().cache_hits);
    } else {
      bump(metrics().cache_misses);
      std::vector<int64_t> ids;
      for (int d : plan.devices) ids.push_back(client().devices().at(d).id);
      prog = ExecutableCache::get().compile_and_insert(
          client(), tk, "spmd[" + std::to_string(ops) + " ops]", [&]() { return text; }, false, &ids, /*spmd=*/true);
    }
    same_text(k, prog);
  }
  plan.prog = prog;
  plan.out_shardings = output_shardings(prog->exe, n);
  TORCH_CHECK(plan.out_shardings.size() == plan.results.size(), "tpu: the SPMD program reports ",
              plan.out_shardings.size(), " result shardings for ", plan.results.size(), " results");
}

namespace {

// Whether a launch may consume parameter j's value, read from storage `s`:
// its sharded value (held by `s` and the caller's `extra` references; each
// shard by the value alone, or also by `s` for a replicated value's own
// block), or its whole buffer and the replicated copies made of it (held by
// `s`, the caller's references and plan.copies).
bool consumable(const SpmdPlan& plan, size_t j, const StorageSlot* s, const ShardedPtr& v,
                const runtime::BufferPtr& whole, int home, long extra) {
  if (!s) return false;
  if (v) {
    if (s->sharded != v || v.use_count() != 1 + extra) return false;
    for (const auto& b : v->shards)
      if (!b || b.use_count() != 1 + static_cast<long>(b == s->buffer)) return false;
    return true;
  }
  if (!whole || s->buffer != whole || j >= plan.copies.size()) return false;
  long held = 1 + extra;
  for (size_t d = 0; d < plan.devices.size(); ++d) {
    if (plan.devices[d] == home)
      ++held;
    else if (plan.copies[j].per_device[d].use_count() != 1)
      return false;
  }
  return whole.use_count() == held;
}

}  // namespace

std::vector<std::pair<int, int>> spmd_aliases(const std::vector<int>& pinned_param) {
  std::vector<std::pair<int, int>> out;
  for (size_t k = 0; k < pinned_param.size(); ++k)
    if (pinned_param[k] >= 0) out.emplace_back(pinned_param[k], static_cast<int>(k));
  return out;
}

std::vector<ShardedPtr> spmd_run(const SpmdPlan& plan, const std::vector<runtime::BufferPtr>& whole,
                                 const std::vector<ShardedPtr>& sharded, int home,
                                 const std::vector<std::optional<c10::Scalar>>* numbers,
                                 const std::vector<const StorageSlot*>* owners, long extra) {
  const size_t n = plan.devices.size();
  std::vector<runtime::BufferPtr> keep_alive;
  std::vector<std::vector<PJRT_Buffer*>> args(n);
  for (size_t j = 0; j < plan.args.size(); ++j) {
    if (sharded[j]) {
      for (size_t d = 0; d < n; ++d) args[d].push_back(sharded[j]->shards[d]->get());
      continue;
    }
    if (numbers && (*numbers)[j]) {
      const ir::ElemType elem = plan.params_elem[j];
      for (size_t d = 0; d < n; ++d) {
        runtime::BufferPtr b = scalar_buffer(*(*numbers)[j], elem, plan.devices[d]);
        keep_alive.push_back(b);
        args[d].push_back(b->get());
      }
      continue;
    }
    TORCH_INTERNAL_ASSERT(whole[j], "tpu: an SPMD program's parameter has no value");
    plan.copies.resize(plan.args.size());
    SpmdPlan::Copies& c = plan.copies[j];
    if (c.source != whole[j]) {
      c.source = whole[j];
      c.per_device.clear();
      for (size_t d = 0; d < n; ++d)
        c.per_device.push_back(plan.devices[d] == home ? whole[j]
                                                       : whole[j]->copy_to_device(pjrt_device(plan.devices[d])));
    }
    for (size_t d = 0; d < n; ++d) args[d].push_back(c.per_device[d]->get());
  }
  // On XLA:CPU one SPMD launch at a time (runtime/launch_gate.h).
  static auto* gate = new runtime::LaunchGate(runtime::LaunchGate::serialises(client().platform_name()));
  runtime::LaunchGate::Pass pass = gate->enter("an SPMD program");
  // Aliased parameters another holder still needs are copied by XLA, not
  // consumed; the consumed shards' handles live until the results are ready.
  std::vector<int64_t> keep;
  std::vector<std::vector<runtime::BufferPtr>> consumed(n);
  std::vector<int> spent;  // replicated copies consumed: made anew next time
  for (auto [j, r] : plan.aliases) {
    if (!owners || !consumable(plan, j, (*owners)[j], sharded[j], whole[j], home, extra)) {
      keep.push_back(j);
      continue;
    }
    for (size_t d = 0; d < n; ++d)
      consumed[d].push_back(sharded[j] ? sharded[j]->shards[d] : plan.copies[j].per_device[d]);
    if (!sharded[j]) spent.push_back(j);
  }
  for (int j : spent) plan.copies[j] = SpmdPlan::Copies{};
  auto outs = plan.prog->exe->execute_replicated(args, keep);
  bump(metrics().executions);
  bump(metrics().donated, static_cast<int64_t>(plan.aliases.size() - keep.size()));
  for (size_t d = 0; d < n; ++d) DonatedHandles::get().add(std::move(consumed[d]), outs[d]);
  std::vector<ShardedPtr> results;
  for (size_t k = 0; k < plan.results.size(); ++k) {
    auto v = std::make_shared<ShardedValue>();
    v->devices = plan.devices;
    v->sharding = plan.out_shardings[k];
    // A replicated value is kept flat: its shards are usable as a storage's buffer.
    v->dims = plan.results[k].dims;
    for (size_t d = 0; d < n; ++d) {
      v->shards.push_back(outs[d].at(k));
      OpCall::track_result(outs[d][k], "SPMD program");
    }
    results.push_back(std::move(v));
  }
  // Every device's first result is ready once the launch has finished there.
  std::vector<runtime::BufferPtr> finished;
  for (size_t d = 0; d < n && !outs[d].empty(); ++d) finished.push_back(outs[d][0]);
  pass.done(std::move(finished));
  return results;
}

void spmd_store(StorageSlot* s, const ShardedPtr& v) {
  s->buffer = nullptr;
  s->sharded = v;
  if (!v->sharding.replicated() || v->dims.size() != 1) return;
  for (size_t d = 0; d < v->devices.size(); ++d)
    if (v->devices[d] == s->device) s->buffer = v->shards[d];
}

}  // namespace torch_tpu::eager
