// softmax and log_softmax over one dim, numerically stable (the max is
// subtracted first); floating dtypes, f16/bf16 computed in f32, any strides.
#pragma once

#include "core/tensor.h"

namespace ember::kernels {

/// exp(x - max) / sum(exp(x - max)) along `dim` (negative counts from the
/// end). Returns a new contiguous tensor of x's dtype. A row holding NaN, or
/// only -inf, gives NaN.
Tensor softmax(const Tensor& x, int64_t dim);
/// (x - max) - log(sum(exp(x - max))) along `dim`: finite for large |x|.
Tensor log_softmax(const Tensor& x, int64_t dim);

}  // namespace ember::kernels
