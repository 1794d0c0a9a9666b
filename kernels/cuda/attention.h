// Fused CUDA attention (kernels/cuda/attention*.cu): the entry points of
// kernels/cpu/attention.h plus the stream, for the front (kernels/attention.cpp).
// Plain C++: every build sees these declarations. Each returns false, having
// queued nothing, when no fused kernel takes the call (a head dim over 256);
// the front then runs the composite path.
#pragma once

#include "../../core/cuda_context.h"
#include "../attention_args.h"
#include "../view.h"

namespace ember::kernels::cuda {

/// out [B, H, Tq, Dv] and lse [B, H, Tq] (contiguous; f32, f64 for f64) from
/// q, k, v [B, H, T, D] (one floating dtype, innermost stride 1). f16/bf16
/// with D = Dv in {32, 64, 128} on tensor cores, Tq <= 4 by the decode
/// split, the rest a warp per row (kernels/cuda/attention_plan.h).
bool attention_forward(const View& out, const View& lse, const View& q, const View& k,
                       const View& v, const AttentionArgs& args, StreamRef stream);

/// dq, dk, dv (q's, k's, v's shapes and dtype, innermost stride 1) from
/// grad_out and the forward's out and lse. Overwrites them.
bool attention_backward(const View& dq, const View& dk, const View& dv, const View& grad_out,
                        const View& q, const View& k, const View& v, const View& out,
                        const View& lse, const AttentionArgs& args, StreamRef stream);

}  // namespace ember::kernels::cuda
