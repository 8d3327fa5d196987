#include "ops/shape/append.h"

#include <ATen/ops/as_strided.h>
#include <c10/util/accumulate.h>

#include <cstring>

#include "ops/common.h"
#include "record/driver.h"

namespace torch_tpu::ops {
namespace {

// Rounding the storage up to a power of two bounds the programs at one per
// size class; the floor keeps short prompts in one class, the ceiling keeps
// the spare room of large tensors small.
constexpr int64_t kMinRoom = 16;
constexpr int64_t kMaxElems = int64_t{1} << 16;

int64_t room_for(int64_t n) {
  int64_t c = kMinRoom;
  while (c < n) c *= 2;
  return c;
}

// The storage a new sequence of n elements starts in: room to double, so
// that a prompt and the tokens appended to it stay in one size class for
// the whole of a generate() call, and a later call with a prompt within a
// factor of two of it runs in the same class (the same glue programs).
int64_t start_room(int64_t n) { return room_for(2 * n); }

// Whether n elements in a storage of r elements have room (`has_room`): r is
// a size class at least n, and no larger than a start or an append of
// n gives.
bool room_fits(int64_t n, int64_t r) { return r >= n && r == room_for(r) && r <= room_for(2 * n); }

// All elements lie along `dim`: a row, whatever the rank.
bool is_row(const at::Tensor& t, int64_t dim) { return t.numel() > 0 && t.numel() == t.size(dim); }

// A contiguous tensor of `sizes` at the start of `whole`'s storage.
at::Tensor leading(const at::Tensor& whole, c10::IntArrayRef sizes) {
  std::vector<int64_t> strides(sizes.size(), 1);
  for (int64_t i = static_cast<int64_t>(sizes.size()) - 2; i >= 0; --i) strides[i] = strides[i + 1] * sizes[i + 1];
  return at::as_strided(whole, sizes, strides, 0);
}

// The storage's element count, where it is a whole number of elements.
int64_t storage_elems(const at::Tensor& t) {
  const auto bytes = static_cast<int64_t>(t.storage().nbytes());
  const auto item = static_cast<int64_t>(t.element_size());
  return bytes % item == 0 ? bytes / item : -1;
}

// Index arithmetic over n positions in int64, for the gathers below.
struct Positions {
  Builder& bl;
  int64_t n;
  Value num(int64_t v) const { return bl.constant(static_cast<double>(v), ElemType::kS64, {n}); }
  Value op(BinaryOp o, Value x, Value y) const { return bl.binary(o, x, y); }
  Value iota() const { return bl.iota({n}, 0, ElemType::kS64); }
  Value spread(Value scalar) const { return bl.broadcast_to(scalar, {n}); }
};

// An integer or bool tpu tensor, under a driver that takes lengths at runtime.
bool runtime_integral(const at::Tensor& t) {
  return t.is_privateuseone() && c10::isIntegralType(t.scalar_type(), /*includeBool=*/true) &&
         record::current_driver().runtime_lengths();
}

}  // namespace

bool has_room(const at::Tensor& t) {
  if (!runtime_integral(t) || t.numel() == 0 || t.numel() > kMaxElems || t.storage_offset() != 0 ||
      !t.is_contiguous() || t.is_conj() || t.is_neg())
    return false;
  return room_fits(t.numel(), storage_elems(t));
}

namespace {

// A tensor whose storage may be swapped for a larger one unseen: contiguous,
// at the start of its exact storage, its storage's only holder. Not 0-d:
// a number on the device is never a sequence that grows.
bool fresh(const at::Tensor& t) {
  return runtime_integral(t) && t.dim() > 0 && t.numel() > 0 && t.numel() <= kMaxElems && !t.is_conj() && !t.is_neg() &&
         t.is_contiguous() && t.storage_offset() == 0 && storage_elems(t) == t.numel() && t.storage().unique();
}

// Gives fresh `t` the storage of `whole`; t's values are whole's first ones.
void regrow(const at::Tensor& t, const at::Tensor& whole) {
  t.unsafeGetTensorImpl()->set_storage_keep_dtype(whole.storage());
}

}  // namespace

int64_t room_of(const at::Tensor& t) { return has_room(t) ? storage_elems(t) : 0; }

at::Tensor whole_of(const at::Tensor& t) { return at::as_strided(t, {storage_elems(t)}, {1}, 0); }

std::optional<at::Tensor> whole_out(const at::Tensor& out, int64_t room) {
  // Written whole only where nothing else holds the storage: a view of a
  // prefix of a longer tensor can look as if it had room, and writing its
  // "room" would overwrite the longer tensor.
  if (room_of(out) == room) return out.storage().unique() ? std::optional<at::Tensor>(whole_of(out)) : std::nullopt;
  if (!fresh(out) || !room_fits(out.numel(), room)) return std::nullopt;
  at::Tensor whole = empty_tpu({room}, out.scalar_type(), out.device());
  regrow(out, whole);
  return whole;
}

bool upload_with_room(const at::Tensor& host, const at::Tensor& dst) {
  if (!fresh(dst) || host.scalar_type() != dst.scalar_type() || !host.is_contiguous()) return false;
  const int64_t room = start_room(dst.numel());
  if (room == dst.numel()) return false;
  std::vector<char> padded(static_cast<size_t>(room) * dst.element_size(), 0);
  std::memcpy(padded.data(), host.const_data_ptr(), host.nbytes());
  at::Tensor whole = empty_tpu({room}, dst.scalar_type(), dst.device());
  record::copy_from_host(whole, padded.data(), padded.size());
  regrow(dst, whole);
  return true;
}

bool fill_with_room(const at::Tensor& self, const c10::Scalar& value) {
  // A tensor that has room, and is its storage's only holder, fills its
  // whole storage: the room is never read, and a whole-storage fill runs on
  // the host, not as a program. (A view of a prefix of a longer tensor can
  // look as if it had room; it shares the storage, so it never gets here.)
  if (room_of(self) > self.numel() && self.storage().unique()) {
    whole_of(self).fill_(value);
    return true;
  }
  if (!fresh(self) || start_room(self.numel()) == self.numel()) return false;
  at::Tensor whole = *whole_out(self, start_room(self.numel()));
  whole.fill_(value);
  return true;
}

bool shed_room(const at::Tensor& t) {
  const int64_t room = room_of(t);
  if (room <= t.numel() || !t.storage().unique()) return false;
  at::Tensor exact = empty_tpu(t.sizes(), t.scalar_type(), t.device());
  record::OpCall call("shed_room");
  call.input(t);
  call.output(exact);
  call.run([](Builder&, const Values& in) { return Values{in[0]}; });
  regrow(t, exact);
  return true;
}

bool convert_with_room(const at::Tensor& src, const at::Tensor& dst) {
  if (!has_room(src) || !fresh(dst) || src.device() != dst.device() || !dst.sizes().equals(src.sizes())) return false;
  const int64_t room = storage_elems(src);
  at::Tensor whole = empty_tpu({room}, dst.scalar_type(), dst.device());
  const ElemType de = to_elem(dst.scalar_type());
  record::OpCall call("convert_room");
  call.input(at::as_strided(src, {room}, {1}, 0));
  call.output(whole);
  call.run([de](Builder& bl, const Values& in) { return Values{bl.convert(in[0], de)}; });
  // dst is fresh and its own storage's only holder: giving it the larger
  // storage changes no value that anything else can see.
  regrow(dst, whole);
  return true;
}

std::optional<at::Tensor> pad_with_room(const at::Tensor& self, int64_t lo, int64_t hi, const c10::Scalar& value) {
  if (!has_room(self) || lo < 0 || hi < 0) return std::nullopt;
  const int64_t len = self.size(-1);
  const int64_t width = len + lo + hi;
  const int64_t rows = self.numel() / len;
  if (rows * width > kMaxElems) return std::nullopt;
  std::vector<int64_t> sizes(self.sizes().begin(), self.sizes().end());
  sizes.back() = width;
  at::Tensor out = empty_tpu(sizes, self.scalar_type(), self.device());
  const int64_t room = storage_elems(self);
  const int64_t n = rows * width;
  // Element (row, col) of the result is the input's (row, col - lo) where
  // that lies inside the row, else the value; the row length is runtime.
  record::OpCall call("pad_room");
  call.attr(lo);
  call.input(at::as_strided(self, {room}, {1}, 0));
  call.scalar(value, self.scalar_type());
  call.scalar(len, at::kLong);
  call.output(out);
  call.run([room, n, width, lo, sizes](Builder& bl, const Values& in) {
    const Positions p{bl, n};
    Value i = p.iota();
    Value l = p.spread(in[2]);
    Value row = p.op(BinaryOp::kDiv, i, p.num(width));
    Value j = p.op(BinaryOp::kSub, p.op(BinaryOp::kSub, i, p.op(BinaryOp::kMul, row, p.num(width))), p.num(lo));
    Value inside = bl.binary(BinaryOp::kAnd, bl.compare(j, p.num(0), Direction::kGe), bl.compare(j, l, Direction::kLt));
    Value at = bl.clamp(p.num(0), p.op(BinaryOp::kAdd, p.op(BinaryOp::kMul, row, l), j), p.num(room - 1));
    Value v = bl.select(inside, gather_rows(bl, in[0], at), p.spread(in[1]));
    return Values{bl.reshape(v, sizes)};
  });
  return out;
}

std::optional<Room> cat_with_room(const std::vector<at::Tensor>& ins, int64_t dim, c10::IntArrayRef sizes,
                                  c10::ScalarType dtype) {
  if (ins.size() != 2 || !c10::isIntegralType(dtype, /*includeBool=*/true)) return std::nullopt;
  const at::Tensor& a = ins[0];
  const at::Tensor& b = ins[1];
  const bool rows = is_row(a, dim) && is_row(b, dim);
  for (const at::Tensor& t : ins)
    if (t.device() != a.device() || !t.is_privateuseone() || t.scalar_type() != dtype || t.numel() == 0)
      return std::nullopt;
  const int64_t n = c10::multiply_integers(sizes);
  if (!(rows || dim == static_cast<int64_t>(sizes.size()) - 1) || n > kMaxElems ||
      !record::current_driver().runtime_lengths())
    return std::nullopt;
  // An append stays in the first input's storage while it fits, so a
  // sequence's class changes only when it outgrows it.
  const int64_t room = has_room(a) && storage_elems(a) >= n ? storage_elems(a) : room_for(n);
  const auto bytes = static_cast<size_t>(room) * c10::elementSize(dtype);
  at::Tensor whole = empty_tpu({room}, dtype, a.device());
  Room r{leading(whole, sizes)};
  if (a.storage_offset() != 0 || !a.is_contiguous() || a.storage().nbytes() != bytes) return r;
  // Each row of the result is a's row then b's; a's row length is a runtime
  // scalar, so one program serves every length in this storage size.
  const int64_t len = rows ? a.numel() : a.size(dim);
  const int64_t k = rows ? b.numel() : b.size(dim);
  const int64_t bn = b.numel();
  record::OpCall call("cat_append");
  call.attr(k);
  call.input(at::as_strided(a, {room}, {1}, 0));
  call.input(b);
  call.scalar(len, at::kLong);
  call.output(whole);
  call.run([room, k, bn](Builder& bl, const Values& in) {
    const Positions p{bl, room};
    Value i = p.iota();
    Value l = p.spread(in[2]);
    Value w = p.op(BinaryOp::kAdd, l, p.num(k));
    Value row = p.op(BinaryOp::kDiv, i, w);
    Value col = p.op(BinaryOp::kSub, i, p.op(BinaryOp::kMul, row, w));
    Value ia = bl.clamp(p.num(0), p.op(BinaryOp::kAdd, p.op(BinaryOp::kMul, row, l), col), p.num(room - 1));
    Value ib =
        bl.clamp(p.num(0), p.op(BinaryOp::kSub, p.op(BinaryOp::kAdd, p.op(BinaryOp::kMul, row, p.num(k)), col), l),
                 p.num(bn - 1));
    Value va = gather_rows(bl, in[0], ia);
    Value vb = gather_rows(bl, bl.reshape(in[1], {bn}), ib);
    return Values{bl.select(bl.compare(col, l, Direction::kLt), va, vb)};
  });
  r.filled = true;
  return r;
}

}  // namespace torch_tpu::ops
