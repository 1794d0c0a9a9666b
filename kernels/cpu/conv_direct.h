// CPU direct convolution for small channel counts (f32): conv2d forward,
// grad_input and grad_weight without an im2col matrix, in register tiles
// over output channels × 16-wide pixel vectors. kernels/cpu/conv.cpp and
// kernels/cpu/conv_backward.cpp call it where `fits` says so and keep the
// im2col + GEMM path everywhere else. Raw contiguous NCHW buffers, OIHW
// weights, groups = 1. Bit-identical for any OpenMP thread count.
#pragma once

#include "../conv_args.h"

namespace ember::kernels::cpu::direct {

enum class Pass { forward, grad_input, grad_weight };

/// Whether the direct kernel of `pass` takes this f32 conv: groups 1, a
/// kernel larger than 1×1 (im2col's GEMM is as fast on those), at
/// most kMaxChannels input and output channels (above that im2col's GEMM is
/// as fast: bench/RESULTS.md), and channel counts that fill whole register
/// tiles — output channels a multiple of 8 for forward, of 16 for
/// grad_weight, input channels a multiple of 8 for grad_input. Depends on
/// the sizes only.
bool fits(const Conv2dShape& s, Pass pass);
inline constexpr int64_t kMaxChannels = 64;

/// out [n, o, oh, ow] = conv2d(in, weight) + bias (bias may be null).
void forward(const Conv2dShape& s, const float* in, const float* weight, const float* bias,
             float* out);
/// grad_input [n, c, h, w] of conv2d given grad_out [n, o, oh, ow]; overwritten.
void grad_input(const Conv2dShape& s, const float* grad_out, const float* weight,
                float* grad_input);
/// grad_weight [o, c, kh, kw] of conv2d given grad_out; overwritten.
void grad_weight(const Conv2dShape& s, const float* grad_out, const float* in, float* grad_weight);

}  // namespace ember::kernels::cpu::direct
