// Accumulation into a leaf's grad(): the rule that decides between in place
// and out of place (Note [Gradient accumulation] in accumulate.cpp), and the
// gradient slot, a fixed place for a leaf's gradient that nn::GradArena uses
// to keep every gradient of a model in one flat buffer.
#pragma once

#include <memory>

#include "node.h"

namespace ember::autograd {

/// Gives `leaf` (a leaf that requires grad) a fixed place for its gradient:
/// `slot`, a non-overlapping dense tensor of the leaf's shape, dtype and
/// device (typically a view of a larger buffer). The leaf's gradient is
/// copied in if it has one, and grad() becomes a view of the slot. From then
/// on a first gradient (after set_grad({}) or zero_grad) is copied into the
/// slot rather than taken as is, and later ones are added in place, so
/// grad()'s data pointer stays put. An undefined `slot` forgets it: grad()
/// keeps its values and follows the ordinary rule again.
void set_grad_slot(const Tensor& leaf, const Tensor& slot);

/// The leaf's slot, or undefined when it has none.
Tensor grad_slot(const Tensor& leaf);

/// True when the leaf's grad() is defined and is its slot (same storage,
/// offset, shape and strides).
bool grad_in_slot(const Tensor& leaf);

/// The accumulate node of a leaf that requires grad, made on first use and
/// shared by every graph that holds it (gradient_edge's source of leaf edges).
std::shared_ptr<Node> accumulator_of(const Tensor& leaf);

}  // namespace ember::autograd
