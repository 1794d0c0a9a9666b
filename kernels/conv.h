// 2-d convolution forward (cross-correlation, as PyTorch's conv2d).
// Returns a new tensor; docs/linalg.md describes the im2col + GEMM method.
#pragma once

#include <array>
#include <cstdint>

#include "core/tensor.h"

namespace ember::kernels {

/// A (height, width) pair: stride, padding, dilation, kernel or output size.
/// (kernels/pool.h declares the same alias.)
using Int2 = std::array<int64_t, 2>;

/// conv2d(input [N, C, H, W] or [C, H, W], weight [O, C/groups, kH, kW],
/// bias [O] or undefined) -> [N, O, OH, OW] with OH = (H + 2·ph − dh·(kH − 1)
/// − 1) / sh + 1 (and likewise OW). Zero padding; groups split C and O into
/// independent convolutions (groups = C is depthwise). f32 and f64; f16/bf16
/// are computed in f32 and rounded once. Input, weight and bias share one
/// dtype and one device.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              Int2 stride = {1, 1}, Int2 padding = {0, 0}, Int2 dilation = {1, 1},
              int64_t groups = 1);

}  // namespace ember::kernels
