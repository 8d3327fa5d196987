#include "ops/dist/collectives.h"

#include <c10/util/Exception.h>

#include <iterator>
#include <mutex>
#include <set>

#include "aten/storage.h"
#include "compile/cache_key.h"
#include "compile/executable_cache.h"
#include "ir/lib/collectives.h"
#include "ops/common.h"
#include "ops/shape/append.h"
#include "runtime/launch_gate.h"

namespace torch_tpu::ops {
namespace {

// Each collective's name, in enum order (Python passes the name).
constexpr const char* kNames[] = {"all_reduce", "broadcast", "all_gather", "reduce_scatter", "all_to_all"};

const char* kind_name(Collective k) { return kNames[static_cast<int>(k)]; }

enum class Reduce { kSum, kAvg, kMin, kMax, kProduct };

Reduce parse_reduce(const std::string& r) {
  if (r == "sum") return Reduce::kSum;
  if (r == "avg") return Reduce::kAvg;
  if (r == "min") return Reduce::kMin;
  if (r == "max") return Reduce::kMax;
  if (r == "product") return Reduce::kProduct;
  TORCH_CHECK_VALUE(false, "unknown reduce op '", r, "' (expected sum, avg, min, max or product)");
}

// The storage's whole current buffer, when `t` is exactly that storage:
// contiguous, from offset 0, every element, the buffer's own dtype. Null otherwise.
runtime::BufferPtr whole_buffer(const at::Tensor& t) {
  if (!t.is_contiguous() || t.storage_offset() != 0) return nullptr;
  StorageSlot* s = slot_of(t.storage());
  materialize_slot(s);
  if (!s->buffer || s->numel != t.numel() || s->elem != to_elem(t.scalar_type())) return nullptr;
  return s->buffer;
}

// A flat buffer holding `t`'s values (a copy only where `t` is a view or
// was never written); `*whole` says whether it is `t`'s own buffer.
runtime::BufferPtr input_buffer(const at::Tensor& t, bool* whole) {
  auto own = whole_buffer(t);
  *whole = own != nullptr;
  if (own) return own;
  at::Tensor c = t.clone(at::MemoryFormat::Contiguous);
  shed_room(c);  // a small integer clone may get room (shape/append.h)
  if (auto b = whole_buffer(c)) return b;
  std::vector<char> zeros(t.numel() * t.element_size(), 0);  // a never-written tensor reads as zeros
  return client().buffer_from_host(zeros.data(), to_pjrt(to_elem(t.scalar_type())), {t.numel()},
                                   static_cast<int>(t.device().index()));
}

// Applies `f` to a real value, or to each part of a complex one.
Value per_part(Builder& b, Value x, const std::function<Value(Value)>& f) {
  if (!ir::is_complex(b.elem(x))) return f(x);
  return b.complex(f(b.real(x)), f(b.imag(x)));
}

// all_reduce, or reduce_scatter along dim 0 when `scatter`.
Value combine(Builder& b, Value x, Reduce r, const ir::ReplicaGroups& groups, int64_t n, bool scatter) {
  auto coll = [&](Value p, BinaryOp op) {
    return scatter ? ir::reduce_scatter(b, p, 0, op, groups) : ir::all_reduce(b, p, op, groups);
  };
  ElemType t = b.elem(x);
  if (t == ElemType::kPred) {
    // any() for sum/max, all() for min/product.
    bool any = r == Reduce::kSum || r == Reduce::kMax;
    return b.convert(coll(b.convert(x, ElemType::kU8), any ? BinaryOp::kMax : BinaryOp::kMin), t);
  }
  BinaryOp op = r == Reduce::kMin       ? BinaryOp::kMin
                : r == Reduce::kMax     ? BinaryOp::kMax
                : r == Reduce::kProduct ? BinaryOp::kMul
                                        : BinaryOp::kAdd;
  return per_part(b, x, [&](Value p) {
    Value s = coll(p, op);
    if (r != Reduce::kAvg) return s;
    ElemType c = ir::compute_type(b.elem(p));
    return b.convert(b.div(b.convert(s, c), b.constant(static_cast<double>(n), c, b.dims(s))), b.elem(p));
  });
}

// The errors PyTorch's collectives raise, before any program is built.
void check_inputs(Collective kind, const char* what, const std::vector<at::Tensor>& inputs, Reduce r,
                  const std::string& reduce, int64_t root) {
  const int64_t n = static_cast<int64_t>(inputs.size());
  const at::Tensor& first = inputs[0];
  const c10::ScalarType dtype = first.scalar_type();
  std::set<int64_t> devices;
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.defined() && t.device().type() == c10::DeviceType::PrivateUse1, what,
                ": expected tpu tensors, got a tensor on ", t.defined() ? t.device().str() : "nothing");
    TORCH_CHECK(devices.insert(t.device().index()).second, what, ": expected tensors on distinct devices, got two on ",
                t.device().str());
    TORCH_CHECK_TYPE(t.scalar_type() == first.scalar_type(), what, ": expected tensors of one dtype, got ",
                     first.scalar_type(), " and ", t.scalar_type());
    TORCH_CHECK(t.sizes() == first.sizes(), what, ": expected tensors of one shape, got ", first.sizes(), " and ",
                t.sizes());
  }
  const bool reduces = kind == Collective::kAllReduce || kind == Collective::kReduceScatter;
  if (reduces) {
    TORCH_CHECK(!(c10::isComplexType(dtype) && (r == Reduce::kMin || r == Reduce::kMax || r == Reduce::kProduct)), what,
                ": ", reduce, " is not defined for complex tensors");
    TORCH_CHECK(r != Reduce::kAvg || c10::isFloatingType(dtype) || c10::isComplexType(dtype), what,
                ": avg needs a floating-point or complex tensor, got ", dtype);
  }
  TORCH_CHECK_VALUE(kind != Collective::kBroadcast || (root >= 0 && root < n), what, ": root ", root,
                    " is out of range for ", n, " tensors");
  const bool splits = kind == Collective::kReduceScatter || kind == Collective::kAllToAll;
  const int64_t d0 = first.dim() ? first.size(0) : 1;
  TORCH_CHECK(!splits || (first.dim() > 0 && d0 % n == 0), what, ": dimension 0 (size ", d0,
              ") must split evenly across ", n, " devices");
}

}  // namespace

Collective parse_collective(const std::string& name) {
  for (int i = 0; i < static_cast<int>(std::size(kNames)); ++i)
    if (name == kNames[i]) return static_cast<Collective>(i);
  TORCH_CHECK_VALUE(false, "unknown collective '", name, "'");
}

std::vector<at::Tensor> device_collective(Collective kind, const std::vector<at::Tensor>& inputs,
                                          const std::string& reduce, int64_t root, bool in_place) {
  const char* what = kind_name(kind);
  TORCH_CHECK_VALUE(!inputs.empty(), what, ": expected at least one tensor");
  const int64_t n = static_cast<int64_t>(inputs.size());
  const at::Tensor& first = inputs[0];
  const Reduce r = parse_reduce(reduce);
  check_inputs(kind, what, inputs, r, reduce, root);
  const c10::ScalarType dtype = first.scalar_type();

  const ElemType elem = to_elem(dtype);
  const int64_t numel = first.numel();
  std::vector<int64_t> out_sizes(first.sizes().begin(), first.sizes().end());
  if (kind == Collective::kAllGather) {
    if (out_sizes.empty()) out_sizes = {1};
    out_sizes[0] *= n;
  } else if (kind == Collective::kReduceScatter) {
    out_sizes[0] /= n;
  }
  int64_t out_numel = 1;
  for (int64_t s : out_sizes) out_numel *= s;

  runtime::Client& c = client();
  std::vector<int64_t> replica_devices;
  for (const at::Tensor& t : inputs) replica_devices.push_back(c.devices().at(t.device().index()).id);
  KeyBuilder kb;
  kb.add(std::string_view("device_collective"));
  kb.add(static_cast<uint64_t>(kind));
  kb.add(static_cast<uint64_t>(r));
  kb.add(static_cast<uint64_t>(root));
  kb.add(static_cast<uint64_t>(elem));
  kb.add(static_cast<uint64_t>(numel));
  for (int64_t d : replica_devices) kb.add(static_cast<uint64_t>(d));
  CacheKey key = kb.finish();

  ProgramPtr prog = ExecutableCache::get().lookup(key);
  if (!prog) {
    auto emit = [&]() {
      ir::Graph g;
      Builder b(g);
      Value x = g.param({elem, {numel}});
      ir::ReplicaGroups groups(1);
      for (int64_t i = 0; i < n; ++i) groups[0].push_back(i);
      Value y;
      switch (kind) {
        case Collective::kAllReduce:
          y = combine(b, x, r, groups, n, false);
          break;
        case Collective::kBroadcast:
          y = per_part(b, x, [&](Value p) { return ir::broadcast_from(b, p, root, groups); });
          break;
        case Collective::kAllGather:
          y = per_part(b, x, [&](Value p) { return ir::all_gather(b, p, 0, groups); });
          break;
        case Collective::kReduceScatter:
          y = combine(b, x, r, groups, n, true);
          break;
        case Collective::kAllToAll:
          y = per_part(b, x, [&](Value p) { return ir::all_to_all(b, p, 0, 0, groups); });
          break;
      }
      g.set_outputs({y});
      return g.to_mlir();
    };
    prog =
        ExecutableCache::get().compile_and_insert(c, key, std::string("tpu::") + what, emit, false, &replica_devices);
  }

  // Ops recorded earlier that read an input hold its buffer already (strict
  // eager's queue and fused graphs take buffers when they record), so the
  // in-place swap below cannot change what they see; pending writes to the
  // inputs are run by whole_buffer(). tests/test_device_collectives.py checks both.
  std::vector<runtime::BufferPtr> keep;
  std::vector<std::vector<PJRT_Buffer*>> args;
  std::vector<char> whole(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    bool own = false;
    keep.push_back(input_buffer(inputs[i], &own));
    whole[i] = own;
    args.push_back({keep.back()->get()});
  }
  // On XLA:CPU one collective launch at a time (runtime/launch_gate.h).
  static auto* gate = new runtime::LaunchGate(runtime::LaunchGate::serialises(client().platform_name()));
  auto outs = [&] {
    runtime::LaunchGate::Pass pass = gate->enter(what);
    auto o = prog->exe->execute_replicated(args);
    std::vector<runtime::BufferPtr> finished;
    for (const auto& r : o) finished.push_back(r.at(0));
    pass.done(std::move(finished));
    return o;
  }();
  in_place = in_place && (kind == Collective::kAllReduce || kind == Collective::kBroadcast);
  std::vector<at::Tensor> results;
  for (int64_t i = 0; i < n; ++i) {
    if (in_place && whole[i]) {
      StorageSlot* s = slot_of(inputs[i].storage());
      s->set_buffer(outs[i].at(0));
      record::OpCall::track_result(s->buffer, what);
      results.push_back(inputs[i]);
      continue;
    }
    at::Tensor o = empty_tpu(out_sizes, dtype, inputs[i].device());
    StorageSlot* s = slot_of(o.storage());
    s->set_buffer(outs[i].at(0));
    s->elem = elem;
    s->numel = out_numel;
    record::OpCall::track_result(s->buffer, what);
    if (in_place) {
      inputs[i].copy_(o);  // a view: write through it
      results.push_back(inputs[i]);
    } else {
      results.push_back(std::move(o));
    }
  }
  return results;
}

}  // namespace torch_tpu::ops
