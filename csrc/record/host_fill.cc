// Fills without a program: a call whose every result is one scalar broadcast
// (zeros_like, full, an optimizer's fresh state) is made on the host and
// transferred.
#include "record/op_call.h"

#include <cerrno>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "aten/device.h"
#include "compile/metrics.h"

#include "record/op_call_internal.h"

namespace torch_tpu::record {

using ir::ElemType;
using ir::Value;

namespace {
// The bits of a splat constant's value as the builder renders it
// ("dense<0x3F800000> : tensor<4xf32>", "dense<-1> : ...", "dense<true> :
// ..."); nullopt for any other form.
std::optional<uint64_t> splat_bits(const std::string& text, ElemType t) {
  if (text.rfind("dense<", 0) != 0 || is_complex(t)) return std::nullopt;
  const std::string lit = text.substr(6, text.find('>') - 6);
  if (lit.empty()) return std::nullopt;
  if (t == ElemType::kPred) {
    if (lit == "true" || lit == "false") return lit == "true" ? 1 : 0;
    return std::nullopt;
  }
  const bool hex = lit.rfind("0x", 0) == 0;
  if (is_float(t) != hex) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  uint64_t v = hex             ? std::strtoull(lit.c_str() + 2, &end, 16)
               : lit[0] == '-' ? static_cast<uint64_t>(std::strtoll(lit.c_str(), &end, 10))
                               : std::strtoull(lit.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

// Fills larger than this still run as a program: on a TPU or GPU a program
// writes device memory without a transfer, and it is cached after one compile.
constexpr int64_t kMaxHostFillBytes = int64_t{4} << 20;
}  // namespace

// XLA:CPU spends about 30 ms compiling even a broadcast of zero, and an
// optimizer's first step creates its state this way (GPT AdamW: 106
// zeros_like over 9 sizes, 9 programs, 0.3-0.4 s of compiling).
bool OpCall::try_host_fill(const Lowering& lower) const {
  int64_t bytes = 0;
  for (const SlotUse& u : slots_) {
    if (needs_param(u)) return false;
    if (u.written) bytes += static_cast<int64_t>(u.slot->nbytes);
  }
  if (bytes == 0 || bytes > kMaxHostFillBytes) return false;
  std::vector<const Arg*> scalars;
  for (const Arg& a : args_) {
    if (a.kind == Arg::kView) continue;
    if (a.rng_part >= 0 || is_complex(a.elem)) return false;
    scalars.push_back(&a);
  }
  ir::Graph g;
  build_program(g, lower);
  std::unordered_map<int32_t, size_t> param_of;
  for (size_t k = 0; k < g.params().size(); ++k) param_of[g.params()[k]] = k;
  // Per written slot: its element type, count and the value's bits. Every
  // output must be a broadcast (and reshapes) of one scalar of its own type.
  struct Fill {
    StorageSlot* slot;
    ElemType elem;
    int64_t numel;
    uint64_t bits;
  };
  std::vector<Fill> fills;
  size_t oi = 0;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (!slots_[i].written) continue;
    if (oi >= g.outputs().size()) return false;
    ir::Value v = g.outputs()[oi++];
    const ir::TensorType out = g.type(v);
    auto [e, n] = written_elem(i);
    if (out.elem != e || out.numel() != n || ir::byte_size(e) < 1) return false;
    for (;;) {
      const ir::Node& node = g.nodes()[v.node];
      if (node.op != "stablehlo.broadcast_in_dim" && node.op != "stablehlo.reshape") break;
      v = node.operands[0];
    }
    if (g.type(v).elem != e) return false;
    const ir::Node& root = g.nodes()[v.node];
    std::optional<uint64_t> bits;
    if (root.op == "param") {
      const Arg& a = *scalars.at(param_of.at(v.node));
      bits = scalar_bits(a.kind == Arg::kScalar ? a.value : a.cpu.item(), a.elem)[0];
    } else if (root.op == "stablehlo.constant" && !root.attrs.empty()) {
      bits = splat_bits(root.attrs[0].text, e);
    }
    if (!bits) return false;
    fills.push_back(Fill{slots_[i].slot, e, n, *bits});
  }
  if (oi != g.outputs().size()) return false;
  for (const Fill& f : fills) {
    const size_t bs = ir::byte_size(f.elem);
    std::vector<unsigned char> host(static_cast<size_t>(f.numel) * bs);  // zeroed
    if (f.bits != 0)  // little-endian: the value is the bits' low bytes
      for (size_t k = 0; k < host.size(); k += bs) std::memcpy(host.data() + k, &f.bits, bs);
    f.slot->set_buffer(client().buffer_from_host(host.data(), to_pjrt(f.elem), {f.numel}, device_));
    f.slot->elem = f.elem;
    f.slot->numel = f.numel;
    bump(metrics().h2d_count);
    bump(metrics().h2d_bytes, static_cast<int64_t>(host.size()));
    track_result(f.slot->buffer, name_);
  }
  bump(metrics().host_fills);
  return true;
}

}  // namespace torch_tpu::record
