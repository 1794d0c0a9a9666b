// Module: the base of every layer and model — named parameters, buffers and
// submodules (dotted names, registration order), train/eval, to(device or
// dtype), zero_grad, flat gradient buffers and state_dict / load_state_dict.
// docs/nn.md.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "../core/tensor.h"

namespace ember::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
class GradArena;  // nn/grad_arena.h

/// Base class of layers and models. Subclasses register what they own in
/// their constructor and implement forward. A Module is movable (layers are
/// built as values and moved into their parents) but not copyable.
class Module {
public:
    Module() = default;
    virtual ~Module() = default;
    Module(Module&&) = default;
    Module& operator=(Module&&) = default;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;

    /// The layer's computation. The base version throws: modules that are
    /// only containers of parameters need not implement it.
    virtual Tensor forward(const Tensor& input);
    /// Calls forward: `model(x)`.
    Tensor operator()(const Tensor& input) { return forward(input); }
    /// The class's name ("Linear"; for a module of one's own, its C++ class
    /// name without namespaces, "Net"), for messages and printing.
    virtual std::string type_name() const;
    /// One line with the type and the sizes, e.g. "Linear(in=784, out=512, bias=true)".
    virtual std::string describe() const { return type_name(); }

    /// Parameters of this module and (recurse) its submodules, in registration order.
    std::vector<Tensor> parameters(bool recurse = true) const;
    /// The same with dotted names ("layer1.conv.weight").
    NamedTensors named_parameters(bool recurse = true) const;
    NamedTensors named_buffers(bool recurse = true) const;
    /// Direct submodules with their names.
    const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& named_children() const {
        return children_;
    }
    /// This module ("") and every submodule below it, depth first, with dotted names.
    std::vector<std::pair<std::string, Module*>> named_modules();

    /// Training mode (dropout active, batch norm uses batch statistics) for
    /// this module and all below it.
    virtual void train(bool on = true);
    void eval() { train(false); }
    bool is_training() const { return training_; }

    /// Moves every parameter and buffer to `device`; tensors keep their
    /// identity (handles held elsewhere, e.g. by an optimizer, see the move).
    /// Takes every parameter out of its gradient arena (see flatten_grads).
    void to(Device device);
    /// Converts floating parameters and buffers to `dtype` (integer buffers
    /// stay). Takes every parameter out of its gradient arena, as to(Device).
    void to(DType dtype);
    /// Clears gradients: to none by default (docs/tips.md #10), or to zeros. With an
    /// arena (flatten_grads) its buffers are zeroed either way, one fill each,
    /// and the next backward lands back in the slots.
    void zero_grad(bool set_to_none = true);

    /// Puts the gradients of every parameter that requires grad in flat
    /// buffers, one per (dtype, device), each gradient a contiguous view at a
    /// 64-byte aligned offset, and returns the arena (nn/grad_arena.h). A
    /// gradient a parameter has is copied in; one it lacks stays undefined
    /// until a backward writes it into its slot. From then on backward adds
    /// into the slots in place, so data pointers stay put; zero_grad keeps
    /// them. to() invalidates the arena of this module and those below it
    /// (grad_arena() is then null, and each gradient gets storage of its
    /// own); an ancestor's arena stops holding these gradients without
    /// knowing it (docs/nn.md): call flatten_grads again. Calling it again
    /// re-flattens.
    std::shared_ptr<const GradArena> flatten_grads();
    /// The arena of the last flatten_grads, or null (none, or to() since).
    std::shared_ptr<const GradArena> grad_arena() const { return grad_arena_; }

    /// Parameters then buffers, with dotted names, as saved to weight files.
    NamedTensors state_dict() const;
    /// Copies values in by name. Strict (the default): every key must match
    /// a parameter or buffer and every one must be present; shapes must match.
    /// The error lists the missing, unexpected and mis-shaped keys. Nothing is
    /// changed unless every check passes.
    void load_state_dict(const NamedTensors& state, bool strict = true);

    /// Registers a parameter (marked requires_grad unless `requires_grad` is
    /// false) and returns it; the handle shares the tensor with the module.
    Tensor register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
    /// Registers a buffer (saved in state_dict, moved by to(), never trained).
    Tensor register_buffer(const std::string& name, Tensor t);
    /// Registers a submodule given by value or by shared_ptr; returns a shared_ptr to it.
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, M&& module) {
        return register_module(name, std::make_shared<std::decay_t<M>>(std::forward<M>(module)));
    }
    template <class M>
    std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> module) {
        add_child(name, module);
        return module;
    }

protected:
    /// Replaces a registered parameter or buffer's tensor data in place: every
    /// handle to it sees the new value (e.g. fold_batchnorm).
    void reset_tensor(const std::string& name, const Tensor& t);
    /// Replaces child i (Sequential::replace).
    void replace_child(size_t i, std::shared_ptr<Module> m);
    /// Drops a registered parameter (Conv2d::set_bias with an undefined bias).
    void remove_parameter(const std::string& name);

private:
    void add_child(const std::string& name, std::shared_ptr<Module> m);
    void check_new_name(const std::string& name) const;
    void collect(const std::string& prefix, bool params, bool recurse, NamedTensors& out) const;

    void drop_grad_arenas();

    NamedTensors params_;
    NamedTensors buffers_;
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
    bool training_ = true;
    std::shared_ptr<const GradArena> grad_arena_;
};

/// Prints the module tree, one line per module with its describe().
std::ostream& operator<<(std::ostream& os, Module& m);

/// Total number of elements of the module's parameters.
int64_t parameter_count(const Module& m);

}  // namespace ember::nn
