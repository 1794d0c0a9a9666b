// Activation checkpointing (docs/tips.md #16): run a segment without keeping its
// activations and recompute them during backward.
#pragma once

#include <functional>
#include <vector>

#include "../core/tensor.h"

namespace ember::autograd {

/// Runs fn(inputs) with grad mode off, so the segment keeps no activations;
/// its outputs are recorded as one node. In backward the segment is run again
/// with grad on — with the default generator set back to its state at the
/// forward, so dropout draws the same masks — and back-propagated; gradients
/// of parameters used inside fn accumulate as usual. Outputs must be floating.
std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                               const std::vector<Tensor>& inputs);
/// The one-output form.
Tensor checkpoint(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                  const std::vector<Tensor>& inputs);

/// True on this thread while a checkpointed segment is being recomputed for
/// backward: ops with side effects beyond their outputs (batch norm's
/// running statistics) skip them, so a checkpointed run updates them once,
/// exactly as an ordinary one.
bool is_recomputing();

}  // namespace ember::autograd
