// CUDA softmax and log_softmax over the middle dim of a contiguous
// [outer, size, inner] buffer, and their backwards (kernels/cuda/softmax.cu):
// the entry points of kernels/cpu/softmax.h plus the stream they are queued
// on. Plain C++: every build sees these declarations.
#pragma once

#include "../../core/cuda_context.h"
#include "../reduce_args.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// out = exp(x - max) / sum exp(x - max) along `size`; floating dtypes,
/// f16/bf16 computed in f32. in and out are contiguous and of one dtype.
void softmax(const View& out, const View& in, ReduceShape s, StreamRef stream);
/// out = (x - max) - log(sum exp(x - max)) along `size`.
void log_softmax(const View& out, const View& in, ReduceShape s, StreamRef stream);
/// grad_x = y * (grad_y - sum(grad_y * y)) along `size`, the sum in f64.
void softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s,
                      StreamRef stream);
/// grad_x = grad_y - exp(y) * sum(grad_y) along `size`, the sum in f64.
void log_softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s,
                          StreamRef stream);

}  // namespace ember::kernels::cuda
