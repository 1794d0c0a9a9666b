// Batch normalization (training and eval) and layer normalization, forward
// and backward, as PyTorch defines them. The math, what is saved and the
// numerics are in docs/normalization.md.
#pragma once

#include <array>
#include <cstdint>

#include "../core/tensor.h"
#include "norm_args.h"
#include "view.h"

namespace ember::kernels {

// ---- Fronts ----

// Common rules below. x: f32, f64, f16 or bf16, any strides (a strided input
// is copied first); outputs and input gradients are new tensors of x's
// dtype and shape; batch norm's keep x's memory format (channels-last for a
// channels-last x, else contiguous), layer norm's are contiguous (it
// normalizes the trailing dims, as PyTorch's layer_norm). Statistics accumulate in f64 in an order fixed by the
// shape alone (results do not depend on the number of threads), and saved
// statistics are f32 for f32/f16/bf16 inputs and f64 for f64 ("the statistics
// dtype"). weight and bias are optional (an undefined Tensor means none: 1 and
// 0), any floating dtype. eps must be > 0.

/// What batch_norm_forward returns: y, and the batch mean and 1 / sqrt(var + eps)
/// per channel ([C], the statistics dtype) that the backward needs.
struct BatchNormForward {
    Tensor output, save_mean, save_invstd;
};

/// Training-mode batch norm over x [N, C, *]: per channel c, the mean and the
/// biased variance over N and the trailing dims (n values), then
/// y = (x − mean)·invstd·w + b. weight and bias are [C]. When running_mean
/// and running_var ([C], floating, both or neither) are given, they are
/// updated in place: running = (1 − momentum)·running + momentum·stat, with the
/// unbiased variance var·n/(n − 1) for running_var (PyTorch's rule). n must
/// be at least 2.
BatchNormForward batch_norm_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                    const Tensor& running_mean, const Tensor& running_var,
                                    double momentum, double eps);

/// Eval-mode batch norm: y = (x − running_mean) / sqrt(running_var + eps)·w + b
/// with the running statistics (required, [C]).
Tensor batch_norm_inference(const Tensor& x, const Tensor& weight, const Tensor& bias,
                            const Tensor& running_mean, const Tensor& running_var, double eps);

/// Gradients of a normalization: input (x's dtype and shape), weight and bias
/// (the weight's shape, in its dtype, or the statistics dtype without a
/// weight). A gradient that was not asked for is an undefined Tensor.
struct NormGrads {
    Tensor input, weight, bias;
};

/// Training-mode batch norm backward (the batch statistics depend on x), from
/// the forward's save_mean and save_invstd. With x̂ = (x − mean)·invstd:
///   grad_input = w·invstd·(g − mean(g) − x̂·mean(g·x̂)) (means per channel),
///   grad_weight = Σ g·x̂, grad_bias = Σ g.
/// need = {input, weight, bias} says which gradients to compute.
NormGrads batch_norm_backward(const Tensor& grad_y, const Tensor& x, const Tensor& weight,
                              const Tensor& save_mean, const Tensor& save_invstd,
                              std::array<bool, 3> need);

/// relu(batch_norm_forward(...)) in one op (Note [Fused batch norm + ReLU]):
/// the same checks, statistics and running-statistics update; output =
/// max(y, 0).
BatchNormForward batch_norm_relu_forward(const Tensor& x, const Tensor& weight, const Tensor& bias,
                                         const Tensor& running_mean, const Tensor& running_var,
                                         double momentum, double eps);

/// relu(batch_norm_forward(...) + residual) in one op (Note [Fused batch
/// norm + ReLU]): residual has x's shape, dtype and device (any strides);
/// otherwise as batch_norm_relu_forward.
BatchNormForward batch_norm_add_relu_forward(const Tensor& x, const Tensor& residual,
                                             const Tensor& weight, const Tensor& bias,
                                             const Tensor& running_mean, const Tensor& running_var,
                                             double momentum, double eps);

/// Gradients of batch_norm_relu_forward: batch_norm_backward of
/// grad_y·[output > 0], where output is the fused forward's output (x's shape
/// and dtype, any strides).
NormGrads batch_norm_relu_backward(const Tensor& grad_y, const Tensor& output, const Tensor& x,
                                   const Tensor& weight, const Tensor& save_mean,
                                   const Tensor& save_invstd, std::array<bool, 3> need);

/// What layer_norm_forward returns: y, and the mean and 1 / sqrt(var + eps) of
/// each normalized row, shaped like x with the normalized dims set to 1 (the
/// statistics dtype).
struct LayerNormForward {
    Tensor output, mean, rstd;
};

/// Layer norm over the last normalized_shape.size() dims of x, which must
/// equal normalized_shape (non-empty): per row, the mean and the biased
/// variance, y = (x − mean)·rstd·w + b with weight and bias of
/// normalized_shape. A row of zero elements has NaN statistics.
LayerNormForward layer_norm_forward(const Tensor& x, const Shape& normalized_shape,
                                    const Tensor& weight, const Tensor& bias, double eps);

/// Layer norm backward from the forward's mean and rstd. With
/// x̂ = (x − mean)·rstd and h = g·w (means over each row):
///   grad_input = rstd·(h − mean(h) − x̂·mean(h·x̂)),
///   grad_weight = Σ_rows g·x̂, grad_bias = Σ_rows g.
NormGrads layer_norm_backward(const Tensor& grad_y, const Tensor& x, const Shape& normalized_shape,
                              const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                              std::array<bool, 3> need);

}  // namespace ember::kernels
