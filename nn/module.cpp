// Module: registration, traversal with dotted names, modes, device/dtype
// moves that keep tensor identity, gradient arenas, and state_dict loading
// with full checks.
#include "nn/module.h"

#include <cxxabi.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <ostream>
#include <sstream>
#include <typeinfo>

#include "autograd/accumulate.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "kernels/front.h"
#include "nn/grad_arena.h"

namespace ember::nn {

namespace {

// Points `t`'s handle (and every other handle to the same tensor) at the data
// of `src`, keeping its autograd identity: what PyTorch's `param.data = ...` does.
void replace_data(const Tensor& t, const Tensor& src) {
    TensorImpl* impl = t.unsafe_impl();
    if (impl->storage == src.storage() && impl->shape == src.shape() &&
        impl->strides == src.strides() && impl->offset == src.offset() && impl->dtype == src.dtype())
        return;  // to() where the tensor already is
    // A graph that saved the old data must not run on with it: count this as
    // an in-place change, so its backward reports it.
    impl->storage->bump_version();
    const TensorImpl* from = src.unsafe_impl();
    impl->storage = from->storage;
    impl->shape = from->shape;
    impl->strides = from->strides;
    impl->offset = from->offset;
    impl->dtype = from->dtype;
}

bool valid_name(const std::string& name) {
    return !name.empty() && name.find('.') == std::string::npos;
}

}  // namespace

Tensor Module::forward(const Tensor&) {
    EMBER_FAIL(type_name(), ": forward is not implemented for this module");
}

std::string Module::type_name() const {
    // The dynamic type's name, demangled, without its namespaces.
    const char* mangled = typeid(*this).name();
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> demangled(
        abi::__cxa_demangle(mangled, nullptr, nullptr, &status), std::free);
    std::string name = status == 0 && demangled ? demangled.get() : mangled;
    // "ember::nn::Sequential", "(anonymous namespace)::Net": the part after
    // the last "::" outside template arguments.
    int depth = 0;
    size_t start = 0;
    for (size_t i = 0; i + 1 < name.size(); ++i) {
        if (name[i] == '<') ++depth;
        if (name[i] == '>') --depth;
        if (depth == 0 && name[i] == ':' && name[i + 1] == ':') start = i + 2;
    }
    return name.substr(start);
}

void Module::check_new_name(const std::string& name) const {
    EMBER_CHECK(valid_name(name), type_name(), ": invalid name '", name,
                "' (non-empty, without '.')");
    auto taken = [&](const auto& list) {
        for (const auto& [n, _] : list)
            if (n == name) return true;
        return false;
    };
    EMBER_CHECK(!taken(params_) && !taken(buffers_) && !taken(children_), type_name(),
                ": the name '", name, "' is already registered");
}

Tensor Module::register_parameter(const std::string& name, Tensor t, bool requires_grad) {
    check_new_name(name);
    EMBER_CHECK(t.defined(), type_name(), ": parameter '", name, "' is undefined");
    EMBER_CHECK(t.is_leaf(), type_name(), ": parameter '", name, "' was computed by '",
                t.is_leaf() ? "" : t.grad_fn()->name,
                "' (not a leaf): register a leaf, e.g. its detach()");
    if (requires_grad) t.set_requires_grad(true);
    params_.emplace_back(name, t);
    return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
    check_new_name(name);
    EMBER_CHECK(t.defined(), type_name(), ": buffer '", name, "' is undefined");
    buffers_.emplace_back(name, t);
    return t;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
    check_new_name(name);
    EMBER_CHECK(m != nullptr, type_name(), ": submodule '", name, "' is null");
    m->train(training_);
    children_.emplace_back(name, std::move(m));
}

void Module::reset_tensor(const std::string& name, const Tensor& t) {
    for (auto* list : {&params_, &buffers_})
        for (auto& [n, old] : *list)
            if (n == name) {
                replace_data(old, t);
                return;
            }
    EMBER_FAIL(type_name(), ": no parameter or buffer named '", name, "'");
}

void Module::replace_child(size_t i, std::shared_ptr<Module> m) {
    EMBER_CHECK(i < children_.size() && m != nullptr, type_name(), ": no child ", i, " to replace");
    m->train(training_);
    children_[i].second = std::move(m);
}

void Module::remove_parameter(const std::string& name) {
    for (size_t i = 0; i < params_.size(); ++i)
        if (params_[i].first == name) {
            params_.erase(params_.begin() + int64_t(i));
            return;
        }
}

void Module::collect(const std::string& prefix, bool params, bool recurse,
                     NamedTensors& out) const {
    for (const auto& [n, t] : params ? params_ : buffers_) out.emplace_back(prefix + n, t);
    if (!recurse) return;
    for (const auto& [n, child] : children_) child->collect(prefix + n + ".", params, true, out);
}

NamedTensors Module::named_parameters(bool recurse) const {
    NamedTensors all;
    collect("", true, recurse, all);
    // A parameter shared by two modules (tied weights) appears once, under its
    // first name, so an optimizer steps it once (state_dict keeps every name).
    NamedTensors out;
    std::set<const TensorImpl*> seen;
    for (auto& entry : all)
        if (seen.insert(entry.second.unsafe_impl()).second) out.push_back(std::move(entry));
    return out;
}

NamedTensors Module::named_buffers(bool recurse) const {
    NamedTensors out;
    collect("", false, recurse, out);
    return out;
}

std::vector<Tensor> Module::parameters(bool recurse) const {
    std::vector<Tensor> out;
    for (auto& [_, t] : named_parameters(recurse)) out.push_back(t);
    return out;
}

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
    std::vector<std::pair<std::string, Module*>> out{{"", this}};
    for (auto& [n, child] : children_)
        for (auto& [sub, m] : child->named_modules())
            out.emplace_back(sub.empty() ? n : n + "." + sub, m);
    return out;
}

void Module::train(bool on) {
    training_ = on;
    for (auto& [_, child] : children_) child->train(on);
}

void Module::to(Device device) {
    NoGradGuard no_grad;
    drop_grad_arenas();
    for (auto& [_, t] : named_parameters()) {
        const Tensor grad = t.grad();
        replace_data(t, t.detach().to(device));
        if (grad.defined()) t.set_grad(grad.to(device));
    }
    for (auto& [_, t] : named_buffers()) replace_data(t, t.detach().to(device));
}

void Module::to(DType dtype) {
    EMBER_CHECK(is_floating(dtype), type_name(), ".to: expected a floating dtype, got ",
                dtype_name(dtype));
    NoGradGuard no_grad;
    drop_grad_arenas();
    for (auto& [_, t] : named_parameters()) {
        if (!is_floating(t.dtype())) continue;
        const Tensor grad = t.grad();
        replace_data(t, t.detach().to(dtype));
        if (grad.defined()) t.set_grad(grad.to(dtype));
    }
    for (auto& [_, t] : named_buffers())
        if (is_floating(t.dtype())) replace_data(t, t.detach().to(dtype));
}

void Module::zero_grad(bool set_to_none) {
    NoGradGuard no_grad;
    // The arena reads as the gradients, with zeros where grad() is undefined
    // (what an all-reduce or a fused step over a whole buffer needs): one fill
    // per buffer, then nothing per parameter that lies in it.
    if (grad_arena_) grad_arena_->zero();
    for (auto& [_, t] : named_parameters()) {
        Tensor grad = t.grad();
        if (set_to_none || !grad.defined())
            t.set_grad({});  // an arena slot stays: the next backward lands in it again
        else if (!(grad_arena_ && grad_arena_->holds(grad)))
            grad.fill_(0);
    }
}

std::shared_ptr<const GradArena> Module::flatten_grads() {
    NoGradGuard no_grad;
    grad_arena_ = std::make_shared<const GradArena>(named_parameters());
    return grad_arena_;
}

// to() changes how and where parameters are stored, so no slot fits them any
// more: every module below forgets its arena and every parameter its slot
// (whichever module's arena held it). A gradient still in a slot gets storage
// of its own, so the old buffers are freed once nobody else holds them.
void Module::drop_grad_arenas() {
    for (auto& [_, m] : named_modules()) m->grad_arena_.reset();
    for (auto& [_, t] : named_parameters()) {
        if (!autograd::grad_slot(t).defined()) continue;
        if (autograd::grad_in_slot(t)) t.set_grad(t.grad().clone());
        autograd::set_grad_slot(t, {});
    }
}

NamedTensors Module::state_dict() const {
    NamedTensors out;
    collect("", true, true, out);
    for (auto& entry : named_buffers()) out.push_back(entry);
    return out;
}

void Module::load_state_dict(const NamedTensors& state, bool strict) {
    std::map<std::string, Tensor> given;
    std::vector<std::string> duplicate;
    for (const auto& [n, t] : state)
        if (!given.emplace(n, t).second) duplicate.push_back(n);
    EMBER_CHECK(duplicate.empty(), "load_state_dict: key '", duplicate.front(), "' given twice");

    std::vector<std::string> missing, mis_shaped, unexpected;
    const NamedTensors mine = state_dict();
    std::map<std::string, bool> known;
    for (const auto& [n, t] : mine) {
        known[n] = true;
        auto it = given.find(n);
        if (it == given.end()) {
            missing.push_back(n);
        } else if (it->second.shape() != t.shape()) {
            mis_shaped.push_back(n + " (expected " + shape_str(t.shape()) + ", got " +
                                 shape_str(it->second.shape()) + ")");
        }
    }
    for (const auto& [n, _] : given)
        if (!known.count(n)) unexpected.push_back(n);
    auto list = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
        return s;
    };
    const bool bad = !mis_shaped.empty() || (strict && (!missing.empty() || !unexpected.empty()));
    EMBER_CHECK(!bad, "load_state_dict into ", type_name(), ":",
                missing.empty() || !strict ? "" : " missing keys: " + list(missing) + ";",
                unexpected.empty() || !strict ? "" : " unexpected keys: " + list(unexpected) + ";",
                mis_shaped.empty() ? "" : " wrong shapes: " + list(mis_shaped) + ";");
    NoGradGuard no_grad;
    for (const auto& [n, t] : mine) {
        auto it = given.find(n);
        if (it != given.end()) Tensor(t).copy_(it->second);
    }
}

std::ostream& operator<<(std::ostream& os, Module& m) {
    for (auto& [name, sub] : m.named_modules()) {
        const size_t depth = name.empty() ? 0 : size_t(std::count(name.begin(), name.end(), '.') + 1);
        os << std::string(2 * depth, ' ') << (name.empty() ? "" : name + ": ") << sub->describe()
           << "\n";
    }
    return os;
}

int64_t parameter_count(const Module& m) {
    int64_t n = 0;
    for (const Tensor& t : m.parameters()) n += t.numel();
    return n;
}

}  // namespace ember::nn
