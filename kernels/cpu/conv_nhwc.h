// CPU direct convolution on channels-last (NHWC) tensors (f32): conv2d
// forward on register tiles over output pixels × 16-wide vectors of output
// channels, reading the input as it lies (no phase planes: a stride is a
// step between the pixels a tile broadcasts) and writing the output in
// place. kernels/cpu/conv.cpp calls it for a channels-last input where
// `fits` says so. Raw buffers: input [N, H, W, C], weight [O, C, kH, kW],
// output [N, OH, OW, O]; groups = 1. Bit-identical for any OpenMP thread count.
#pragma once

#include "kernels/conv.h"

namespace ember::kernels::cpu::nhwc {

/// Whether the channels-last kernel takes this f32 conv: groups 1, output
/// channels a multiple of 16 (whole vectors), at most kMaxChannels input
/// and output channels (the sizes measured: bench/RESULTS.md). Depends on
/// the sizes only.
bool fits(const Conv2dShape& s);
inline constexpr int64_t kMaxChannels = 64;

/// out [n, oh, ow, o] = conv2d(in [n, h, w, c], weight) + bias (bias may be null).
void forward(const Conv2dShape& s, const float* in, const float* weight, const float* bias,
             float* out);

}  // namespace ember::kernels::cpu::nhwc
