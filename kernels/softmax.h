// softmax and log_softmax over one dim, numerically stable (the max is
// subtracted first), and their backwards from the saved output; floating
// dtypes, f16/bf16 computed in f32, any strides. The kernels take the
// [outer, size, inner] layout of the reductions (ReduceShape, kernels/reduce.h).
#pragma once

#include "../core/tensor.h"
#include "reduce.h"

namespace ember::kernels {

/// exp(x - max) / sum(exp(x - max)) along `dim` (negative counts from the
/// end). Returns a new contiguous tensor of x's dtype. A row holding NaN, or
/// only -inf, gives NaN.
Tensor softmax(const Tensor& x, int64_t dim);
/// (x - max) - log(sum(exp(x - max))) along `dim`: finite for large |x|.
Tensor log_softmax(const Tensor& x, int64_t dim);

/// Backward of softmax from its output y: grad_x = y * (grad_y - sum(grad_y * y, dim)).
/// grad_y and y have one shape and floating dtype; the sum accumulates in f64.
/// Returns a new contiguous tensor of that dtype.
Tensor softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim);
/// Backward of log_softmax from its output y: grad_x = grad_y - exp(y) * sum(grad_y, dim).
Tensor log_softmax_backward(const Tensor& grad_y, const Tensor& y, int64_t dim);

}  // namespace ember::kernels
