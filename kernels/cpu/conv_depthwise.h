// CPU depthwise conv2d (groups = C, each input channel convolved with its
// own O/C kernels): forward, grad_input and grad_weight as loops over one
// channel's plane at a time, no im2col matrix. kernels/cpu/conv.cpp and
// kernels/cpu/conv_backward.cpp call it where `fits` says so. Raw
// contiguous NCHW buffers, weights [O, 1, kH, kW]; f32 and f64.
// Bit-identical for any OpenMP thread count.
#pragma once

#include "../conv_args.h"

namespace ember::kernels::cpu::depthwise {

/// Whether the depthwise kernels take this conv: groups = C > 1 (O is then
/// a multiple of C: O/C kernels per channel). Any kernel size, stride,
/// padding and dilation.
bool fits(const Conv2dShape& s);

/// out [n, o, oh, ow] = conv2d(in, weight) + bias (bias may be null).
template <class T>
void forward(const Conv2dShape& s, const T* in, const T* weight, const T* bias, T* out);
/// grad_input [n, c, h, w] given grad_out [n, o, oh, ow]; overwritten.
template <class T>
void grad_input(const Conv2dShape& s, const T* grad_out, const T* weight, T* grad_input);
/// grad_weight [o, 1, kh, kw] given grad_out and the input; overwritten.
template <class T>
void grad_weight(const Conv2dShape& s, const T* grad_out, const T* in, T* grad_weight);

}  // namespace ember::kernels::cpu::depthwise
