// Batch normalization (training and eval) and layer normalization, forward
// and backward, as PyTorch defines them. The math, what is saved and the
// numerics are in docs/normalization.md.
#pragma once

#include <array>
#include <cstdint>

#include "../core/tensor.h"
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
// relu bit for bit (tests/kernels/test_norm.cpp).
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

// ---- Fronts ----

// Common rules below. x: f32, f64, f16 or bf16, any strides (a strided input
// is copied first); outputs and input gradients are new tensors of x's
// dtype, shape and memory format (channels-last for a channels-last x,
// else contiguous). Statistics accumulate in f64 in an order fixed by the
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
