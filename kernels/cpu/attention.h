// The fused CPU attention kernels (kernels/attention.h): Views in, no Tensor.
#pragma once

#include "../attention_args.h"
#include "../view.h"

namespace ember::kernels::cpu {

/// out [B, H, Tq, Dv] and lse [B, H, Tq] (contiguous; f32, or f64 for f64)
/// from q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]: one floating
/// dtype for q, k, v and out; every innermost stride 1. One (b, h) per
/// thread at a time, so the result does not depend on the thread count.
void attention_forward(const View& out, const View& lse, const View& q, const View& k,
                       const View& v, const AttentionArgs& args);

/// dq, dk, dv (the shapes and dtype of q, k, v; innermost stride 1) from
/// grad_out and the forward's out and lse. Overwrites them (=).
void attention_backward(const View& dq, const View& dk, const View& dv, const View& grad_out,
                        const View& q, const View& k, const View& v, const View& out,
                        const View& lse, const AttentionArgs& args);

}  // namespace ember::kernels::cpu
