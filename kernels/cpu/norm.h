// CPU batch norm and layer norm kernels (declarations); the loops are in
// kernels/cpu/norm.cpp. Views in, no Tensor.
#pragma once

#include "kernels/view.h"

namespace ember::kernels::cpu {

// Layouts. Batch norm: x, out, grad_y and grad_input are contiguous 3-d
// [N, C, S] (S: the trailing dims flattened). Layer norm: contiguous 2-d
// [R, M] (M: the normalized dims flattened). Per-channel or per-column vectors
// (weight, bias, running stats, weight and bias gradients) are 1-d of any
// floating dtype and stride; a View with data == nullptr is absent (weight 1,
// bias 0, no running stats, gradient not wanted). Saved statistics (save_mean,
// save_invstd, mean, rstd) are contiguous in the statistics dtype: f64 for f64
// x, else f32. Sums run in f64 in an order that depends on the shape only.

/// out = (x − mean)·invstd·w + b with the batch mean and biased variance of
/// each channel; writes save_mean and save_invstd and, when running_mean is
/// present, updates running_mean / running_var in place (unbiased variance
/// for running_var). N·S >= 2.
void batch_norm_forward(const View& out, const View& save_mean, const View& save_invstd,
                        const View& x, const View& weight, const View& bias,
                        const View& running_mean, const View& running_var, double momentum,
                        double eps);

/// out = (x − running_mean) / sqrt(running_var + eps)·w + b.
void batch_norm_inference(const View& out, const View& x, const View& weight, const View& bias,
                          const View& running_mean, const View& running_var, double eps);

/// Training-mode gradients; grad_input (contiguous [N, C, S]), grad_weight and
/// grad_bias may each be absent.
void batch_norm_backward(const View& grad_input, const View& grad_weight, const View& grad_bias,
                         const View& grad_y, const View& x, const View& weight,
                         const View& save_mean, const View& save_invstd);

/// Per row of x [R, M]: out = (x − mean)·rstd·w + b; writes mean and rstd [R].
void layer_norm_forward(const View& out, const View& mean, const View& rstd, const View& x,
                        const View& weight, const View& bias, double eps);

/// Layer norm gradients from the saved mean and rstd; grad_input ([R, M]),
/// grad_weight and grad_bias ([M]) may each be absent.
void layer_norm_backward(const View& grad_input, const View& grad_weight, const View& grad_bias,
                         const View& grad_y, const View& x, const View& weight, const View& mean,
                         const View& rstd);

}  // namespace ember::kernels::cpu
