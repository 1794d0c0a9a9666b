// Cross-entropy over logits [N, C] and class-index targets [N]: log_softmax
// and the negative log-likelihood fused into one pass per row, with label
// smoothing and an ignored target value (PyTorch's semantics, per sample).
#pragma once

#include <cstdint>

#include "../core/tensor.h"
#include "loss_args.h"

namespace ember::kernels {

/// What cross_entropy_forward returns, both [N].
struct CrossEntropyForward {
    /// Per-sample loss, 0 for rows whose target is ignore_index: f32 for
    /// f32/f16/bf16 logits, f64 for f64 logits.
    Tensor loss;
    /// log Σ_c exp(x[i, c]), saved for the backward: f64 for every logits
    /// dtype, because its f32 rounding at |x| ~ 1e4 (5e-4) would become the
    /// backward's relative error (Note [lse in f64], kernels/cpu/loss.cpp).
    Tensor lse;
};

/// Per-sample cross-entropy with label smoothing ε in [0, 1]:
///   loss_i = lse_i − (1 − ε)·x[i, t_i] − (ε / C)·Σ_c x[i, c],
/// which is −Σ_c q_c log softmax(x_i)_c for q = (1 − ε)·onehot(t_i) + ε / C.
/// Rows whose target equals ignore_index get loss 0. logits: floating [N, C]
/// with C >= 1, any strides (a strided input is copied first); target: i64
/// [N]. A target outside [0, C) other than ignore_index is an error naming
/// the first such row and its value. Sums run in f64, so logits of magnitude
/// 1e4 give finite, accurate losses.
CrossEntropyForward cross_entropy_forward(const Tensor& logits, const Tensor& target,
                                          double label_smoothing, int64_t ignore_index);

/// grad_logits[i, c] = g_i·(exp(x[i, c] − lse_i) − (1 − ε)·[c == t_i] − ε / C),
/// zero rows for ignored targets, the exponent and exp in f64. grad_loss is
/// the [N] upstream gradient of the per-sample loss (already divided by the
/// count when the caller takes a mean), any floating dtype; lse is
/// cross_entropy_forward's (f64 [N]). Returns a new
/// contiguous tensor of the logits' shape and dtype. Targets are checked as in
/// the forward.
Tensor cross_entropy_backward(const Tensor& grad_loss, const Tensor& logits, const Tensor& lse,
                              const Tensor& target, double label_smoothing, int64_t ignore_index);

/// Throws an ember::Error led by `op` (the op the user called, e.g.
/// "nll_loss") for the first target outside [0, classes) that is not
/// ignore_index: "nll_loss: target 5 at row 2 is out of range for 5 classes
/// (ignore_index -100)". target: i64 [N], any layout. Composite losses call
/// it before indexing with the targets, so the error names them and the
/// argument rather than the gather inside. On a CUDA device the check is a
/// kernel that raises the device error flag (nothing is read back): the
/// Error comes at the next synchronization (Note [Device error flag]), as do
/// the bad-target errors of cross_entropy_forward and _backward.
void check_class_targets(const char* op, const Tensor& target, int64_t classes,
                         int64_t ignore_index);

}  // namespace ember::kernels
