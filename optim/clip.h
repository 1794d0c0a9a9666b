// Gradient clipping by the global norm (docs/tips.md #19) and the gradient
// accumulation helper (docs/tips.md #17).
#pragma once

#include <vector>

#include "../core/tensor.h"

namespace ember::optim {

/// Scales the gradients of `params` in place so that their global L2 norm is
/// at most max_norm (factor min(1, max_norm / (norm + 1e-6)), as PyTorch's
/// clip_grad_norm_), with one fused reduction and one fused scaling pass.
/// Returns the norm before clipping as a 0-d tensor on the gradients' device
/// (reading it is a host sync on a GPU: log it at intervals). Parameters
/// without a gradient are skipped; none at all gives a 0 norm.
Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm);
/// The same on gradients given directly (e.g. Optimizer::gradients()).
Tensor clip_grads(const std::vector<Tensor>& grads, double max_norm);

/// Gradient accumulation (docs/tips.md #17): with `steps` micro-batches per optimizer
/// step, scale each micro-batch's loss by 1 / steps so the accumulated
/// gradients equal those of one batch of steps·B (a mean loss), and step
/// when is_last(micro) says so. Gradients add up across backward calls
/// until zero_grad.
struct Accumulation {
    int steps = 1;
    /// loss / steps: what to call backward on.
    Tensor scale(const Tensor& loss) const;
    /// True for the micro-batch after which the optimizer steps (0-based count).
    bool is_last(int64_t micro) const { return (micro + 1) % steps == 0; }
};

}  // namespace ember::optim
