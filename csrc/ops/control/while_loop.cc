#include "ops/control/while_loop.h"

#include "ops/common.h"

namespace torch_tpu::ops {

std::vector<at::Tensor> while_loop(const record::RegionGraph& cond, const record::RegionGraph& body,
                                   const std::vector<at::Tensor>& inputs) {
  TORCH_CHECK(!inputs.empty(), "while_loop: at least one carried value is required");
  c10::Device dev = inputs[0].device();
  std::vector<at::Tensor> outs;
  for (const at::Tensor& t : inputs) {
    TORCH_CHECK(t.device() == dev, "while_loop: expected every carried value on ", dev, ", got one on ", t.device());
    outs.push_back(empty_tpu(t.sizes(), t.scalar_type(), dev));
  }
  record::OpCall call("while_loop");
  // The regions' structure, constants included, keys the program.
  call.attr(static_cast<int64_t>(cond.graph->fingerprint())).attr(static_cast<int64_t>(body.graph->fingerprint()));
  for (const at::Tensor& t : inputs) call.input(t);
  for (const at::Tensor& o : outs) call.output(o);
  // The regions take and return the values in their tensors' shapes, as
  // the call reads them.
  call.run([cg = cond.graph, bg = body.graph](Builder& b, const Values& in) { return b.while_loop(in, cg, bg); });
  return outs;
}

namespace {
// The start indices of a slice along dim 0: i, then zeros of i's type.
Values starts_at(Builder& b, Value i, size_t rank) {
  Values starts{b.reshape(i, {})};
  for (size_t d = 1; d < rank; ++d) starts.push_back(b.constant(0, b.elem(i), {}));
  return starts;
}

void check_index(const at::Tensor& x, const at::Tensor& i, const char* op) {
  TORCH_CHECK(x.dim() >= 1, op, ": expected a tensor with at least one dimension");
  TORCH_CHECK(i.numel() == 1 && c10::isIntegralType(i.scalar_type(), /*includeBool=*/false), op,
              ": the index must be one integer, got ", i.scalar_type(), " of ", i.numel(), " elements");
  TORCH_CHECK(i.device() == x.device(), op, ": expected the index on ", x.device(), ", got ", i.device());
}
}  // namespace

at::Tensor dynamic_index(const at::Tensor& x, const at::Tensor& i) {
  check_index(x, i, "dynamic_index");
  Dims sizes(x.sizes().begin(), x.sizes().end());
  sizes[0] = 1;
  at::Tensor out = empty_tpu(x.sizes().slice(1), x.scalar_type(), x.device());
  record::OpCall call("dynamic_index");
  call.input(x);
  call.input(i);
  call.output(out);
  call.run([sizes](Builder& b, const Values& in) {
    Value s = b.dynamic_slice(in[0], starts_at(b, in[1], sizes.size()), sizes);
    return Values{b.reshape(s, Dims(sizes.begin() + 1, sizes.end()))};
  });
  return out;
}

at::Tensor dynamic_update_index(const at::Tensor& y, const at::Tensor& v, const at::Tensor& i) {
  check_index(y, i, "dynamic_update_index");
  TORCH_CHECK(v.sizes() == y.sizes().slice(1) && v.scalar_type() == y.scalar_type(),
              "dynamic_update_index: the value must be one row of the tensor (", y.sizes().slice(1), " ",
              y.scalar_type(), "), got ", v.sizes(), " ", v.scalar_type());
  at::Tensor out = empty_tpu(y.sizes(), y.scalar_type(), y.device());
  record::OpCall call("dynamic_update_index");
  call.input(y);
  call.input(v);
  call.input(i);
  call.output(out);
  call.run([](Builder& b, const Values& in) {
    Dims row = b.dims(in[1]);
    row.insert(row.begin(), 1);
    return Values{b.dynamic_update_slice(in[0], b.reshape(in[1], row), starts_at(b, in[2], row.size()))};
  });
  return out;
}

}  // namespace torch_tpu::ops
