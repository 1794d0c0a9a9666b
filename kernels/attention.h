// Scaled dot-product attention, softmax(scale · q kᵀ + mask) · v, forward and
// backward. The CPU kernel is fused and blocked (FlashAttention's online
// softmax): the forward keeps only each row's log-sum-exp, the backward
// recomputes the probabilities tile by tile, and no [Tq, Tk] matrix is ever
// allocated. On CUDA the same math runs as composite kernels (batched GEMMs,
// then the softmax pieces) that materialize the scores — the reference the
// fused CUDA kernel will be checked against; on the CPU the composite path is
// the benchmark's and the tests' peer. docs/attention.md.
#pragma once

#include <cstdint>

#include "../core/tensor.h"

namespace ember::kernels {

/// What attention does besides the product: the mask, the scale and dropout.
struct AttentionArgs {
    /// Row i sees keys j <= i (PyTorch's is_causal: the mask's top-left
    /// corner is aligned, also when Tq != Tk).
    bool causal = false;
    /// Multiplies q·kᵀ; the caller resolves PyTorch's default 1/sqrt(D).
    double scale = 1.0;
    /// Probability of zeroing a probability after the softmax (the kept ones
    /// scaled by 1/(1 − p)); element (b, h, i, j) is dropped iff element
    /// ((b·H + h)·Tq + i)·Tk + j of the f32 uniform stream at (seed,
    /// first_block) is < p — dropout_forward's rule on the [B, H, Tq, Tk]
    /// probabilities, so the two paths drop the same entries.
    double dropout_p = 0;
    uint64_t seed = 0, first_block = 0;
};

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
