// What the normalization kernels take (kernels/norm.h is the front): the
// views and scalars of one batch norm or layer norm call. No Tensor: both
// backends include this.
#pragma once

#include "view.h"

namespace ember::kernels {

// ---- What the kernels take (both backends) ----
// Batch norm: x, out, grad_y and grad_input are 3-d [N, C, S] (S: the
// trailing dims flattened) of one dense layout: contiguous, or a
// channels-last x's — on the CPU as the [N, C, S] view with strides
// (S·C, 1, C), on CUDA as a contiguous [N·H·W, C, 1]. Layer norm: contiguous 2-d [R, M] (M: the
// normalized dims flattened). Per-channel or per-column vectors (weight,
// bias, running stats, weight and bias gradients) are 1-d of any floating
// dtype and stride; a View with data == nullptr is absent (weight 1, bias 0,
// no running stats, gradient not wanted). Saved statistics (save_mean,
// save_invstd, mean, rstd) are contiguous in the statistics dtype: f64 for
// f64 x, else f32. Sums run in f64 in an order that depends on the shape only.

/// One batch norm forward. Training: writes out, save_mean and save_invstd
/// (N·S >= 2) and updates running_mean / running_var in place when present
/// (unbiased variance for running_var). Inference: out from the running
/// statistics; save_* and momentum are unused. relu (training only): out =
/// max(y, 0), applied to y rounded to x's dtype (Note [Fused batch norm + ReLU]).
/// residual (training with relu only; [N, C, S], x's dtype and layout): out
/// = max(y + residual, 0), y rounded to x's dtype, the sum rounded again.
struct BatchNormArgs {
    View out, save_mean, save_invstd, x, weight, bias, running_mean, running_var;
    double momentum = 0, eps = 0;
    bool relu = false;
    View residual = {};
};

/// One batch norm backward (training mode); grad_input ([N, C, S]),
/// grad_weight and grad_bias may each be absent. relu_out, when present, is
/// the fused forward's output [N, C, S] (x's dtype and layout): grad_y then
/// counts only where relu_out > 0, the ReLU's backward folded in.
struct BatchNormBackwardArgs {
    View grad_input, grad_weight, grad_bias, grad_y, x, weight, save_mean, save_invstd;
    View relu_out = {};
};

// Note [Fused batch norm + ReLU]
// batch_norm_relu_forward is batch norm's training forward with max(·, 0) in
// its apply pass; batch_norm_relu_backward is batch norm's backward with
// grad_y replaced by grad_y·[y > 0], y the fused output (y > 0 exactly where
// the pre-ReLU value is > 0). Neither materializes the pre-ReLU tensor nor
// the masked gradient. The ReLU is applied to the value already rounded to
// x's dtype (so an f16 value rounding to −0 stays −0, as relu(batch_norm(x))
// gives), and the mask enters the backward's sums and apply pass exactly as
// a gradient of 0 would: on the CPU the results equal batch_norm followed by
// relu bit for bit (tests/kernels/test_norm_fused.cpp).
// batch_norm_add_relu_forward adds a residual (a ResNet block's skip) in the
// same apply pass: relu(batch_norm(x) + residual), with batch norm's value
// rounded to x's dtype before the add and the sum rounded before the ReLU,
// as the three ops give. Its backward needs no kernel of its own: the
// residual's gradient is relu_backward(grad_y, output), and batch norm's is
// batch_norm_backward of that.

/// One layer norm forward over rows of x [R, M]: writes out, mean and rstd [R].
struct LayerNormArgs {
    View out, mean, rstd, x, weight, bias;
    double eps = 0;
};

/// One layer norm backward; grad_input ([R, M]), grad_weight and grad_bias
/// ([M]) may each be absent.
struct LayerNormBackwardArgs {
    View grad_input, grad_weight, grad_bias, grad_y, x, weight, mean, rstd;
};

}  // namespace ember::kernels
