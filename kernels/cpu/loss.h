// CPU cross-entropy kernels (declarations); the loops are in kernels/cpu/loss.cpp.
// Views in, no Tensor.
#pragma once

#include <cstdint>
#include <optional>

#include "../loss_args.h"
#include "../view.h"

namespace ember::kernels::cpu {

/// The first row i whose target is outside [0, classes) and not ignore_index,
/// or nothing. target: contiguous i64 [N]. Serial: the fronts call it before
/// the parallel kernels, which then never see a bad target.
std::optional<int64_t> cross_entropy_bad_target(const View& target, const CrossEntropyArgs& a);

/// loss [N] (contiguous, the accumulation dtype of logits: f32 or f64) and
/// lse [N] (contiguous f64) from logits [N, C] (contiguous, floating) and
/// valid targets.
void cross_entropy_forward(const View& loss, const View& lse, const View& logits,
                           const View& target, const CrossEntropyArgs& a);

/// grad_logits [N, C] (contiguous, logits' dtype) from grad_loss [N]
/// (contiguous, the accumulation dtype), lse [N] (contiguous f64), logits
/// and valid targets.
void cross_entropy_backward(const View& grad_logits, const View& grad_loss, const View& logits,
                            const View& lse, const View& target, const CrossEntropyArgs& a);

}  // namespace ember::kernels::cpu
