// CPU direct convolution on channels-last (NHWC) bf16 tensors: conv2d
// forward, grad_input and grad_weight on AVX512_BF16's VDPBF16PS (pairs of
// bf16 products summed in f32), or its emulation by f32 FMAs in the same
// order where the CPU lacks the instruction or set_cpu_bf16 says so (the
// same bits for normal numbers; no faster than f32). What conv2d and
// conv2d_backward run for bf16 channels-last operands where `fits` says so
// (kernels/cpu/policy.h); elsewhere bf16 computes in f32. Raw buffers of bf16
// bits: input [N, H, W, C], grad_out [N, OH, OW, O], weight [O, C, kH, kW];
// groups = 1. Results rounded once from the f32 sums (nearest even);
// subnormal operands read as zero. Bit-identical for any OpenMP thread count.
#pragma once

#include <cstdint>

#include "../conv_args.h"
#include "conv_direct.h"

namespace ember::kernels::cpu::nhwc_bf16 {

using direct::Pass;

/// Whether the bf16 channels-last kernel of `pass` takes this conv: the CPU
/// has AVX-512F (the emulation's vectors too), groups 1, at most 64 input
/// and output channels, and the channels a tile writes in whole 16-lane
/// vectors — output channels for forward and grad_weight, input channels
/// for grad_input.
bool fits(const Conv2dShape& s, Pass pass);

/// out [n, oh, ow, o] = conv2d(in [n, h, w, c], weight) + bias (bias may be null).
void forward(const Conv2dShape& s, const uint16_t* in, const uint16_t* weight,
             const uint16_t* bias, uint16_t* out);
/// grad_input [n, h, w, c] of conv2d given grad_out [n, oh, ow, o]; overwritten.
void grad_input(const Conv2dShape& s, const uint16_t* grad_out, const uint16_t* weight,
                uint16_t* grad_input);
/// grad_weight [o, c, kh, kw] of conv2d given grad_out [n, oh, ow, o] and
/// in [n, h, w, c]: f32 sums over the batch, rounded once; overwritten.
void grad_weight(const Conv2dShape& s, const uint16_t* grad_out, const uint16_t* in,
                 uint16_t* grad_weight);

}  // namespace ember::kernels::cpu::nhwc_bf16
