// The recorded graph: a Node per recorded op (its backward closure and the
// edges to the nodes that made its inputs), and the AutogradMeta a tensor
// carries once it takes part. docs/autograd.md describes the whole design.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../core/tensor.h"

namespace ember {
namespace autograd {

struct Node;
using TensorList = std::vector<Tensor>;
/// Gradients of a node's outputs in; one gradient per forward input out
/// (undefined where an input needs none). Runs with grad mode off.
using BackwardFn = std::function<TensorList(const TensorList& grad_outputs)>;
/// A tensor hook: sees a gradient, may return a replacement (undefined keeps it).
using GradHook = std::function<Tensor(const Tensor&)>;

/// Where the gradient of one forward input goes: input slot `input_nr` of `node`.
struct Edge {
    std::shared_ptr<Node> node;
    uint32_t input_nr = 0;
};

/// Shape, dtype and device of a tensor the backward must produce a gradient for.
struct TensorGeometry {
    Shape shape;
    DType dtype = DType::f32;
    Device device = Device::cpu();
    static TensorGeometry of(const Tensor& t) { return {t.shape(), t.dtype(), t.device()}; }
};

/// One recorded op. Ops fill it through make_node / save / set_backward /
/// set_history (autograd/graph.h); the engine (autograd/engine.cpp) runs it.
struct Node {
    std::string name;                      // the forward op: "matmul", "relu", ...
    uint64_t sequence_nr = 0;              // creation order: later nodes run first
    std::vector<Edge> next;                // one per forward input (null node: no grad)
    std::vector<TensorGeometry> inputs;    // of each forward input
    std::vector<TensorGeometry> outputs;   // of each differentiable output
    BackwardFn backward;                   // null once released
    std::vector<std::vector<GradHook>> output_hooks;  // hooks on non-leaf outputs
    std::vector<std::weak_ptr<AutogradMeta>> retained;  // outputs whose grad is kept (retain_grad)

    /// Keeps `t` for the backward: returns an alias without history (no
    /// reference cycle when an op saves its own output) and remembers the
    /// storage version, so an in-place change before backward is an error.
    Tensor save(const Tensor& t);
    /// Whether forward input i needs a gradient (capture the answer by value).
    bool needs_input_grad(size_t i) const { return i < next.size() && next[i].node != nullptr; }
    /// Throws if a saved tensor changed since it was saved.
    void check_saved_versions() const;
    /// Frees the closure and the saved tensors (after a backward without retain_graph).
    void release();
    bool released() const { return released_; }
    /// True for the node that accumulates into a leaf's grad.
    bool is_accumulator = false;

private:
    struct SavedVersion {
        Storage storage;
        uint64_t version;
        Shape shape;
    };
    std::vector<SavedVersion> saved_;
    bool released_ = false;
};

}  // namespace autograd

/// What a tensor carries once it takes part in autograd (TensorImpl::autograd).
/// A leaf may be shared by graphs running backward on several threads: its
/// accumulate node and gradient are guarded by `mutex`.
struct AutogradMeta {
    std::mutex mutex;
    bool requires_grad = false;
    Tensor grad;                                 // accumulated gradient (leaves, retained non-leaves)
    Tensor grad_slot;                            // where a leaf's gradient lives (autograd/accumulate.h)
    std::shared_ptr<autograd::Node> grad_fn;     // null for leaves
    uint32_t output_nr = 0;                      // which output of grad_fn this is
    std::weak_ptr<autograd::Node> accumulator;   // a leaf's accumulate node, while a graph holds it
    std::vector<autograd::GradHook> hooks;       // a leaf's hooks (non-leaf hooks live on grad_fn)
    std::vector<std::function<void(const Tensor&)>> post_accumulate_hooks;
    bool retains_grad = false;
    std::weak_ptr<TensorImpl> self;              // the leaf, for post-accumulate hooks
};

}  // namespace ember
