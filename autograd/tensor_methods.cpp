// Tensor's computing and autograd methods: copies and conversions recorded for
// backward, and the user-facing face of the graph (requires_grad, grad,
// backward, hooks). Declared in core/tensor.h.
#include "autograd/graph.h"
#include "core/host_sync.h"
#include "core/tensor.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/front.h"

namespace ember {

using autograd::TensorList;

namespace {

AutogradMeta& meta_of(const Tensor& t) {
    EMBER_CHECK(t.defined(), "autograd: operation on an undefined tensor");
    auto& meta = t.unsafe_impl()->autograd;
    if (!meta) {
        meta = std::make_shared<AutogradMeta>();
        meta->self = t.shared_impl();
    }
    return *meta;
}

// Records `out = op(self)` whose gradient is g converted back by the engine
// (to self's dtype and device): clone, to(dtype), to(device).
Tensor record_identity(const char* name, const Tensor& self, const Tensor& out) {
    if (!is_floating(out.dtype())) return out;
    if (auto node = autograd::make_node(name, {self})) {
        node->backward = [](const TensorList& g) { return TensorList{g[0]}; };
        autograd::set_history(node, out);
    }
    return out;
}

}  // namespace

Tensor Tensor::contiguous() const {
    if (is_contiguous()) return *this;
    return clone();
}

Tensor Tensor::contiguous(MemoryFormat format) const {
    const Tensor out = kernels::contiguous(*this, format);
    if (out.is_same(*this)) return *this;
    return record_identity("contiguous", *this, out);
}

Tensor Tensor::clone() const {
    Tensor out = empty(shape(), kernels::like(*this));
    kernels::copy(out, *this);
    return record_identity("clone", *this, out);
}

Tensor Tensor::to(DType dt) const {
    if (dt == dtype()) return *this;
    // A channels-last tensor stays channels-last (PyTorch's preserve_format):
    // autocast's bf16 copy of an activation feeds channels-last kernels.
    return record_identity("to", *this, kernels::cast(*this, dt, suggest_memory_format()));
}

Tensor Tensor::to(Device d, bool non_blocking) const {
    if (d == device()) return *this;
    // A non-blocking copy to the host lands in pinned memory, so it can really be async.
    if (d.is_cpu() && !non_blocking) count_host_sync("to");  // waits for the device
    Tensor out = empty(shape(), {dtype(), d, non_blocking && d.is_cpu()});
    kernels::copy(out, *this, non_blocking);
    return record_identity("to", *this, out);
}

Tensor& Tensor::copy_(const Tensor& src) {
    autograd::check_inplace(*this, "copy_", {src});
    kernels::copy(*this, src);
    return *this;
}

Tensor& Tensor::fill_(double value) {
    autograd::check_inplace(*this, "fill_");
    kernels::fill(*this, value);
    return *this;
}

// ---- autograd ----

bool Tensor::requires_grad() const {
    const auto& meta = impl().autograd;
    return meta && meta->requires_grad;
}

const Tensor& Tensor::set_requires_grad(bool on) const {
    const auto& meta = impl().autograd;
    if (meta && meta->grad_fn) {
        EMBER_CHECK(on, "set_requires_grad(false) on a tensor computed by '", meta->grad_fn->name,
                    "' (not a leaf); use detach()");
        return *this;
    }
    EMBER_CHECK(!on || is_floating(dtype()),
                "set_requires_grad: only floating-point tensors can require grad, got ",
                dtype_name(dtype()));
    meta_of(*this).requires_grad = on;
    return *this;
}

bool Tensor::is_leaf() const {
    const auto& meta = impl().autograd;
    return !meta || !meta->grad_fn;
}

Tensor Tensor::grad() const {
    const auto& meta = impl().autograd;
    return meta ? meta->grad : Tensor();
}

void Tensor::set_grad(const Tensor& grad) const {
    if (grad.defined())
        EMBER_CHECK(grad.shape() == shape() && grad.dtype() == dtype() && grad.device() == device(),
                    "set_grad: gradient ", kernels::describe(grad), " does not match tensor ",
                    kernels::describe(*this));
    meta_of(*this).grad = grad;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
    const auto& meta = impl().autograd;
    return meta ? meta->grad_fn : nullptr;
}

void Tensor::backward(const Tensor& gradient, bool retain_graph) const {
    autograd::backward({*this}, {gradient}, retain_graph);
}

Tensor Tensor::detach() const {
    return make_tensor(storage(), shape(), strides(), offset(), dtype());
}

void Tensor::retain_grad() const {
    EMBER_CHECK(requires_grad(), "retain_grad: the tensor does not require grad");
    AutogradMeta& meta = meta_of(*this);
    if (!meta.grad_fn || meta.retains_grad) return;  // a leaf keeps its gradient anyway
    meta.retains_grad = true;
    meta.grad_fn->retained[meta.output_nr] = impl().autograd;  // weak: no cycle
}

void Tensor::register_hook(std::function<Tensor(const Tensor&)> hook) const {
    EMBER_CHECK(requires_grad(), "register_hook: the tensor does not require grad");
    AutogradMeta& meta = meta_of(*this);
    if (meta.grad_fn)
        meta.grad_fn->output_hooks[meta.output_nr].push_back(std::move(hook));
    else
        meta.hooks.push_back(std::move(hook));
}

void Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
    EMBER_CHECK(requires_grad() && is_leaf(),
                "register_post_accumulate_grad_hook: expected a leaf that requires grad");
    meta_of(*this).post_accumulate_hooks.push_back(std::move(hook));
}

}  // namespace ember
