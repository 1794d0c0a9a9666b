// CPU softmax and log_softmax over the middle dim of a contiguous
// [outer, size, inner] buffer (the layout of kernels/cpu/reduce.h).
#pragma once

#include "reduce.h"

namespace ember::kernels::cpu {

/// out = exp(x - max) / sum exp(x - max) along `size`; floating dtypes,
/// f16/bf16 computed in f32. in and out are contiguous and of one dtype.
void softmax(const View& out, const View& in, ReduceShape s);
/// out = (x - max) - log(sum exp(x - max)) along `size`.
void log_softmax(const View& out, const View& in, ReduceShape s);
/// grad_x = y * (grad_y - sum(grad_y * y)) along `size`; all three contiguous
/// and of one floating dtype; the sum accumulates in f64.
void softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s);
/// grad_x = grad_y - exp(y) * sum(grad_y) along `size` (y: the log_softmax output).
void log_softmax_backward(const View& grad_x, const View& grad_y, const View& y, ReduceShape s);

}  // namespace ember::kernels::cpu
