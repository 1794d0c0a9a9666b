// What attention's kernels take besides their operands (kernels/attention.h
// is the front): the mask, the scale and dropout. No Tensor: both backends
// include this.
#pragma once

#include <cstdint>

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

}  // namespace ember::kernels
