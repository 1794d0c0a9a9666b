// CPU conv2d forward and backward (declarations); the kernels are in
// kernels/cpu/conv.cpp and kernels/cpu/conv_backward.cpp.
// Raw contiguous NCHW buffers (channels-last where named) and a size struct,
// no Tensor.
#pragma once

#include <cstdint>

#include "../../core/dtype.h"
#include "../conv_args.h"

namespace ember::kernels::cpu {

/// out = conv2d(input, weight) + bias on contiguous buffers of `dtype` (f32
/// or f64); bias [o] may be null. Overwrites every element of out.
void conv2d(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
            const void* bias, void* out);

/// Whether conv2d_channels_last takes this conv of `dtype`: f32, or bf16 on
/// the bf16 kernels (kernels/cpu/conv_nhwc_bf16.h; elsewhere bf16 computes
/// in f32). Where it does not, the front computes in NCHW and converts.
bool conv2d_channels_last_fits(const Conv2dShape& s, DType dtype);
/// conv2d on channels-last buffers: input [n, h, w, c], out [n, oh, ow, o];
/// weight [o, c, kh, kw] and bias [o] (may be null) as for conv2d.
/// Overwrites every element of out. Only where conv2d_channels_last_fits.
void conv2d_channels_last(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
                          const void* bias, void* out);

/// The gradients of conv2d given grad_out [n, o, oh, ow], on contiguous
/// buffers of `dtype` (f32 or f64): grad_input [n, c, h, w], grad_weight
/// [o, c / groups, kh, kw] and grad_bias [o], each computed only when its
/// pointer is not null, and then overwritten entirely; input may be null
/// when grad_weight is, weight when grad_input is. Bit-identical for any
/// OpenMP thread count.
void conv2d_backward(const Conv2dShape& s, DType dtype, const void* grad_out, const void* input,
                     const void* weight, void* grad_input, void* grad_weight, void* grad_bias);

/// Whether conv2d_backward_channels_last computes the asked-for gradients of
/// this conv of `dtype`, f32 or bf16 (where it does not, the front computes
/// in NCHW).
bool conv2d_backward_channels_last_fits(const Conv2dShape& s, DType dtype, bool grad_input,
                                        bool grad_weight);
/// conv2d_backward on channels-last buffers: grad_out [n, oh, ow, o], input
/// [n, h, w, c] and grad_input [n, h, w, c]; weight, grad_weight and
/// grad_bias as for conv2d_backward (each computed only when not null).
/// Only where conv2d_backward_channels_last_fits.
void conv2d_backward_channels_last(const Conv2dShape& s, DType dtype, const void* grad_out,
                                   const void* input, const void* weight, void* grad_input,
                                   void* grad_weight, void* grad_bias);

}  // namespace ember::kernels::cpu
