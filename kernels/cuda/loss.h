// CUDA fused cross-entropy (kernels/cuda/loss.cu): the entry points of
// kernels/cpu/loss.h plus the stream they are queued on. Targets are checked
// inside the kernels: a bad one raises the device error flag (Note [Device
// error flag]) and surfaces as an ember::Error at the next synchronization.
// Plain C++: every build sees these declarations.
#pragma once

#include "../../core/cuda_context.h"
#include "../loss_args.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// loss [N] (contiguous, the accumulation dtype of logits: f32 or f64) and
/// lse [N] (contiguous f64) from logits [N, C] (contiguous, floating) and
/// targets (contiguous i64 [N]). A target outside [0, C) that is not
/// ignore_index raises "cross_entropy_forward: target <t> at position <row>"
/// and gets loss NaN.
void cross_entropy_forward(const View& loss, const View& lse, const View& logits,
                           const View& target, const CrossEntropyArgs& a, StreamRef stream);

/// grad_logits [N, C] (contiguous, logits' dtype) from grad_loss [N]
/// (contiguous, the accumulation dtype), lse [N] (contiguous f64), logits
/// and targets; a bad target raises as in the forward and gets a NaN row.
void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& logits,
                            const View& lse, const View& target, const CrossEntropyArgs& a,
                            StreamRef stream);

/// Raises the error flag, as `op` (a string literal: the flag keeps the
/// pointer), for a target outside [0, classes) that is not ignore_index.
/// target: contiguous i64 [N].
void check_class_targets(const char* op, const View& target, const CrossEntropyArgs& a,
                         StreamRef stream);

}  // namespace ember::kernels::cuda
