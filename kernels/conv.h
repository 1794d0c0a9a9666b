// 2-d convolution (cross-correlation, as PyTorch's conv2d): the forward and
// the kernel-level backward the autograd op calls. Each returns new tensors;
// docs/linalg.md describes the im2col + GEMM method and the backward math.
#pragma once

#include <array>
#include <cstdint>

#include "../core/tensor.h"
#include "conv_args.h"
#include "op_types.h"

namespace ember::kernels {

// Int2 (a height, width pair): kernels/op_types.h.

/// conv2d(input [N, C, H, W] or [C, H, W], weight [O, C/groups, kH, kW],
/// bias [O] or undefined) -> [N, O, OH, OW] with OH = (H + 2·ph − dh·(kH − 1)
/// − 1) / sh + 1 (and likewise OW). Zero padding; groups split C and O into
/// independent convolutions (groups = C is depthwise). f32 and f64; f16/bf16
/// are computed in f32 and rounded once. Input, weight and bias share one
/// dtype and one device.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              Int2 stride = {1, 1}, Int2 padding = {0, 0}, Int2 dilation = {1, 1},
              int64_t groups = 1);

/// The gradients conv2d_backward returns; a gradient not asked for is undefined.
struct Conv2dGrads {
    Tensor input, weight, bias;
};

/// Gradients of conv2d(input, weight, bias, stride, padding, dilation, groups)
/// given grad_output, which must have exactly the forward's output shape
/// ([N, O, OH, OW], or [O, OH, OW] for an unbatched [C, H, W] input) and the
/// dtype and device of input and weight. `need` = {input, weight, bias}
/// selects what to compute: grad_input = col2im(Wᵀ · dY) per group,
/// grad_weight = Σ_n dY · im2col(X)ᵀ, grad_bias = Σ dY over N, OH, OW (the
/// bias's value does not matter, so it is not an argument). Each has its
/// operand's shape and dtype; f16/bf16 are computed in f32 and rounded once.
/// Bit-identical for any OpenMP thread count.
Conv2dGrads conv2d_backward(const Tensor& grad_output, const Tensor& input, const Tensor& weight,
                            Int2 stride, Int2 padding, Int2 dilation, int64_t groups,
                            std::array<bool, 3> need = {true, true, true});

}  // namespace ember::kernels
