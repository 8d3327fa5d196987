// Convolution in the form XLA:CPU runs fast.
//
// XLA's algebraic simplifier swaps a convolution's operands when its window
// covers more elements than the input's spatial extent (a 3x3 kernel over a
// 2x2 or 1x1 feature map, as in ResNet's last stages on small images). The
// swapped convolution has reversed windows and non-canonical dimension
// labels, which XLA:CPU cannot hand to Eigen: it runs as a naive loop nest,
// measured 10-20x slower than the Eigen path here. For those shapes
// `conv_general` emits the same convolution as patches and one dot_general,
// which XLA:CPU runs as a matrix multiply; other shapes go to
// stablehlo.convolution unchanged.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "ir/builder.h"

namespace torch_tpu::ir {

using ConvPadding = std::vector<std::pair<int64_t, int64_t>>;

// Whether conv_general takes the dot form for this convolution: no feature or
// batch groups, and the window (kernel spatial sizes) spans more elements
// than the input's spatial sizes. Sizes are the spatial sizes in order.
bool conv_prefers_dot(const Dims& input_spatial, const Dims& kernel_spatial, int64_t feature_group_count,
                      int64_t batch_group_count);

// Builder::convolution's contract (layout strings, padding, dilations, group
// counts, result element type, precision).
Value conv_general(Builder& b, Value lhs, Value rhs, const std::string& lhs_layout, const std::string& rhs_layout,
                   const std::string& out_layout, const Dims& window_strides, const ConvPadding& padding,
                   const Dims& lhs_dilation, const Dims& rhs_dilation, int64_t feature_group_count,
                   int64_t batch_group_count, ElemType out, const std::string& precision = "DEFAULT");

}  // namespace torch_tpu::ir
