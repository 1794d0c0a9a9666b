// The backward engine: counts each node's dependencies in the graph reachable
// from the roots, then runs nodes whose gradients are complete, latest-created
// first, summing gradients that reach the same input from several uses.
#include <functional>
#include <queue>
#include <unordered_map>

#include "autograd/graph.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/factories.h"
#include "kernels/profile.h"

namespace ember::autograd {

namespace {

struct Later {  // max-heap on sequence_nr: the newest node first
    bool operator()(const Node* a, const Node* b) const { return a->sequence_nr < b->sequence_nr; }
};

// Number of edges into each node reachable from the roots.
std::unordered_map<Node*, int> count_dependencies(const std::vector<Node*>& roots) {
    std::unordered_map<Node*, int> deps;
    std::vector<Node*> stack;
    std::unordered_map<Node*, bool> seen;
    for (Node* r : roots)
        if (!seen[r]) {
            seen[r] = true;
            stack.push_back(r);
        }
    while (!stack.empty()) {  // iterative: deep graphs must not overflow the C++ stack
        Node* n = stack.back();
        stack.pop_back();
        for (const Edge& e : n->next) {
            if (!e.node) continue;
            ++deps[e.node.get()];
            if (!seen[e.node.get()]) {
                seen[e.node.get()] = true;
                stack.push_back(e.node.get());
            }
        }
    }
    return deps;
}

// Fits a gradient produced for input `i` of `node` to that input's geometry:
// a different shape is a bug in the backward formula; dtype and device are
// converted (ops that promote or move return the gradient in their output's;
// a channels-last gradient stays channels-last, as the activations it meets).
Tensor fit_gradient(const Node& node, size_t i, Tensor g) {
    const TensorGeometry& want = node.inputs[i];
    EMBER_INTERNAL_CHECK(g.shape() == want.shape, "backward of '", node.name,
                         "' returned a gradient of shape ", shape_str(g.shape()), " for input ", i,
                         " of shape ", shape_str(want.shape));
    if (g.dtype() != want.dtype) g = kernels::cast(g, want.dtype, g.suggest_memory_format());
    if (g.device() != want.device) g = g.to(want.device);
    return g;
}

// The sum of the gradients flowing into one input. In place when nothing
// else can see the slot — its tensor and storage held by the slot alone, dense
// (contiguous or channels-last), and g's shape, dtype and device — so a
// residual stream's gradient is summed without a new tensor; otherwise out of
// place (a backward may hand the same tensor to several inputs, and others
// may hold it).
void accumulate(Tensor& slot, const Tensor& g) {
    if (!slot.defined()) {
        slot = g;
        return;
    }
    const bool dense = slot.is_contiguous() || slot.is_contiguous(MemoryFormat::channels_last);
    const bool alone = slot.shared_impl().use_count() == 1 && slot.storage().use_count() == 1 &&
                       dense && slot.shape() == g.shape() && slot.dtype() == g.dtype() &&
                       slot.device() == g.device();
    slot = alone ? kernels::add_(slot, g) : kernels::add(slot, g);
}

// The callbacks of the outermost backward pass running on this thread
// (queue_callback); null outside one.
thread_local std::vector<std::function<void()>>* tls_callbacks = nullptr;

// Makes a pass the one queue_callback adds to, unless one already is.
class CallbackScope {
  public:
    CallbackScope() : outermost_(tls_callbacks == nullptr) {
        if (outermost_) tls_callbacks = &callbacks_;
    }
    ~CallbackScope() {
        if (outermost_) tls_callbacks = nullptr;
    }
    CallbackScope(const CallbackScope&) = delete;
    CallbackScope& operator=(const CallbackScope&) = delete;
    /// Runs what was queued, including what a callback queues.
    void run() {
        if (!outermost_) return;
        for (size_t i = 0; i < callbacks_.size(); ++i) {
            std::function<void()> fn = std::move(callbacks_[i]);
            fn();
        }
        callbacks_.clear();
    }

  private:
    bool outermost_;
    std::vector<std::function<void()>> callbacks_;
};

void walk(const TensorList& roots, const TensorList& grads, bool retain_graph) {
    EMBER_CHECK(grads.empty() || grads.size() == roots.size(), "backward: ", roots.size(),
                " tensors but ", grads.size(), " gradients");
    std::unordered_map<Node*, TensorList> buffers;
    std::vector<std::shared_ptr<Node>> root_nodes;
    for (size_t i = 0; i < roots.size(); ++i) {
        const Tensor& r = roots[i];
        EMBER_CHECK(r.defined() && r.requires_grad(), "backward: tensor ", i, " (shape ",
                    r.defined() ? shape_str(r.shape()) : "undefined",
                    ") does not require grad and has no grad_fn");
        Tensor g = grads.empty() ? Tensor() : grads[i];
        if (!g.defined()) {
            EMBER_CHECK(r.numel() == 1, "backward: a gradient can be implied only for a "
                        "one-element tensor; pass one for shape ", shape_str(r.shape()));
            g = ones(r.shape(), {r.dtype(), r.device()});
        }
        EMBER_CHECK(g.shape() == r.shape(), "backward: gradient of shape ", shape_str(g.shape()),
                    " for a tensor of shape ", shape_str(r.shape()));
        EMBER_CHECK(g.device() == r.device(), "backward: gradient on ", g.device(),
                    " for a tensor on ", r.device());
        const Edge e = gradient_edge(r);
        TensorList& buf = buffers[e.node.get()];
        buf.resize(e.node->outputs.size());
        accumulate(buf[e.input_nr], g.dtype() == r.dtype() ? g : kernels::cast(g, r.dtype()));
        root_nodes.push_back(e.node);
    }

    std::vector<Node*> raw_roots;
    for (auto& n : root_nodes) raw_roots.push_back(n.get());
    std::unordered_map<Node*, int> deps = count_dependencies(raw_roots);
    std::priority_queue<Node*, std::vector<Node*>, Later> ready;
    std::unordered_map<Node*, bool> queued;
    for (Node* r : raw_roots)
        if (deps[r] == 0 && !queued[r]) {
            queued[r] = true;
            ready.push(r);
        }

    NoGradGuard no_grad;  // backward formulas are not themselves recorded
    while (!ready.empty()) {
        Node* node = ready.top();
        ready.pop();
        TensorList in = std::move(buffers[node]);
        buffers.erase(node);
        in.resize(node->outputs.size());
        for (size_t o = 0; o < in.size() && !node->is_accumulator; ++o) {
            if (!in[o].defined()) continue;
            for (const GradHook& hook : node->output_hooks[o])
                in[o] = run_hook(hook, in[o], node->outputs[o]);
            if (auto m = node->retained[o].lock())  // after the hooks, as PyTorch
                m->grad = m->grad.defined() ? kernels::add(m->grad, in[o]) : in[o].clone();
        }
        EMBER_CHECK(!node->released(), "backward: the graph through '", node->name,
                    "' was already walked and its saved tensors freed; pass retain_graph = "
                    "true to the first backward to walk it again");
        node->check_saved_versions();
        for (size_t o = 0; o < in.size(); ++o)  // an output nobody used has gradient 0
            if (!in[o].defined() && !node->is_accumulator) {
                const TensorGeometry& g = node->outputs[o];
                in[o] = zeros(g.shape, {g.dtype, g.device});
            }
        TensorList out;
        {
            const kernels::ProfileRange range("backward", node->name, "backward: ");
            out = node->backward(in);
        }
        if (!retain_graph && !node->is_accumulator) node->release();
        EMBER_INTERNAL_CHECK(node->is_accumulator || out.size() == node->next.size(),
                             "backward of '", node->name, "' returned ", out.size(),
                             " gradients for ", node->next.size(), " inputs");
        for (size_t i = 0; i < node->next.size(); ++i) {
            const Edge& e = node->next[i];
            if (!e.node) continue;
            if (out[i].defined()) {
                Tensor g = fit_gradient(*node, i, out[i]);
                if (AnomalyMode::is_enabled())
                    EMBER_CHECK(all_finite(g), "anomaly mode: the backward of forward op '",
                                node->name, "' produced NaN or Inf in the gradient of its input ",
                                i, " (shape ", shape_str(g.shape()), ")");
                TensorList& buf = buffers[e.node.get()];
                buf.resize(e.node->outputs.size());
                accumulate(buf[e.input_nr], g);
            }
            if (--deps[e.node.get()] == 0) ready.push(e.node.get());
        }
    }
}

}  // namespace

void queue_callback(std::function<void()> fn) {
    EMBER_CHECK(tls_callbacks != nullptr,
                "queue_callback: no backward pass is running on this thread");
    tls_callbacks->push_back(std::move(fn));
}

void backward(const TensorList& roots, const TensorList& grads, bool retain_graph) {
    CallbackScope callbacks;
    walk(roots, grads, retain_graph);
    callbacks.run();
}

}  // namespace ember::autograd
