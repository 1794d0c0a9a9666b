// How ops record themselves: make_node (null when no input needs a gradient
// or grad mode is off), Node::save, a backward closure, then set_history on
// the outputs. See autograd/ops/elementwise.cpp for the pattern.
#pragma once

#include <functional>
#include <initializer_list>
#include <memory>

#include "grad_mode.h"
#include "node.h"

namespace ember::autograd {

/// True when grad mode is on and some input requires grad.
bool needs_grad(std::initializer_list<Tensor> inputs);
bool needs_grad(const TensorList& inputs);

/// A node for op `name` with an edge per input, or null when nothing needs a
/// gradient (then the op records nothing: zero cost when grad is off).
std::shared_ptr<Node> make_node(const char* name, const TensorList& inputs);

/// The next creation number for a node made by hand (make_node numbers its own).
uint64_t next_sequence_nr();

/// Makes `outputs` the results of `node` (output_nr = position). In anomaly
/// mode, first checks them for NaN/Inf and throws naming the op.
void set_history(const std::shared_ptr<Node>& node, const TensorList& outputs);
inline void set_history(const std::shared_ptr<Node>& node, const Tensor& output) {
    set_history(node, TensorList{output});
}

/// The edge a gradient for `t` flows into: its grad_fn, or a leaf's accumulator.
Edge gradient_edge(const Tensor& t);

/// Sums g over the dims broadcasting added so that it has `shape` (the
/// backward of every broadcasting op).
Tensor sum_to(const Tensor& g, const Shape& shape);

/// True when every element is finite (any dtype; integers always are).
bool all_finite(const Tensor& t);

/// Runs backward from `roots`, seeded with `grads` (undefined: ones for a
/// one-element root). Gradients accumulate into leaves' grad().
void backward(const TensorList& roots, const TensorList& grads = {}, bool retain_graph = false);

/// Queues `fn` to run once the backward pass now running on this thread
/// has walked its whole graph (the outermost one, when a checkpointed
/// segment runs a backward of its own), before backward() returns. What
/// data parallelism waits for its gradient all-reduces with. Outside a
/// backward pass it is an Error. Callbacks run in the order queued; if the
/// pass throws, they are dropped.
void queue_callback(std::function<void()> fn);

/// Runs `hook` on gradient g of a tensor with geometry `want`: returns g or
/// the hook's replacement, which must keep the shape, dtype and device.
Tensor run_hook(const GradHook& hook, const Tensor& g, const TensorGeometry& want);

/// Throws if `self` may not be modified in place by op `name` right now: a
/// leaf that requires grad while grad mode is on, or an in-place op that
/// would have to be recorded (ember records out-of-place ops only).
void check_inplace(const Tensor& self, const char* name, const TensorList& others = {});

}  // namespace ember::autograd
