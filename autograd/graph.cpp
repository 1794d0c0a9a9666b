// Recording: grad/anomaly mode flags, nodes and their saved tensors, the
// history attached to op outputs, and the edges into them (a leaf's
// accumulate node is in accumulate.cpp).
#include "autograd/graph.h"
#include "kernels/copy.h"

#include <cmath>

#include "autograd/accumulate.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace ember {

namespace {
// Per thread, as in PyTorch: a NoGradGuard on one thread does not affect another.
thread_local bool t_grad_enabled = true;
thread_local bool t_anomaly_enabled = false;
thread_local uint64_t t_next_sequence_nr = 0;
}  // namespace

bool GradMode::is_enabled() { return t_grad_enabled; }
void GradMode::set_enabled(bool enabled) { t_grad_enabled = enabled; }

namespace autograd {

bool AnomalyMode::is_enabled() { return t_anomaly_enabled; }
void AnomalyMode::set_enabled(bool enabled) { t_anomaly_enabled = enabled; }

Tensor Node::save(const Tensor& t) {
    if (!t.defined()) return t;
    saved_.push_back({t.storage(), t.storage()->version(), t.shape()});
    return t.detach();
}

void Node::check_saved_versions() const {
    for (size_t i = 0; i < saved_.size(); ++i) {
        const SavedVersion& s = saved_[i];
        const uint64_t now = s.storage->version();
        EMBER_CHECK(now == s.version, "backward of '", name, "': tensor ", i, " (shape ",
                    shape_str(s.shape), ") saved by the forward was modified in place since "
                    "(version ", s.version, ", now ", now,
                    "); clone it before the in-place op, or do the in-place op first");
    }
}

void Node::release() {
    if (saved_.empty()) return;  // nothing to free: the graph may be walked again
    backward = nullptr;
    saved_.clear();
    released_ = true;
}

bool needs_grad(const TensorList& inputs) {
    if (!GradMode::is_enabled()) return false;
    for (const Tensor& t : inputs)
        if (t.defined() && t.requires_grad()) return true;
    return false;
}

bool needs_grad(std::initializer_list<Tensor> inputs) {
    if (!GradMode::is_enabled()) return false;
    for (const Tensor& t : inputs)
        if (t.defined() && t.requires_grad()) return true;
    return false;
}

Edge gradient_edge(const Tensor& t) {
    if (!t.defined()) return {};
    const auto& meta = t.unsafe_impl()->autograd;
    if (!meta) return {};
    if (meta->grad_fn) return {meta->grad_fn, meta->output_nr};
    if (meta->requires_grad) return {accumulator_of(t), 0};
    return {};
}

uint64_t next_sequence_nr() { return t_next_sequence_nr++; }

std::shared_ptr<Node> make_node(const char* name, const TensorList& inputs) {
    if (!needs_grad(inputs)) return nullptr;
    auto node = std::make_shared<Node>();
    node->name = name;
    node->sequence_nr = t_next_sequence_nr++;
    node->next.reserve(inputs.size());
    node->inputs.reserve(inputs.size());
    for (const Tensor& t : inputs) {
        node->next.push_back(t.defined() && t.requires_grad() ? gradient_edge(t) : Edge{});
        node->inputs.push_back(t.defined() ? TensorGeometry::of(t) : TensorGeometry{});
    }
    return node;
}

bool all_finite(const Tensor& t) {
    if (!is_floating(t.dtype()) || t.numel() == 0) return true;
    // x·0 is 0 for finite x and NaN for NaN/Inf, so the sum is NaN iff one is not finite.
    const double s = kernels::sum(kernels::mul(t, 0.0)).item();
    return !std::isnan(s);
}

Tensor run_hook(const GradHook& hook, const Tensor& g, const TensorGeometry& want) {
    Tensor r = hook(g);
    if (!r.defined()) return g;
    EMBER_CHECK(r.shape() == want.shape && r.dtype() == want.dtype && r.device() == want.device,
                "a tensor hook returned a gradient ", dtype_name(r.dtype()), " ",
                shape_str(r.shape()), " on ", r.device(), " for a tensor ",
                dtype_name(want.dtype), " ", shape_str(want.shape), " on ", want.device,
                "; a hook must keep the shape, dtype and device");
    return r;
}

void set_history(const std::shared_ptr<Node>& node, const TensorList& outputs) {
    EMBER_INTERNAL_CHECK(node != nullptr, "set_history without a node");
    if (AnomalyMode::is_enabled()) {
        for (size_t i = 0; i < outputs.size(); ++i)
            EMBER_CHECK(all_finite(outputs[i]), "anomaly mode: forward op '", node->name,
                        "' produced NaN or Inf in output ", i, " (shape ",
                        shape_str(outputs[i].shape()), ")");
    }
    node->outputs.clear();
    node->output_hooks.assign(outputs.size(), {});
    node->retained.assign(outputs.size(), {});
    for (size_t i = 0; i < outputs.size(); ++i) {
        const Tensor& out = outputs[i];
        EMBER_INTERNAL_CHECK(is_floating(out.dtype()), "op '", node->name,
                             "' recorded a non-floating output");
        // An op that hands back a tensor that already has a history (its input,
        // say) would erase that history here.
        EMBER_INTERNAL_CHECK(!out.unsafe_impl()->autograd, "op '", node->name,
                             "' recorded an output that already takes part in autograd");
        auto meta = std::make_shared<AutogradMeta>();
        meta->requires_grad = true;
        meta->grad_fn = node;
        meta->output_nr = uint32_t(i);
        out.unsafe_impl()->autograd = std::move(meta);
        node->outputs.push_back(TensorGeometry::of(out));
    }
}

Tensor sum_to(const Tensor& g, const Shape& shape) {
    if (g.shape() == shape) return g;
    const int64_t lead = g.dim() - int64_t(shape.size());
    EMBER_INTERNAL_CHECK(lead >= 0, "sum_to: ", shape_str(g.shape()), " to ", shape_str(shape));
    Shape dims;
    for (int64_t d = 0; d < g.dim(); ++d)
        if (d < lead || (shape[size_t(d - lead)] == 1 && g.shape()[size_t(d)] != 1))
            dims.push_back(d);
    Tensor s = dims.empty() ? g : kernels::sum(g, dims, true);
    return kernels::reshape(s, shape);
}

void check_inplace(const Tensor& self, const char* name, const TensorList& others) {
    EMBER_CHECK(self.defined(), name, ": undefined tensor");
    if (!GradMode::is_enabled()) return;
    const auto& meta = self.unsafe_impl()->autograd;
    if (meta && meta->requires_grad) {
        EMBER_CHECK(meta->grad_fn != nullptr, name, ": a leaf tensor that requires grad (shape ",
                    shape_str(self.shape()),
                    ") cannot be modified in place while grad mode is on; use NoGradGuard "
                    "(as optimizers do) or detach()");
        EMBER_FAIL(name, ": in-place ops are not recorded for autograd, and this tensor (shape ",
                   shape_str(self.shape()), ") requires grad; use the out-of-place op");
    }
    for (const Tensor& o : others)
        EMBER_CHECK(!(o.defined() && o.requires_grad()), name,
                    ": in-place ops are not recorded for autograd, and an argument requires "
                    "grad; use the out-of-place op");
}

}  // namespace autograd
}  // namespace ember
