// CUDA conv2d forward and backward through cuDNN (kernels/cuda/conv.cpp): the
// entry points of kernels/cpu/conv.h plus the stream they are queued on. The
// front (kernels/conv.cpp) has checked the arguments and made the operands
// contiguous NCHW; f16 and bf16 stay as they are (cuDNN accumulates them in
// f32). Plain C++: every build sees these declarations.
#pragma once

#include "../../core/cuda_context.h"
#include "../../core/dtype.h"
#include "../conv_args.h"

namespace ember::kernels::cuda {

/// out = conv2d(input, weight) + bias on contiguous device buffers of `dtype`
/// (f32, f64, f16, bf16); bias [o] may be null. Overwrites every element of
/// out. An Error when ember was built without cuDNN.
void conv2d(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
            const void* bias, void* out, StreamRef stream);

/// The gradients of conv2d given grad_out [n, o, oh, ow]: grad_input
/// [n, c, h, w], grad_weight [o, c / groups, kh, kw] and grad_bias [o], each
/// computed (and overwritten) only when its pointer is not null; input may be
/// null when grad_weight is, weight when grad_input is.
void conv2d_backward(const Conv2dShape& s, DType dtype, const void* grad_out, const void* input,
                     const void* weight, void* grad_input, void* grad_weight, void* grad_bias,
                     StreamRef stream);

/// conv2d and conv2d_backward on channels-last device buffers (cuDNN's NHWC
/// tensor and filter formats; f32, f16, bf16): input, out, grad_out and
/// grad_input [n, h, w, c]-ordered, weight and grad_weight [o, kh, kw, c /
/// groups]-ordered (a channels-last weight tensor's memory); bias and
/// grad_bias [o]. Otherwise as conv2d and conv2d_backward.
void conv2d_channels_last(const Conv2dShape& s, DType dtype, const void* input, const void* weight,
                          const void* bias, void* out, StreamRef stream);
void conv2d_backward_channels_last(const Conv2dShape& s, DType dtype, const void* grad_out,
                                   const void* input, const void* weight, void* grad_input,
                                   void* grad_weight, void* grad_bias, StreamRef stream);

}  // namespace ember::kernels::cuda
