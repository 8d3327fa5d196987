#include "ir/ops.h"

namespace torch_tpu::ir {

#define TT_IR_NAME_CASE(fn, E, name) \
  case k##E:                         \
    return name;

const char* mlir_name(UnaryOp op) {
  using enum UnaryOp;
  switch (op) { TT_IR_UNARY_OPS(TT_IR_NAME_CASE) }
  return "?";
}

const char* mlir_name(BinaryOp op) {
  using enum BinaryOp;
  switch (op) { TT_IR_BINARY_OPS(TT_IR_NAME_CASE) }
  return "?";
}
#undef TT_IR_NAME_CASE

const char* mlir_name(Direction d) {
  static constexpr const char* kNames[] = {"EQ", "NE", "LT", "LE", "GT", "GE"};
  return kNames[static_cast<int>(d)];
}

}  // namespace torch_tpu::ir
