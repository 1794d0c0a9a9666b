// Differentiable attention: PyTorch's scaled_dot_product_attention on
// [B, H, T, D] (or [N, T, D]) tensors, and self_attention on the packed
// output of one fused q/k/v projection, whose gradient is written straight
// into the projection's gradient. Both run the fused kernels of
// kernels/attention.h; docs/attention.md.
#pragma once

#include <optional>

#include "../../core/generator.h"
#include "../../core/tensor.h"

namespace ember {

struct AttentionOptions {
    /// Row i sees keys j <= i (PyTorch's is_causal; top-left aligned when Tq != Tk).
    bool causal = false;
    /// Multiplies q·kᵀ; default 1/sqrt(D).
    std::optional<double> scale;
    /// Probability of dropping an attention probability (kept ones scaled by
    /// 1/(1 − p)); applied whenever > 0, as in PyTorch: a module passes 0 in
    /// eval mode. The mask comes from `generator` (default: the default
    /// generator) by the rule of kernels::AttentionArgs.
    double dropout_p = 0;
    Generator* generator = nullptr;
};

/// softmax(scale · q kᵀ + mask) · v for q [B, H, Tq, D], k [B, H, Tk, D],
/// v [B, H, Tk, Dv] (or the same without H), one floating dtype; the result
/// is [B, H, Tq, Dv] (a view whose transpose(1, 2) is contiguous on the
/// CPU). Memory grows with T·D, not T²: no [Tq, Tk] matrix is kept for the
/// backward (on the CPU none is ever made). Under autocast q, k and v are
/// cast to the low-precision dtype (the CPU computes in f32 from them).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

/// Attention of a packed projection qkv [B, T, 3·C] — queries, keys and
/// values side by side, each C = heads · D wide (a Linear(C, 3·C)'s output)
/// — over `heads` heads: [B, T, C], the heads side by side again. The same
/// as splitting qkv into q, k, v [B, heads, T, D] and calling
/// scaled_dot_product_attention, without copies: the kernels read the heads
/// where they lie and the backward writes the gradient of qkv in one piece.
Tensor self_attention(const Tensor& qkv, int64_t heads, const AttentionOptions& options = {});

}  // namespace ember
