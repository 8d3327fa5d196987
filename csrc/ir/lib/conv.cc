#include "ir/lib/conv.h"

namespace torch_tpu::ir {
namespace {

int64_t product(const Dims& d) {
  int64_t p = 1;
  for (int64_t v : d) p *= v;
  return p;
}

// Positions in `layout` of `first`, `second`, then spatial '0', '1', ...: the
// transpose that puts an operand in [first, second, spatial...] order.
Dims canonical_perm(const std::string& layout, char first, char second, size_t ns) {
  Dims perm{static_cast<int64_t>(layout.find(first)), static_cast<int64_t>(layout.find(second))};
  for (size_t i = 0; i < ns; ++i) perm.push_back(static_cast<int64_t>(layout.find(static_cast<char>('0' + i))));
  return perm;
}

// Whether `layout` names `first`, `second` and spatial '0'.. once each.
bool well_formed(const std::string& layout, char first, char second, size_t ns) {
  if (layout.size() != ns + 2) return false;
  std::string want{first, second};
  for (size_t i = 0; i < ns; ++i) want += static_cast<char>('0' + i);
  for (char c : want)
    if (layout.find(c) == std::string::npos || layout.find(c) != layout.rfind(c)) return false;
  return true;
}

// Spatial sizes of an operand given in `layout`.
Dims spatial_sizes(const Dims& dims, const std::string& layout, size_t ns) {
  Dims s;
  for (size_t i = 0; i < ns; ++i) s.push_back(dims[layout.find(static_cast<char>('0' + i))]);
  return s;
}

}  // namespace

bool conv_prefers_dot(const Dims& input_spatial, const Dims& kernel_spatial, int64_t feature_group_count,
                      int64_t batch_group_count) {
  if (feature_group_count != 1 || batch_group_count != 1 || input_spatial.empty()) return false;
  if (product(input_spatial) == 0 || product(kernel_spatial) == 0) return false;
  return product(kernel_spatial) > product(input_spatial);
}

Value conv_general(Builder& b, Value lhs, Value rhs, const std::string& ll, const std::string& rl,
                   const std::string& ol, const Dims& strides, const ConvPadding& padding, const Dims& lhs_dil,
                   const Dims& rhs_dil, int64_t fgc, int64_t bgc, ElemType out, const std::string& precision) {
  const size_t ns = strides.size();
  auto direct = [&] {
    return b.convolution(lhs, rhs, ll, rl, ol, strides, padding, lhs_dil, rhs_dil, fgc, bgc, out, precision);
  };
  // Malformed layouts or attributes: let Builder::convolution report them.
  if (!well_formed(ll, 'b', 'f', ns) || !well_formed(rl, 'o', 'i', ns) || !well_formed(ol, 'b', 'f', ns) ||
      padding.size() != ns || lhs_dil.size() != ns || rhs_dil.size() != ns ||
      static_cast<size_t>(b.type(lhs).rank()) != ns + 2 || static_cast<size_t>(b.type(rhs).rank()) != ns + 2)
    return direct();
  const Dims in_sp = spatial_sizes(b.dims(lhs), ll, ns), k_sp = spatial_sizes(b.dims(rhs), rl, ns);
  if (!conv_prefers_dot(in_sp, k_sp, fgc, bgc)) return direct();

  // Per spatial dim: the padded (and base-dilated) input size, the output
  // size, and which kernel taps ever read a real input element (taps that
  // only see padding contribute nothing and are left out of the dot).
  Dims out_sp, lo, hi, interior;
  std::vector<Dims> live(ns);
  for (size_t i = 0; i < ns; ++i) {
    if (strides[i] < 1 || lhs_dil[i] < 1 || rhs_dil[i] < 1) return direct();
    const int64_t dilated = (in_sp[i] - 1) * lhs_dil[i] + 1;
    const int64_t padded = dilated + padding[i].first + padding[i].second;
    const int64_t span = (k_sp[i] - 1) * rhs_dil[i] + 1;
    if (padded < span) return direct();
    const int64_t n = (padded - span) / strides[i] + 1;
    out_sp.push_back(n);
    lo.push_back(padding[i].first);
    hi.push_back(padding[i].second);
    interior.push_back(lhs_dil[i] - 1);
    for (int64_t t = 0; t < k_sp[i]; ++t) {
      for (int64_t o = 0; o < n; ++o) {
        const int64_t j = o * strides[i] + t * rhs_dil[i] - padding[i].first;
        if (j >= 0 && j < dilated && j % lhs_dil[i] == 0) {
          live[i].push_back(t);
          break;
        }
      }
    }
    // Every tap reads padding only: the result is all zeros; the plain
    // convolution says so just as well.
    if (live[i].empty()) return direct();
  }

  Value x = b.transpose(lhs, canonical_perm(ll, 'b', 'f', ns));  // [N, C, in...]
  Value k = b.transpose(rhs, canonical_perm(rl, 'o', 'i', ns));  // [O, C, k...]
  const Dims xd = b.dims(x), kd = b.dims(k);
  const int64_t N = xd[0], C = xd[1], O = kd[0];
  bool needs_pad = false;
  for (size_t i = 0; i < ns; ++i) needs_pad |= lo[i] != 0 || hi[i] != 0 || interior[i] != 0;
  if (needs_pad) {
    Dims plo{0, 0}, phi{0, 0}, pin{0, 0};
    plo.insert(plo.end(), lo.begin(), lo.end());
    phi.insert(phi.end(), hi.begin(), hi.end());
    pin.insert(pin.end(), interior.begin(), interior.end());
    x = b.pad(x, b.constant(0, b.elem(x)), plo, phi, pin);
  }

  // One strided slice of the padded input per live tap, [N, 1, C, out...],
  // and the matching kernel column [O, 1, C]; taps in row-major order.
  std::vector<Value> patches, taps;
  Dims tap(ns, 0);
  std::vector<size_t> pos(ns, 0);
  Dims patch_shape{N, 1, C}, tap_shape{O, 1, C};
  patch_shape.insert(patch_shape.end(), out_sp.begin(), out_sp.end());
  for (;;) {
    Dims start{0, 0}, limit{N, C}, step{1, 1}, kstart{0, 0}, klimit{O, C};
    for (size_t i = 0; i < ns; ++i) {
      const int64_t t = live[i][pos[i]];
      start.push_back(t * rhs_dil[i]);
      limit.push_back(t * rhs_dil[i] + (out_sp[i] - 1) * strides[i] + 1);
      step.push_back(strides[i]);
      kstart.push_back(t);
      klimit.push_back(t + 1);
    }
    patches.push_back(b.reshape(b.slice(x, start, limit, step), patch_shape));
    taps.push_back(b.reshape(b.slice(k, kstart, klimit, Dims(ns + 2, 1)), tap_shape));
    size_t i = ns;
    while (i > 0 && ++pos[i - 1] == live[i - 1].size()) pos[--i] = 0;
    if (i == 0) break;
  }
  Value p = patches.size() == 1 ? patches[0] : b.concatenate(patches, 1);  // [N, T, C, out...]
  Value kt = taps.size() == 1 ? taps[0] : b.concatenate(taps, 1);          // [O, T, C]
  Value y = b.dot_general(p, kt, {}, {}, {1, 2}, {1, 2}, out, precision);  // [N, out..., O]

  // To the requested output layout: 'b' is dim 0, spatial i is 1 + i, 'f' last.
  Dims perm;
  for (char c : ol) perm.push_back(c == 'b' ? 0 : c == 'f' ? static_cast<int64_t>(ns) + 1 : 1 + (c - '0'));
  return b.transpose(y, perm);
}

}  // namespace torch_tpu::ir
