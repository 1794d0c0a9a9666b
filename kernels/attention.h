// Scaled dot-product attention, softmax(scale · q kᵀ + mask) · v, forward and
// backward. The CPU kernel is fused and blocked (FlashAttention's online
// softmax): the forward keeps only each row's log-sum-exp, the backward
// recomputes the probabilities tile by tile, and no [Tq, Tk] matrix is ever
// allocated. On CUDA fused kernels do the same (kernels/cuda/attention.h:
// tensor cores for f16/bf16, a warp per row otherwise, a decode split for a
// few rows against a long cache); the composite path, which materializes the
// scores, takes the calls they do not (head dims over 256) and is on the CPU
// the benchmark's and the tests' peer. docs/attention.md.
#pragma once

#include <cstdint>

#include "../core/tensor.h"
#include "attention_args.h"

namespace ember::kernels {

/// Philox blocks a dropout of attention over [B, H, Tq, Tk] consumes.
uint64_t attention_dropout_blocks(int64_t b, int64_t h, int64_t tq, int64_t tk);

/// The result of the forward: out [B, H, Tq, Dv] in q's dtype (a view of
/// [B, Tq, H, Dv] memory, so out.transpose(1, 2) is contiguous) and the
/// log-sum-exp of each row's scaled, masked scores, lse [B, H, Tq] (f32;
/// f64 for f64 inputs) — what the backward needs instead of the probabilities.
struct AttentionForward {
    Tensor out, lse;
};

/// q [B, H, Tq, D], k [B, H, Tk, D], v [B, H, Tk, Dv]: one floating dtype
/// (f16/bf16 computed in f32 on the CPU), one device, any strides (a
/// non-unit innermost stride is copied first). Tq, Tk >= 1.
AttentionForward attention_forward(const Tensor& q, const Tensor& k, const Tensor& v,
                                   const AttentionArgs& args);

/// The gradients of q, k, v given grad_out (out's shape) and the forward's
/// out and lse, with the same args (the dropout mask is drawn again). Each
/// gradient has its input's dtype and shape: new tensors, or written into
/// `into`'s when given (views of one buffer, say: the gradient of a packed
/// q, k, v projection; their last dim unit-stride).
struct AttentionGrads {
    Tensor q, k, v;
};
AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k,
                                  const Tensor& v, const Tensor& out, const Tensor& lse,
                                  const AttentionArgs& args, const AttentionGrads* into = nullptr);

/// The same forward and backward composed of other kernels (matmul, amax,
/// exp, sum, where, dropout_forward), materializing the [B, H, Tq, Tk]
/// scores and probabilities: the CUDA path, and on the CPU the fused
/// kernel's peer in tests and benchmarks. Same arguments and results.
AttentionForward attention_forward_composite(const Tensor& q, const Tensor& k, const Tensor& v,
                                             const AttentionArgs& args);
AttentionGrads attention_backward_composite(const Tensor& grad_out, const Tensor& q,
                                            const Tensor& k, const Tensor& v, const Tensor& out,
                                            const Tensor& lse, const AttentionArgs& args);

}  // namespace ember::kernels
