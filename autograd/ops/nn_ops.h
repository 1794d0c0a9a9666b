// Differentiable convolution, pooling, normalization, dropout and losses:
// the functional forms the nn layers call (like torch.nn.functional).
#pragma once

#include <array>
#include <cstdint>

#include "../../core/generator.h"
#include "../../core/tensor.h"
#include "../../kernels/op_types.h"  // Int2

namespace ember {

/// conv2d as kernels/conv.h; gradients for input, weight and bias.
Tensor conv2d(const Tensor& input, const Tensor& weight, const Tensor& bias = {},
              Int2 stride = {1, 1}, Int2 padding = {0, 0}, Int2 dilation = {1, 1},
              int64_t groups = 1);
/// Max pooling (values only); the gradient goes to each window's maximum.
Tensor max_pool2d(const Tensor& input, Int2 kernel, Int2 stride = {0, 0}, Int2 padding = {0, 0},
                  Int2 dilation = {1, 1}, bool ceil_mode = false);
Tensor avg_pool2d(const Tensor& input, Int2 kernel, Int2 stride = {0, 0}, Int2 padding = {0, 0},
                  bool ceil_mode = false, bool count_include_pad = true);
Tensor adaptive_avg_pool2d(const Tensor& input, Int2 output_size);
/// Square windows given as one number, as libtorch's `max_pool2d(x, 2)`
/// (stride 0: the kernel's).
inline Tensor max_pool2d(const Tensor& input, int64_t kernel, int64_t stride = 0,
                         int64_t padding = 0) {
    return max_pool2d(input, Int2{kernel, kernel}, Int2{stride, stride}, Int2{padding, padding});
}
inline Tensor avg_pool2d(const Tensor& input, int64_t kernel, int64_t stride = 0,
                         int64_t padding = 0) {
    return avg_pool2d(input, Int2{kernel, kernel}, Int2{stride, stride}, Int2{padding, padding});
}

/// Batch norm over x [N, C, *]. training: batch statistics, and running_mean /
/// running_var (may be undefined) updated in place with `momentum`; otherwise
/// the running statistics are used. weight/bias [C] may be undefined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum = 0.1,
                  double eps = 1e-5);
/// relu(batch_norm(...)) as one op when training: the fused kernels of
/// kernels/norm.h (batch_norm_relu_forward / _backward), which save x and the
/// output and never materialize the pre-ReLU value or the masked gradient;
/// equal to batch_norm followed by relu bit for bit on the CPU. In eval mode
/// it is batch_norm (running statistics) followed by relu.
Tensor batch_norm_relu(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                       const Tensor& weight, const Tensor& bias, bool training,
                       double momentum = 0.1, double eps = 1e-5);
/// relu(batch_norm(x) + residual) as one op when training (a ResNet block's
/// end): the fused forward of kernels/norm.h (batch_norm_add_relu_forward)
/// adds the residual in batch norm's apply pass and never materializes the
/// normalized value or the sum; the backward is relu_backward (the
/// residual's gradient) and batch_norm_backward of it. Equal to the three
/// ops bit for bit on the CPU. residual has x's shape (and dtype, unless
/// autocast promotes both to f32). In eval mode it is the three ops.
Tensor batch_norm_add_relu(const Tensor& x, const Tensor& residual, const Tensor& running_mean,
                           const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                           bool training, double momentum = 0.1, double eps = 1e-5);
/// Layer norm over the trailing dims given by normalized_shape.
Tensor layer_norm(const Tensor& x, const Shape& normalized_shape, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);
/// Zeroes each element with probability p and scales the rest by 1/(1 − p)
/// when training (identity otherwise). The mask comes from `gen` (default:
/// the default generator) through Philox, so it is the same on CPU and CUDA.
Tensor dropout(const Tensor& x, double p, bool training, Generator* gen = nullptr);

enum class Reduction { mean, sum, none };

struct CrossEntropyOptions {
    double label_smoothing = 0.0;
    Reduction reduction = Reduction::mean;
    int64_t ignore_index = -100;  // targets equal to it add nothing (and do not count in the mean)
};
/// Fused log_softmax + NLL over logits [N, C] and class indices target [N]
/// (i64), forward and backward. The loss is f32 for f32/f16/bf16 logits.
Tensor cross_entropy(const Tensor& logits, const Tensor& target,
                     const CrossEntropyOptions& options = {});

struct NllLossOptions {
    Reduction reduction = Reduction::mean;
    int64_t ignore_index = -100;
};
/// −log_probs[i, target_i], reduced; log_probs floating [N, C], target i64
/// [N]. A target outside [0, C) that is not ignore_index is an error naming
/// nll_loss, the target, its row and the class count.
Tensor nll_loss(const Tensor& log_probs, const Tensor& target, const NllLossOptions& options = {});
/// (input − target)², reduced; both floating-point, of one shape.
Tensor mse_loss(const Tensor& input, const Tensor& target, Reduction reduction = Reduction::mean);

}  // namespace ember
