// CPU direct convolution on channels-last (NHWC) tensors (f32): conv2d
// forward, grad_input and grad_weight on register tiles, reading the
// tensors as they lie (no phase planes, no channel-last copies: a stride is
// a step between the pixels a tile reads) and writing results in place.
// kernels/cpu/conv.cpp and conv_backward.cpp call it for channels-last
// operands where `fits` says so. Raw buffers: input [N, H, W, C], grad_out
// [N, OH, OW, O], weight [O, C, kH, kW]; groups = 1. Bit-identical for any
// OpenMP thread count.
#pragma once

#include "../conv_args.h"
#include "conv_direct.h"

namespace ember::kernels::cpu::nhwc {

using direct::Pass;

/// Whether the channels-last kernel of `pass` takes this f32 conv: groups
/// 1, at most kMaxChannels input and output channels (the sizes measured:
/// bench/RESULTS.md), and the channels a tile vectorizes over in whole
/// 16-lane vectors — output channels for forward and grad_weight, input
/// channels for grad_input. Depends on the sizes only.
bool fits(const Conv2dShape& s, Pass pass);
inline constexpr int64_t kMaxChannels = 64;

/// out [n, oh, ow, o] = conv2d(in [n, h, w, c], weight) + bias (bias may be null).
void forward(const Conv2dShape& s, const float* in, const float* weight, const float* bias,
             float* out);
/// grad_input [n, h, w, c] of conv2d given grad_out [n, oh, ow, o]; overwritten.
void grad_input(const Conv2dShape& s, const float* grad_out, const float* weight,
                float* grad_input);
/// grad_weight [o, c, kh, kw] of conv2d given grad_out [n, oh, ow, o] and
/// in [n, h, w, c]; overwritten.
void grad_weight(const Conv2dShape& s, const float* grad_out, const float* in, float* grad_weight);

}  // namespace ember::kernels::cpu::nhwc
