// 2-d pooling: max (with the argmax indices its backward needs), average and
// adaptive average, with PyTorch's output sizes and rules, and the
// kernel-level backwards the autograd ops call.
#pragma once

#include <array>
#include <cstdint>

#include "../core/tensor.h"
#include "pool_args.h"
#include "op_types.h"

namespace ember::kernels {

// Int2 (a height, width pair): kernels/op_types.h.

/// What max_pool2d returns: the maxima and, for each, the flat index y·W + x
/// of the chosen element within its H×W input plane (i64), as PyTorch.
struct MaxPool2dResult {
    Tensor values;
    Tensor indices;
};

/// Max pooling over input [N, C, H, W] or [C, H, W] (f32, f64, f16, bf16).
/// `stride` {0, 0} (the default) means stride = kernel, like PyTorch's
/// stride=None. Padding is implicit -inf and at most half the kernel; OH =
/// ⌊(H + 2·ph − dh·(kH − 1) − 1) / sh⌋ + 1 (⌈⌉ with ceil_mode, dropping a
/// last window that would start in the right padding). Output size < 1 is an error.
MaxPool2dResult max_pool2d(const Tensor& input, Int2 kernel, Int2 stride = {0, 0},
                           Int2 padding = {0, 0}, Int2 dilation = {1, 1}, bool ceil_mode = false);

/// Average pooling with the same sizes as max_pool2d (no dilation). The
/// divisor counts zero padding when count_include_pad, else only input elements.
Tensor avg_pool2d(const Tensor& input, Int2 kernel, Int2 stride = {0, 0}, Int2 padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);

/// Average pooling to a fixed output size {OH, OW}: output row y averages
/// input rows [⌊y·H/OH⌋, ⌈(y+1)·H/OH⌉) (windows may overlap), same for columns.
Tensor adaptive_avg_pool2d(const Tensor& input, Int2 output_size);

// Backwards. Each returns grad_input with input's shape and dtype (only
// input's shape, dtype and device are used); grad_output must have input's
// dtype and device. f16/bf16 gradients are summed in f32 and rounded once.
// Deterministic: the same bits for any thread count.

/// d input of max_pool2d: scatters grad_output into the elements the
/// forward's `indices` (i64, grad_output's shape) chose; where overlapping
/// windows chose the same element, the gradients add. grad_output's leading
/// dims ([N, C] or [C]) must be input's; an index outside the H×W plane is an error.
Tensor max_pool2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& indices);

/// d input of avg_pool2d with these arguments (grad_output must have its
/// output shape): each element gets grad / divisor from every window that
/// summed it.
Tensor avg_pool2d_backward(const Tensor& grad_output, const Tensor& input, Int2 kernel, Int2 stride,
                           Int2 padding, bool ceil_mode, bool count_include_pad);

/// d input of adaptive_avg_pool2d; the output size is grad_output's last two dims.
Tensor adaptive_avg_pool2d_backward(const Tensor& grad_output, const Tensor& input);

}  // namespace ember::kernels
